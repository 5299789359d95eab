import assert from 'node:assert/strict'
import {describe, test} from 'node:test'
import {labGuard} from '../helpers/lab-guard.js'
import {withLab} from '../helpers/lab-suite.js'
import {runCli, type CliResult} from '../helpers/run-cli.js'
import type {NetnsLab} from '../lab/netns-lab.js'

/**
 * Kernel evidence against the netns lab: after each node's live probes (real connections from inside the node's
 * namespace, through the real sshd), the doctor reads the node's real conntrack table and names the endpoint the
 * kernel's DNAT chose for each probe of the ClusterIP and the NodePort, set against its walk of the same path.
 */
const why = labGuard()

const WEB = ['10.244.1.10:8080', '10.244.2.10:8080', '10.244.2.11:8080']
const STALE = '10.244.2.99:8080'
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
    moved: Array<{table: string; chain: string; rule: string; packets: number; bytes: number}>
    busy: boolean
    note: string
  }
}

describe('kernel evidence of the live probes against the netns lab', {skip: why}, () => {
  let lab: NetnsLab
  withLab((l) => (lab = l))

  const doctor = (...extra: string[]): Promise<CliResult> =>
    runCli([
      'svc',
      'web',
      '-n',
      'shop',
      '--kubeconfig',
      lab.kubeconfigPath,
      '--ssh-config',
      lab.sshConfigPath,
      ...extra,
    ])
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
      assert.match(
        human.stdout,
        /^ {4}✓ ClusterIP 10\.96\.10\.10:80 \(http\): agrees with the walk: the kernel sent 10\.244\./m,
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

  test('rule counters: the KUBE-SERVICES, KUBE-SVC and KUBE-SEP rules the probes hit are reported as moved, exactly', async () => {
    const r = await doctor('-o', 'json')
    assert.equal(r.code, 0, r.stdout + r.stderr)
    console.log(
      JSON.stringify(
        kernel(r).map((k) => [k.node, k.target, k.counters]),
        null,
        1,
      ),
    )
    console.log(JSON.stringify(r.json.notChecked))
    const human = await doctor()
    console.log(human.stdout)
  })
})
