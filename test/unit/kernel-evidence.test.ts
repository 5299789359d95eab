import assert from 'node:assert/strict'
import {test} from 'node:test'
import {Chalk} from 'chalk'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {planProbes, PROBE_SETTINGS} from '../../src/diagnosis/probe-plan.js'
import {matchProbeEntries, readKernelEvidence} from '../../src/node/probe/kernel-evidence.js'
import type {NodeProbes} from '../../src/node/probe/tcp-probe.js'
import type {NodeAccess, RunResult} from '../../src/node/transport/node-access.js'
import {parseConntrackList} from '../../src/parse/conntrack.js'
import {buildReport} from '../../src/report/report.js'
import {renderHuman} from '../../src/report/human.js'
import {NODES} from '../fixtures/lab-cluster.js'
import {conntrackLine, kernelFrom, probeLines} from '../helpers/conntrack-lines.js'
import {offlineCluster} from '../helpers/offline-cluster.js'
import {schemaErrors} from '../helpers/report-schema.js'

const A = '10.200.0.11'
const VIP = '10.96.10.10'

test('probes are matched to entries by the seconds since they began, the state telling each entry its age', () => {
  const entries = parseConntrackList(
    [
      conntrackLine(A, VIP, 80, '10.244.1.10:8080', 'replied', 40001, 2),
      conntrackLine(A, VIP, 80, '10.244.2.11:8080', 'no reply', 40002, 1),
      conntrackLine(A, VIP, 80, '10.244.2.11:8080', 'reset', 40003, 3),
      // Older than the probes: a TIME_WAIT of a minute ago, a reset of 9 s ago.
      conntrackLine(A, VIP, 80, '10.244.2.10:8080', 'replied', 39000, 60),
      conntrackLine('10.244.1.10', VIP, 80, '10.244.2.10:8080', 'reset', 39001, 9),
      // Another port of the same address.
      conntrackLine(A, VIP, 443, '10.244.2.10:8443', 'replied', 40004, 1),
      // A long-lived connection: kube-proxy's 24 h established timeout, set an hour ago.
      `tcp      6 82800 ESTABLISHED src=10.244.1.10 dst=${VIP} sport=39002 dport=80 src=10.244.2.10 dst=10.244.1.10 sport=8080 dport=39002 [ASSURED] mark=0 use=1`,
    ].join('\n'),
  )
  assert.deepEqual(matchProbeEntries(entries, {host: VIP, port: 80, attempts: 8}, 4200), {
    matchedBy: 'time-window',
    connections: [
      {endpoint: '10.244.1.10:8080', dnat: true, answer: 'replied', state: 'TIME_WAIT', text: entries[0].text},
      {endpoint: '10.244.2.11:8080', dnat: true, answer: 'no reply', state: 'SYN_SENT', text: entries[1].text},
      {endpoint: '10.244.2.11:8080', dnat: true, answer: 'reset', state: 'CLOSE', text: entries[2].text},
    ],
    others: 0,
  })
  // Two probes made, three entries in the window: one is other traffic, said so.
  assert.equal(matchProbeEntries(entries, {host: VIP, port: 80, attempts: 2}, 4200).others, 1)
  // A window of one second keeps only the entries whose last packet is at most two seconds old.
  assert.deepEqual(
    matchProbeEntries(entries, {host: VIP, port: 80, attempts: 8}, 900).connections.map((c) => c.state),
    ['TIME_WAIT', 'SYN_SENT'],
  )
})

test('where the transport reports the probes’ source ports, those alone are the probes’ entries, at any age', () => {
  const entries = parseConntrackList(
    [
      conntrackLine(A, VIP, 80, '10.244.1.10:8080', 'replied', 40001, 2),
      conntrackLine(A, VIP, 80, '10.244.2.10:8080', 'replied', 40002, 90),
      conntrackLine(A, VIP, 80, '10.244.2.11:8080', 'replied', 40003, 1),
    ].join('\n'),
  )
  const m = matchProbeEntries(entries, {host: VIP, port: 80, attempts: 2, sourcePorts: [40002, 40003]}, 1000)
  assert.equal(m.matchedBy, 'source-port')
  assert.deepEqual(
    m.connections.map((c) => c.endpoint),
    ['10.244.2.10:8080', '10.244.2.11:8080'],
  )
})

test('an entry the kernel did not translate answers from the address probed: no DNAT', () => {
  const entries = parseConntrackList(conntrackLine(A, A, 30080, `${A}:30080`, 'no reply', 40001) + '\n')
  assert.deepEqual(
    matchProbeEntries(entries, {host: A, port: 30080, attempts: 1}, 1000).connections.map((c) => [c.endpoint, c.dnat]),
    [[`${A}:30080`, false]],
  )
})

