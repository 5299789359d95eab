import assert from 'node:assert/strict'
import {describe, test} from 'node:test'
import {labGuard} from '../helpers/lab-guard.js'
import {withLab} from '../helpers/lab-suite.js'
import {runCli, type CliResult} from '../helpers/run-cli.js'
import type {NetnsLab} from '../lab/netns-lab.js'
import {labAccess} from '../helpers/lab-cli.js'

/**
 * Kernel evidence against the netns lab: after each node's live probes (real connections from inside the node's
 * namespace, through the real sshd), the doctor reads the node's real conntrack table and names the endpoint the
 * kernel's DNAT chose for each probe of the ClusterIP and the NodePort, set against its walk of the same path.
 */
const why = labGuard()

const WEB = ['10.244.1.10:8080', '10.244.2.10:8080', '10.244.2.11:8080']
const STALE = '10.244.2.99:8080'
/** The lab's kube-proxy rules (test/lab): the Service's chains and the rules of its ClusterIP's and NodePort's way. */
const SVC_CHAIN = 'KUBE-SVC-67NZLRHBNDSAWJRO'
const EXT_CHAIN = 'KUBE-EXT-67NZLRHBNDSAWJRO'
const CLUSTER_IP_RULE = `-A KUBE-SERVICES -d 10.96.10.10/32 -p tcp -m comment --comment "shop/web:http cluster IP" -m tcp --dport 80 -j ${SVC_CHAIN}`
const SVC_MASQ_RULE = `-A ${SVC_CHAIN} ! -s 10.244.0.0/16 -d 10.96.10.10/32 -p tcp -m comment --comment "shop/web:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ`
const NODEPORT_RULE = `-A KUBE-NODEPORTS -p tcp -m comment --comment "shop/web:http" -m tcp --dport 30080 -j ${EXT_CHAIN}`
const EXT_MASQ_RULE = `-A ${EXT_CHAIN} -m comment --comment "masquerade traffic for shop/web:http external destinations" -j KUBE-MARK-MASQ`
const EXT_JUMP_RULE = `-A ${EXT_CHAIN} -j ${SVC_CHAIN}`
const ENDPOINT_CHAINS = [
  ['10.244.1.10:8080', 'KUBE-SEP-FZQ6KZLGXRSKN2AD'],
  ['10.244.2.10:8080', 'KUBE-SEP-F45V6TZZSXLO3WFM'],
  ['10.244.2.11:8080', 'KUBE-SEP-BTZNBNILETY57XCS'],
] as const
/** Runs of the doctor at most, for a fault that only a share of the probes meet (each run sends 16 per node). */
const MAX_RUNS = 3

interface KernelItem {
  node: string
  target: string
  kind: string
  entry: string
  endpoint: string | null
  endpoints: string[]
  replied: boolean | null
  matchedBy: string | null
  connections: Array<{endpoint: string; dnat: boolean; answer: string; state: string | null}>
  others: number
  unrecorded: number
  rules: unknown[]
  agreesWithWalk: boolean | null
  detail: string
  counters?: {
    moved: Array<{table: string; chain: string; rule: string; packets: number; bytes: number; probes: number}>
    busy: boolean
    note: string
  }
}

