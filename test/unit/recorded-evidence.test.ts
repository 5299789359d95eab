/**
 * `collect --probe` records each node's probes and their kernel evidence (conntrack, a netfilter trace) beside the
 * node's reads; `svc --snapshot` replays them as recorded, saying when, never as a fresh read. An older bundle says
 * the evidence was not recorded.
 */
import assert from 'node:assert/strict'
import {existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {test} from 'node:test'
import {Chalk} from 'chalk'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {gatherSnapshot} from '../../src/diagnosis/gather.js'
import {planProbes, PROBE_SETTINGS} from '../../src/diagnosis/probe-plan.js'
import {writeBundle} from '../../src/diagnosis/write-bundle.js'
import {loadNodeRecording} from '../../src/node/read/bundle.js'
import {KERNEL_EVIDENCE_FILE} from '../../src/node/probe/recorded-evidence.js'
import type {NodeProbes, ProbeRun} from '../../src/node/probe/tcp-probe.js'
import {parseNftTrace} from '../../src/parse/nft-trace.js'
import {buildReport} from '../../src/report/report.js'
import {renderHuman} from '../../src/report/human.js'
import {kernelFrom, probeLines} from '../helpers/conntrack-lines.js'
import {schemaErrors} from '../helpers/report-schema.js'

const EXAMPLE = 'examples/broken-cluster'
const META = {meta: {toolVersion: '0.0.0-test', time: '2026-01-01T00:00:00Z', context: null}}
const NODE_A = '10.200.0.11'
const TABLE = 'kpd_trace_a1b2c3_1795000000'

/** node-a's first ClusterIP probe as `nft monitor trace` printed it: through the doctor's table into kube-proxy's. */
const TRACE = [
  `trace id 44a578a4 inet ${TABLE} output packet: oif "eth0" ip saddr ${NODE_A} ip daddr 10.96.10.10 ip protocol tcp tcp sport 41508 tcp dport 80 tcp flags == syn `,
  `trace id 44a578a4 inet ${TABLE} output rule ip daddr . meta l4proto . th dport @probes4 tcp flags syn limit rate 20/second burst 32 packets meta nftrace set 1 # handle 5 (verdict continue)`,
  `trace id 44a578a4 inet ${TABLE} output policy accept `,
  `trace id 44a578a4 ip nat OUTPUT packet: oif "eth0" ip saddr ${NODE_A} ip daddr 10.96.10.10 tcp sport 41508 tcp dport 80 tcp flags == syn `,
  'trace id 44a578a4 ip nat OUTPUT rule  counter packets 0 bytes 0 jump KUBE-SERVICES # handle 12 (verdict jump KUBE-SERVICES)',
].join('\n')

/**
 * The example's two nodes probing: node-a's conntrack read (its ClusterIP probes spread over the endpoints, one
 * address the walk never DNATs to) and traced; node-b's conntrack not readable.
 */
function probesOf(cluster: Parameters<typeof planProbes>[0]): ProbeRun {
  const web: Array<[string, 'replied']> = [
    ['10.244.1.10:8080', 'replied'],
    ['10.244.2.10:8080', 'replied'],
    ['10.244.2.11:8080', 'replied'],
  ]
  const nodes: NodeProbes[] = ['node-a', 'node-b'].map((node) => ({
    node,
    via: 'an SSH port forward',
    tallies: planProbes(cluster, node).targets.map((target) => {
      const attempts = target.attempts ?? PROBE_SETTINGS.vipAttempts
      return {target, attempts, connected: attempts, refused: 0, timedOut: 0, unreachable: 0}
    }),
    ...(node === 'node-a'
      ? {
          kernel: kernelFrom({
            '10.96.10.10:80': probeLines(NODE_A, '10.96.10.10', 80, [...web, ['10.244.9.9:8080', 'replied']]),
            [`${NODE_A}:30080`]: probeLines(NODE_A, NODE_A, 30080, web),
          }),
          kernelTrace: {traced: true as const, table: TABLE, packets: parseNftTrace(TRACE), removedStale: []},
        }
      : {kernel: {read: false as const, reason: 'no conntrack tool on the node (sh: 1: conntrack: not found)'}}),
  }))
  return {ran: true, settings: PROBE_SETTINGS, nodes, notes: []}
}

test('a bundle collected with --probe replays its kernel evidence: the same kernelTrace entries, said to be recorded at collection time', async () => {
  const work = mkdtempSync(join(tmpdir(), 'kpd-recorded-'))
  try {
    const g = await gatherSnapshot(EXAMPLE, 'shop', 'web')
    const probes = probesOf(g.cluster)
    const live = buildReport(diagnose(g.cluster, g.observations, {probes}), META)
    assert.equal(live.kernelTrace.length, 2, 'node-a: its ClusterIP and its NodePort')
    assert.ok(live.kernelTrace[0].rules.length > 0, 'the trace gives rules')
    const recordings = new Map(g.observations.map((o) => [o.name, loadNodeRecording(join(EXAMPLE, 'nodes', o.name))!]))
    const out = join(work, 'bundle')
    writeBundle(out, g.cluster, recordings, {namespace: 'shop', name: 'web', observations: g.observations, probes})
    assert.ok(existsSync(join(out, 'nodes', 'node-a', KERNEL_EVIDENCE_FILE)))
    const recordedAt = (JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8')) as {recordedAt: string}).recordedAt

    const again = await gatherSnapshot(out, 'shop', 'web')
    assert.deepEqual(again.warnings, [])
    assert.equal(again.probes?.ran, false, 'a snapshot opens no connection')
    const d = diagnose(again.cluster, again.observations, {probes: again.probes})
    const replay = buildReport(d, META)
    assert.equal(schemaErrors(replay), null)
    assert.deepEqual(
      replay.kernelTrace,
      live.kernelTrace.map((k) => ({...k, recordedAt})),
    )
    // The replay confirms nothing of its own: the probes' own checks are not judged from a recording.
    assert.equal(replay.probes.ran, false)
    assert.deepEqual(
      d.findings.filter((f) => f.code.startsWith('KPD-PROBE')).map((f) => f.code),
      [],
    )
    assert.deepEqual(
      d.findings.filter((f) => f.code === 'KPD-KERNEL-DISAGREES').map((f) => f.message),
      [
        `node-a: ClusterIP 10.96.10.10:80 (http, node→ClusterIP): ${replay.kernelTrace[0].detail} (recorded at collection time, ${recordedAt})`,
      ],
    )
    assert.deepEqual(
      replay.notChecked.filter((n) => n.check === 'kernel-evidence').map((n) => [n.node, n.reason]),
      [['node-b', 'not confirmed: no conntrack tool on the node (sh: 1: conntrack: not found)']],
    )
    const lines = renderHuman(replay, new Chalk({level: 0})).split('\n')
    const start = lines.findIndex((l) => l.startsWith('Kernel evidence'))
    assert.equal(
      lines[start],
      `Kernel evidence (replayed from the bundle: recorded at collection time, ${recordedAt}, not a fresh read; conntrack as read right after the probes then; entries matched by the seconds since the probes; netfilter's own trace of each probe, --kernel-trace)`,
    )
  } finally {
    rmSync(work, {recursive: true, force: true})
  }
})

test('an older bundle (no evidence recorded): every read node says "not recorded", no Kernel evidence section', async () => {
  const g = await gatherSnapshot(EXAMPLE, 'shop', 'web')
  const report = buildReport(diagnose(g.cluster, g.observations, {probes: g.probes}), META)
  assert.deepEqual(report.kernelTrace, [])
  assert.deepEqual(
    report.notChecked.filter((n) => n.check === 'kernel-evidence').map((n) => [n.node, n.reason, n.required]),
    ['node-a', 'node-b'].map((node) => [
      node,
      'not recorded in the bundle (collected without --probe, or by a version that did not record it)',
      false,
    ]),
  )
  assert.ok(!renderHuman(report, new Chalk({level: 0})).includes('Kernel evidence'))
})

test('a damaged evidence file is one warning naming it; that node has none, the others stand', async () => {
  const work = mkdtempSync(join(tmpdir(), 'kpd-recorded-'))
  try {
    const g = await gatherSnapshot(EXAMPLE, 'shop', 'web')
    const recordings = new Map(g.observations.map((o) => [o.name, loadNodeRecording(join(EXAMPLE, 'nodes', o.name))!]))
    const out = join(work, 'bundle')
    const probes = probesOf(g.cluster)
    writeBundle(out, g.cluster, recordings, {namespace: 'shop', name: 'web', observations: g.observations, probes})
    writeFileSync(join(out, 'nodes', 'node-b', KERNEL_EVIDENCE_FILE), '{"apiVersion": "kproxy-doctor/v1"')
    const again = await gatherSnapshot(out, 'shop', 'web')
    assert.equal(again.warnings.length, 1)
    assert.match(again.warnings[0], /^kernel-evidence\.json of node-b: .*: its kernel evidence is not replayed$/)
    const report = buildReport(diagnose(again.cluster, again.observations, {probes: again.probes}), META)
    assert.deepEqual([...new Set(report.kernelTrace.map((k) => k.node))], ['node-a'])
    assert.deepEqual(
      report.notChecked.filter((n) => n.check === 'kernel-evidence').map((n) => [n.node, n.reason]),
      [['node-b', 'not recorded in the bundle (collected without --probe, or by a version that did not record it)']],
    )
  } finally {
    rmSync(work, {recursive: true, force: true})
  }
})
