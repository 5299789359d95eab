import assert from 'node:assert/strict'
import {describe, test} from 'node:test'
import {labGuard} from '../helpers/lab-guard.js'
import {withLab} from '../helpers/lab-suite.js'
import type {CliResult} from '../helpers/run-cli.js'
import type {NetnsLab} from '../lab/netns-lab.js'
import {labSvc} from '../helpers/lab-cli.js'

/**
 * Live probes against the netns lab, over the real sshd: each node opens connect-and-close connections through SSH
 * direct-tcpip channels (sshd runs inside the node's namespace, so the connections start on the node) to the
 * ClusterIP, its own NodePort and each endpoint. Every address probed is inside the lab's namespaces.
 */
const why = labGuard()

const CLUSTER_IP = '10.96.10.10'
const WEB_B2 = '10.244.2.11'

interface Target {
  kind: string
  address: string
  pod: string | null
  attempts: number
  connected: number
  refused: number
  timedOut: number
  unreachable: number
  notProbed: string | null
}

describe('live probes against the netns lab', {skip: why}, () => {
  let lab: NetnsLab
  withLab((l) => (lab = l))

  const doctor = (...extra: string[]): Promise<CliResult> => labSvc(lab, ...extra)
  const findings = (r: CliResult) =>
    r.json.findings.map((f: {code: string; node: string | null; severity: string}) => [f.code, f.node, f.severity])
  const targets = (r: CliResult, node: string): Target[] =>
    r.json.probes.nodes.find((n: {node: string}) => n.node === node).targets
  /** What the static diagnosis says, without the probe stage's own fields. */
  const staticPart = (r: CliResult) => ({
    ok: r.json.ok,
    findings: r.json.findings,
    paths: r.json.paths,
    nodes: r.json.nodes,
    dns: r.json.dns,
    notes: r.json.notes,
  })

  test('healthy lab, probes on: exit 0, no error finding, every probe from both nodes connected', async () => {
    const r = await doctor('-o', 'json')
    assert.equal(r.code, 0, r.stdout + r.stderr)
    assert.deepEqual(findings(r), [])
    assert.equal(r.json.probes.ran, true)
    assert.deepEqual(
      r.json.probes.nodes.map((n: {node: string; via: string; error: string | null}) => [n.node, n.via, n.error]),
      [
        ['node-a', 'an SSH port forward', null],
        ['node-b', 'an SSH port forward', null],
      ],
    )
    for (const [node, address] of [
      ['node-a', '10.200.0.11:30080'],
      ['node-b', '10.200.0.12:30080'],
    ]) {
      assert.deepEqual(
        targets(r, node).map((t) => [t.kind, t.address, t.pod, t.attempts, t.connected, t.notProbed]),
        [
          ['ClusterIP', `${CLUSTER_IP}:80`, null, 8, 8, null],
          ['NodePort', address, null, 8, 8, null],
          ['endpoint', '10.244.1.10:8080', 'web-a1', 3, 3, null],
          ['endpoint', '10.244.2.10:8080', 'web-b1', 3, 3, null],
          ['endpoint', `${WEB_B2}:8080`, 'web-b2', 3, 3, null],
        ],
        node,
      )
    }
    assert.equal(
      r.json.summary,
      '✓ shop/web: every traced path works on 2 node(s), every live probe connected (10 targets from 2 node(s))',
    )
  })

  test("the probes run on the read's own SSH connection while the node is read: one connection per node", async () => {
    const r = await doctor('-o', 'json', '--verbose')
    assert.equal(r.code, 0, r.stdout + r.stderr)
    const connected = r.stderr
      .split('\n')
      .flatMap((l) => /(node-[ab]) \[ssh [^\]]+\] connected in/.exec(l)?.[1] ?? [])
      .sort()
    assert.deepEqual(connected, ['node-a', 'node-b'], r.stderr)
    assert.deepEqual(
      r.json.probes.nodes.map((n: {node: string; targets: Target[]}) => [
        n.node,
        n.targets.every((t) => t.connected === t.attempts),
      ]),
      [
        ['node-a', true],
        ['node-b', true],
      ],
    )
  })

  test('healthy lab, human report: the probe table per node with ✓ and counts', async () => {
    const r = await doctor()
    assert.equal(r.code, 0, r.stderr)
    assert.match(
      r.stdout,
      /^Probes from each node through an SSH port forward: connect and close, 8 per Service address, 3 per endpoint, 1\.5 s timeout$/m,
    )
    assert.match(r.stdout, /│ node +│ ClusterIP +│ NodePort +│ web-a1 +│ web-b1 +│ web-b2 +│/)
    for (const node of ['node-a', 'node-b'])
      assert.match(r.stdout, new RegExp(`│ ${node} +│ ✓ 8/8 +│ ✓ 8/8 +│ ✓ 3/3 +│ ✓ 3/3 +│ ✓ 3/3 +│`))
  })

  test('(a) web-b2 Ready but listening on 8081: exactly KPD-BACKEND-REFUSED for web-b2, refused from both nodes; --no-probe gives the static diagnosis', async () => {
    await lab.listenOn('web-b2', 8081)
    try {
      // The fault is real: connections to web-b2's targetPort are refused, and a share of the Service's fail.
      assert.equal(lab.probe(lab.podNs('client-a'), WEB_B2, 8080, 1).kind, 'refused')
      const answers = lab.sample(lab.podNs('client-a'), CLUSTER_IP, 80, 12)
      assert.ok(answers.includes('') && !answers.includes('web-b2'), `${answers}`)

      const r = await doctor('-o', 'json')
      assert.equal(r.code, 1, r.stdout + r.stderr)
      assert.deepEqual(findings(r), [['KPD-BACKEND-REFUSED', 'node-b', 'error']])
      assert.equal(
        r.json.findings[0].message,
        'endpoint 10.244.2.11:8080 (pod web-b2 on node-b) of shop/web:http is Ready but refuses connections on port 8080 from every node that probed it ' +
          '(node-a 0/3 connected (3 refused), node-b 0/3 connected (3 refused)); its spec declares containerPort 8080/TCP "http"',
      )
      assert.match(
        r.json.summary,
        /^✗ shop\/web: breaks at the backend \(live probe\): endpoint 10\.244\.2\.11:8080 \(pod web-b2 on node-b\)/,
      )
      assert.match(
        r.json.next.check.command,
        /^kubectl .*-n shop get pod web-b2 -o 'jsonpath=\{\.spec\.containers\[\*\]\.readinessProbe\}'$/,
      )
      assert.match(r.json.next.text, /^Check what web-b2 listens on/)
      for (const node of ['node-a', 'node-b']) {
        const b2 = targets(r, node).find((t) => t.pod === 'web-b2')!
        assert.deepEqual([b2.attempts, b2.connected, b2.refused, b2.timedOut], [3, 0, 3, 0], node)
        for (const t of targets(r, node).filter((x) => x.kind === 'endpoint' && x.pod !== 'web-b2'))
          assert.equal(t.connected, t.attempts, `${node} ${t.address}`)
        // Through the Service, only the share that kube-proxy sends to web-b2 fails, and each such try is refused.
        for (const vip of targets(r, node).filter((x) => x.kind !== 'endpoint')) {
          assert.equal(vip.connected + vip.refused, vip.attempts, `${node} ${vip.kind}: ${JSON.stringify(vip)}`)
          assert.ok(vip.connected > 0, `${node} ${vip.kind}: the other endpoints answer`)
        }
      }

      const human = await doctor()
      assert.equal(human.code, 1)
      assert.match(
        human.stdout.split('\n')[0],
        /^✗ shop\/web: breaks at the backend \(live probe\): endpoint 10\.244\.2\.11:8080 \(pod web-b2 on node-b\)/,
      )
      for (const node of ['node-a', 'node-b'])
        assert.match(human.stdout, new RegExp(`│ ${node} +│ [✓✗] \\d/8.*│ ✓ 3/3 +│ ✓ 3/3 +│ ✗ 0/3 \\(3 refused\\) +│`))

      const off = await doctor('-o', 'json', '--no-probe')
      assert.equal(off.code, 0, 'the static diagnosis cannot see it: kube-proxy is right about its rules')
      assert.deepEqual(findings(off), [])
      assert.equal(off.json.summary, '✓ shop/web: every traced path works on 2 node(s)')
      assert.deepEqual(off.json.probes, {
        ran: false,
        note: 'live probes are off (--no-probe): the diagnosis is static only',
        settings: null,
        nodes: [],
        notes: [],
      })
      assert.deepEqual(staticPart(off).paths, staticPart(r).paths)
    } finally {
      await lab.listenOn('web-b2', 8080)
    }
  })

  test('--no-probe on the healthy lab: the same static diagnosis as with probes, and no connection is counted', async () => {
    const on = await doctor('-o', 'json')
    const off = await doctor('-o', 'json', '--no-probe')
    assert.equal(off.code, 0)
    assert.deepEqual(staticPart(off), staticPart(on))
    assert.equal(off.json.summary, '✓ shop/web: every traced path works on 2 node(s)')
    const human = await doctor('--no-probe')
    assert.match(human.stdout, /^Probes: live probes are off \(--no-probe\): the diagnosis is static only$/m)
  })

  test('bench: what the probe stage adds to the healthy 2-node diagnosis (best of 3 whole runs each)', async () => {
    const best = async (...extra: string[]) => {
      let min = Infinity
      for (let i = 0; i < 3; i++) {
        const start = performance.now()
        const r = await doctor('-o', 'json', ...extra)
        assert.equal(r.code, 0)
        min = Math.min(min, performance.now() - start)
      }
      return Math.round(min)
    }
    const off = await best('--no-probe')
    const on = await best()
    process.stderr.write(`probe bench: svc with probes ${on} ms, --no-probe ${off} ms, probes add ${on - off} ms\n`)
    assert.ok(on - off < 3000, `probes add ${on - off} ms to a healthy diagnosis`)
  })
})