describe('kernel evidence of the live probes against the netns lab', {skip: why}, () => {
  let lab: NetnsLab
  withLab((l) => (lab = l))

  const doctor = (...extra: string[]): Promise<CliResult> =>
    runCli(['svc', 'web', '-n', 'shop', ...labAccess(lab), ...extra])
  const kernel = (r: CliResult): KernelItem[] => r.json.kernelTrace
  const codes = (r: CliResult) => r.json.findings.map((f: {code: string; node: string | null}) => [f.code, f.node])
  /** Runs the doctor until `met` holds of a run's report (bounded), and returns that run. */
  const runUntil = async (met: (r: CliResult) => boolean): Promise<CliResult> => {
    let r: CliResult | undefined
    for (let i = 0; i < MAX_RUNS; i++) {
      r = await doctor('-o', 'json')
      if (met(r)) return r
    }
    return r!
  }

  test('healthy lab: every probed Service address has the kernel choosing the walk’s endpoints, every reply back, agreeing', async () => {
    const r = await doctor('-o', 'json')
    assert.equal(r.code, 0, r.stdout + r.stderr)
    assert.deepEqual(
      kernel(r).map((k) => [k.node, k.kind, k.target, k.entry, k.matchedBy, k.agreesWithWalk]),
      [
        ['node-a', 'ClusterIP', '10.96.10.10:80', 'node→ClusterIP', 'time-window', true],
        ['node-a', 'NodePort', '10.200.0.11:30080', 'outside→NodePort', 'time-window', true],
        ['node-b', 'ClusterIP', '10.96.10.10:80', 'node→ClusterIP', 'time-window', true],
        ['node-b', 'NodePort', '10.200.0.12:30080', 'outside→NodePort', 'time-window', true],
      ],
      JSON.stringify(kernel(r), null, 1),
    )
    for (const k of kernel(r)) {
      assert.equal(k.connections.length, 8 + k.others, `${k.node} ${k.target}: one entry per probe`)
      assert.ok(
        k.connections.every((c) => c.dnat && WEB.includes(c.endpoint) && c.answer === 'replied'),
        `${k.node} ${k.target}: ${JSON.stringify(k.connections)}`,
      )
      assert.equal(k.replied, true)
      assert.deepEqual(k.rules, [])
    }
    assert.deepEqual(
      r.json.notChecked.filter((n: {check: string}) => n.check === 'kernel-evidence'),
      [],
    )
    const human = await doctor()
    assert.equal(human.code, 0, human.stderr)
    assert.match(
      human.stdout,
      /^Kernel evidence \(conntrack, read right after the probes; entries matched by the seconds since the probes\)$/m,
    )
    for (const [node, nodePort] of [
      ['node-a', '10.200.0.11:30080'],
      ['node-b', '10.200.0.12:30080'],
    ]) {
      assert.match(human.stdout, new RegExp(`^  ${node}$`, 'm'))
      // This run's conntrack window may hold the JSON run's entries of a second before: then it says so, rightly.
      assert.match(
        human.stdout,
        /^ {4}✓ ClusterIP 10\.96\.10\.10:80 \(http\): agrees with the walk(?: \(other traffic among the entries: evidence, not proof\))?: the kernel sent 10\.244\./m,
      )
      assert.match(
        human.stdout,
        new RegExp(`^ {4}✓ NodePort ${nodePort.replaceAll('.', '\\.')} \\(http\\): agrees with the walk`, 'm'),
      )
    }
  })

  test('stale endpoint on node-a: the kernel names 10.244.2.99:8080, no reply, as the walk does: no disagreement', async () => {
    lab.applyRules('node-a', {staleEndpoint: {ip: '10.244.2.99', port: 8080}})
    try {
      const chose = (r: CliResult) =>
        kernel(r).filter((k) => k.node === 'node-a' && k.connections.some((c) => c.endpoint === STALE))
      const r = await runUntil((x) => chose(x).length > 0)
      assert.equal(r.code, 1, r.stdout + r.stderr)
      const items = chose(r)
      assert.ok(
        items.length > 0,
        `in ${MAX_RUNS} runs the kernel never chose the stale endpoint: ${JSON.stringify(kernel(r))}`,
      )
      for (const k of items) {
        assert.ok(
          k.connections.filter((c) => c.endpoint === STALE).every((c) => c.dnat && c.answer === 'no reply'),
          JSON.stringify(k.connections),
        )
        assert.equal(k.agreesWithWalk, true, k.detail)
        assert.match(k.detail, /10\.244\.2\.99:8080(?: ×\d)? \(no reply\)/)
        assert.match(k.detail, /the walk DNATs to .*10\.244\.2\.99:8080/)
      }
      assert.ok(!codes(r).some(([code]: [string]) => code === 'KPD-KERNEL-DISAGREES'), JSON.stringify(codes(r)))
      assert.ok(
        kernel(r)
          .filter((k) => k.node === 'node-b')
          .every((k) => k.agreesWithWalk === true && !k.endpoints.includes(STALE)),
        'node-b never sends to it',
      )
    } finally {
      lab.clearFaults()
    }
  })

  test('web-b2 refusing: the kernel keeps no entry of a refused connection, says so; what it kept never names web-b2 answering', async () => {
    await lab.listenOn('web-b2', 8081)
    try {
      const r = await doctor('-o', 'json')
      assert.equal(r.code, 1, r.stdout + r.stderr)
      assert.deepEqual(codes(r), [['KPD-BACKEND-REFUSED', 'node-b']])
      const tally = (k: KernelItem) =>
        r.json.probes.nodes
          .find((n: {node: string}) => n.node === k.node)
          .targets.find((t: {address: string}) => t.address === k.target)
      for (const k of kernel(r)) {
        const t = tally(k)
        assert.equal(t.connected + t.refused, t.attempts, JSON.stringify(t))
        // A reset as the only answer removes the entry at once (nf_conntrack's tcp tracker): one missing entry per refusal.
        assert.equal(k.unrecorded, t.refused, `${k.node} ${k.target}: ${JSON.stringify(k)}`)
        assert.equal(k.connections.length, t.connected + k.others, JSON.stringify(k.connections))
        assert.ok(
          k.connections.every(
            (c) => c.dnat && c.answer === 'replied' && WEB.includes(c.endpoint) && c.endpoint !== WEB[2],
          ),
          JSON.stringify(k.connections),
        )
        assert.equal(k.agreesWithWalk, true, k.detail)
        if (t.refused > 0)
          assert.match(
            k.detail,
            new RegExp(
              `; ${t.refused} of 8 probes left no entry \\(${t.refused} refused: the kernel removes an entry whose only answer is a reset, and with it its choice\\)`,
            ),
          )
      }
      assert.ok(
        kernel(r).some((k) => k.unrecorded > 0),
        'some probe met web-b2',
      )
    } finally {
      await lab.listenOn('web-b2', 8080)
    }
  })

  test('rule counters: the KUBE-SERVICES, KUBE-SVC and KUBE-SEP rules the probes hit are reported as moved, with their exact lines', async () => {
    const r = await doctor('-o', 'json')
    assert.equal(r.code, 0, r.stdout + r.stderr)
    assert.deepEqual(
      r.json.notChecked.filter((n: {check: string}) => n.check === 'rule-counters'),
      [],
    )
    const moved = (k: KernelItem, rule: string) => k.counters?.moved.find((m) => m.rule === rule)
    for (const node of ['node-a', 'node-b']) {
      const items = kernel(r).filter((k) => k.node === node)
      const [clusterIP, nodePort] = [
        items.find((k) => k.kind === 'ClusterIP')!,
        items.find((k) => k.kind === 'NodePort')!,
      ]
      const show = JSON.stringify(items.map((k) => k.counters))
      // The rules only the ClusterIP's 8 probes reach, and only the NodePort's 8: moved by exactly 8 packets each.
      for (const [item, rule] of [
        [clusterIP, CLUSTER_IP_RULE],
        [clusterIP, SVC_MASQ_RULE],
        [nodePort, NODEPORT_RULE],
        [nodePort, EXT_MASQ_RULE],
        [nodePort, EXT_JUMP_RULE],
      ] as const)
        assert.deepEqual(
          moved(item, rule),
          {table: 'nat', chain: rule.split(' ')[1], rule, packets: 8, bytes: 480, probes: 8},
          `${node} ${rule}: ${show}`,
        )
      assert.equal(clusterIP.counters!.busy, false, show)
      // Each endpoint's DNAT rule moved once per connection the kernel sent there, from either address (conntrack's count).
      for (const [endpoint, chain] of ENDPOINT_CHAINS) {
        const rule = `-A ${chain} -p tcp -m comment --comment "shop/web:http" -m tcp -j DNAT --to-destination ${endpoint}`
        const sent = items.reduce((n, k) => n + k.connections.filter((c) => c.endpoint === endpoint).length, 0)
        // Entries beyond each address's 8 probes are another connection's (a test's earlier one still in the table):
        // conntrack's count then bounds the rule's from above, by that many.
        const extra = items.reduce((n, k) => n + Math.max(0, k.connections.length - 8), 0)
        for (const k of items)
          if (sent === 0) assert.equal(moved(k, rule), undefined, show)
          else if (extra === 0)
            assert.deepEqual(
              moved(k, rule),
              {table: 'nat', chain, rule, packets: sent, bytes: sent * 60, probes: 16},
              show,
            )
          else {
            const m = moved(k, rule)
            assert.ok(m && m.packets <= sent && m.packets >= sent - extra && m.bytes === m.packets * 60, show)
          }
      }
      for (const k of items)
        assert.ok(
          k.counters!.moved.every((m) => /^KUBE-(SERVICES|NODEPORTS|SVC-|EXT-|SEP-)/.test(m.chain)),
          show,
        )
    }
    const human = await doctor()
    assert.equal(human.code, 0, human.stderr)
    assert.match(human.stdout, /^ {6}rule counters: 8 rules of the walk moved$/m)
    assert.ok(
      human.stdout.includes(`        moved +8 packets (8 probes through it): nat KUBE-SERVICES: ${CLUSTER_IP_RULE}\n`),
      human.stdout,
    )
  })
})