/** A stand-in access answering `conntrackProbe` reads in turn; records the arguments it was asked with. */
function access(answers: RunResult[], asked: unknown[]): NodeAccess {
  return {
    run: async (key, ...args) => {
      assert.equal(key, 'conntrackProbe')
      asked.push(args[0])
      return answers.shift()!
    },
    openTcp: async () => ({kind: 'refused', outcome: 'not-probed', reason: 'not in this test'}),
    readFile: async () => ({kind: 'missing', reason: 'not in this test'}),
    describe: () => ({transport: 'ssh', address: 'kpd@node-a:22', tcpVia: 'an SSH port forward'}),
    close: () => undefined,
  }
}

const ran = (code: number, stdout: string, stderr = ''): RunResult => ({
  kind: 'ran',
  code,
  stdout: Buffer.from(stdout),
  stderr,
})
const probedAddresses = [
  {host: VIP, port: 80, attempts: 1},
  {host: A, port: 30080, attempts: 1},
]

test('the kernel evidence of a node: one read per probed address, each matched; what could not be read says why', async () => {
  let clock = 10_000
  const now = () => (clock += 500)
  const asked: unknown[] = []
  const ok = await readKernelEvidence(
    access(
      [ran(0, conntrackLine(A, VIP, 80, '10.244.2.10:8080', 'replied', 40001) + '\n'), ran(0, 'garbage line\n')],
      asked,
    ),
    probedAddresses,
    9_000,
    now,
  )
  assert.deepEqual(asked, [
    {address: VIP, port: 80},
    {address: A, port: 30080},
  ])
  assert.ok(ok.read)
  assert.deepEqual(
    ok.targets.map((t) => [t.host, t.port, t.connections.map((c) => c.endpoint), t.error ?? null]),
    [
      [VIP, 80, ['10.244.2.10:8080'], null],
      [A, 30080, [], 'conntrack output line 1: not "PROTOCOL NUMBER TIMEOUT ...": garbage line'],
    ],
  )
  const cases: Array<[RunResult, string]> = [
    [ran(127, '', 'sh: 1: conntrack: not found\n'), 'no conntrack tool on the node (sh: 1: conntrack: not found)'],
    [ran(1, '', 'sudo: a password is required\n'), 'conntrack -L failed: sudo: a password is required'],
    [
      ran(1, '', 'conntrack v1.4.7 (conntrack-tools): Operation failed: Operation not permitted\n'),
      'conntrack -L failed: conntrack v1.4.7 (conntrack-tools): Operation failed: Operation not permitted',
    ],
    [{kind: 'not-recorded', what: 'conntrack -L'}, 'conntrack not read: conntrack -L'],
  ]
  for (const [answer, reason] of cases)
    assert.deepEqual(await readKernelEvidence(access([answer], []), probedAddresses, 0, now), {read: false, reason})
})

/**
 * The lab's two nodes probing as recorded, with kernel evidence: node-a's ClusterIP probes recorded with a fifth of
 * the connections sent to 10.244.9.9:8080, an address the walk never DNATs to (a deliberately wrong walk, seen from
 * the other side); node-b's conntrack not readable.
 */
function labProbes(): NodeProbes[] {
  const {cluster} = offlineCluster({})
  const web: Array<[string, 'replied']> = [
    ['10.244.1.10:8080', 'replied'],
    ['10.244.2.10:8080', 'replied'],
    ['10.244.2.11:8080', 'replied'],
  ]
  return NODES.map((n) => ({
    node: n.name,
    via: 'an SSH port forward',
    tallies: planProbes(cluster, n.name).targets.map((target) => {
      const attempts = target.attempts ?? PROBE_SETTINGS.vipAttempts
      return {target, attempts, connected: attempts, refused: 0, timedOut: 0, unreachable: 0}
    }),
    kernel:
      n.name === 'node-a'
        ? kernelFrom({
            [`${VIP}:80`]: probeLines(A, VIP, 80, [...web, ['10.244.9.9:8080', 'replied']]),
            [`${A}:30080`]: probeLines(A, A, 30080, web),
          })
        : {read: false, reason: 'no conntrack tool on the node (sh: 1: conntrack: not found)'},
  }))
}

test('a walk the kernel contradicts: KPD-KERNEL-DISAGREES with both sides, the Kernel evidence section, the JSON', () => {
  const {cluster, observations} = offlineCluster({})
  const d = diagnose(cluster, observations, {
    probes: {ran: true, settings: PROBE_SETTINGS, nodes: labProbes(), notes: []},
  })
  const disagree = d.findings.filter((f) => f.code === 'KPD-KERNEL-DISAGREES')
  assert.deepEqual(
    disagree.map((f) => [f.node, f.message]),
    [
      [
        'node-a',
        'node-a: ClusterIP 10.96.10.10:80 (http, node→ClusterIP): the walk DNATs to 10.244.1.10:8080, 10.244.2.10:8080, 10.244.2.11:8080, but the kernel sent 10.244.1.10:8080 ×2 (replied), 10.244.2.10:8080 ×2 (replied), 10.244.2.11:8080 ×2 (replied), 10.244.9.9:8080 ×2 (replied): 10.244.9.9:8080 is not among them',
      ],
    ],
  )
  assert.equal(disagree[0].evidence.length, 8, 'each conntrack line is evidence')
  const report = buildReport(d, {meta: {toolVersion: '0.0.0-test', time: '2026-01-01T00:00:00Z', context: null}})
  assert.equal(schemaErrors(report), null)
  assert.deepEqual(
    report.kernelTrace.map((k) => [
      k.node,
      k.target,
      k.entry,
      k.endpoint,
      k.endpoints.length,
      k.replied,
      k.agreesWithWalk,
    ]),
    [
      ['node-a', '10.96.10.10:80', 'node→ClusterIP', null, 4, true, false],
      ['node-a', '10.200.0.11:30080', 'outside→NodePort', null, 3, true, true],
    ],
  )
  assert.deepEqual(report.kernelTrace[0].rules, [])
  assert.deepEqual(
    report.notChecked.filter((n) => n.check === 'kernel-evidence'),
    [
      {
        node: 'node-b',
        check: 'kernel-evidence',
        codes: ['KPD-KERNEL-DISAGREES'],
        reason: 'not confirmed: no conntrack tool on the node (sh: 1: conntrack: not found)',
        required: false,
      },
    ],
  )
  const text = renderHuman(report, new Chalk({level: 0}))
  const lines = text.split('\n')
  const start = lines.findIndex((l) => l.startsWith('Kernel evidence'))
  const end = lines.findIndex((l, i) => i > start && !l.startsWith(' '))
  const section = lines.slice(start, end).join('\n')
  assert.deepEqual(section.split('\n'), [
    'Kernel evidence (conntrack, read right after the probes; entries matched by the seconds since the probes)',
    '  node-a',
    '    ✗ ClusterIP 10.96.10.10:80 (http): disagrees: the walk DNATs to 10.244.1.10:8080, 10.244.2.10:8080, 10.244.2.11:8080, but the kernel sent 10.244.1.10:8080 ×2 (replied), 10.244.2.10:8080 ×2 (replied), 10.244.2.11:8080 ×2 (replied), 10.244.9.9:8080 ×2 (replied): 10.244.9.9:8080 is not among them',
    '    ✓ NodePort 10.200.0.11:30080 (http): agrees with the walk: the kernel sent 10.244.1.10:8080 ×3 (replied), 10.244.2.10:8080 ×3 (replied), 10.244.2.11:8080 ×2 (replied); the walk DNATs to 10.244.1.10:8080, 10.244.2.10:8080, 10.244.2.11:8080',
    '  node-b',
    '    ? kernel evidence: not confirmed: no conntrack tool on the node (sh: 1: conntrack: not found)',
  ])
})

test('a dual-stack Service: IPv6 probes’ entries name [address]:port endpoints, judged against the IPv6 walk', () => {
  const state = {dualStack: true}
  const {cluster, observations} = offlineCluster(state)
  const v6 = (ep: string, sport: number) =>
    `tcp      6 118 TIME_WAIT src=fd00:10:200::11 dst=fd00:10:96::10:10 sport=${sport} dport=80 src=${ep} dst=fd00:10:200::11 sport=8080 dport=${sport} [ASSURED] mark=0 use=1`
  const lines = ['fd00:10:244:1::10', 'fd00:10:244:2::10', 'fd00:10:244:2::11'].map((ep, i) => v6(ep, 41000 + i))
  const nodes: NodeProbes[] = NODES.map((n) => ({
    node: n.name,
    via: 'an SSH port forward',
    tallies: planProbes(cluster, n.name).targets.map((target) => {
      const attempts = target.attempts ?? PROBE_SETTINGS.vipAttempts
      return {target, attempts, connected: attempts, refused: 0, timedOut: 0, unreachable: 0}
    }),
    ...(n.name === 'node-a' ? {kernel: kernelFrom({'fd00:10:96::10:10:80': lines}, 3)} : {}),
  }))
  const d = diagnose(cluster, observations, {probes: {ran: true, settings: PROBE_SETTINGS, nodes, notes: []}})
  assert.deepEqual(
    d.kernel.map((k) => [k.node, k.target.host, k.connections.map((c) => c.endpoint), k.agreesWithWalk]),
    [
      [
        'node-a',
        'fd00:10:96::10:10',
        ['[fd00:10:244:1::10]:8080', '[fd00:10:244:2::10]:8080', '[fd00:10:244:2::11]:8080'],
        true,
      ],
    ],
  )
  assert.deepEqual(d.findings, [])
})
