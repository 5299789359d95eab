import assert from 'node:assert/strict'
import {describe, test} from 'node:test'
import {labGuard} from '../helpers/lab-guard.js'
import {withLab} from '../helpers/lab-suite.js'
import {runCli, type CliResult} from '../helpers/run-cli.js'
import type {NetnsLab} from '../lab/netns-lab.js'
import {labAccess} from '../helpers/lab-cli.js'

/**
 * The filter path, diagnosed end to end over the lab's real sshd: other owners' chains and policies in filter FORWARD
 * (faults (e) and (f) of packet-path-lab.test.ts, where real traffic proves them) are named on the node that drops.
 */
const why = labGuard()

const CLUSTER_IP = '10.96.10.10'
const WEB_B1 = '10.244.2.10'
const WEB_B2 = '10.244.2.11'
const CLIENT_A = '10.244.1.100'
const CLIENT_B = '10.244.2.100'

interface JsonFinding {
  code: string
  severity: string
  node: string | null
  message: string
  check: {command: string; argv: string[][] | null} | null
  fix: {command: string | null; argv: string[][] | null; text: string | null} | null
  text: string | null
  evidence: string[]
}

describe('svc diagnoses drops in chains kube-proxy does not own (netns lab, real sshd)', {skip: why}, () => {
  let lab: NetnsLab
  withLab((l) => (lab = l))

  const doctor = (...more: string[]): Promise<CliResult> =>
    runCli(['svc', 'web', '-n', 'shop', ...labAccess(lab), '-o', 'json', ...more])
  const findings = (r: CliResult): JsonFinding[] => r.json?.findings ?? []
  /** Every error and warning as "CODE node", sorted: the exact set, so a new false positive fails. */
  const problems = (r: CliResult) =>
    findings(r)
      .filter((f) => f.severity !== 'info')
      .map((f) => `${f.code} ${f.node ?? '-'}`)
      .sort()
  const failures = (answers: string[]) => answers.filter((a) => a === '').length

  test('healthy lab: no filter finding, every path ✓', async () => {
    assert.equal(failures(lab.sample(lab.podNs('client-a'), CLUSTER_IP, 80, 6)), 0)
    const r = await doctor()
    assert.equal(r.code, 0, r.stdout + r.stderr)
    assert.deepEqual(problems(r), [])
  })

  test("(e) Docker's FORWARD policy DROP on node-a: KPD-FILTER-DROP on node-a, naming the policy, for node-a's paths and node-b's halves arriving there", async () => {
    lab.setForeignRules('node-a', {docker: true})
    try {
      assert.equal(
        failures(lab.sample(lab.podNs('client-a'), CLUSTER_IP, 80, 3)),
        3,
        'the fault really breaks connections',
      )
      const r = await doctor()
      assert.equal(r.code, 1, r.stdout + r.stderr)
      // Cluster DNS runs on node-a: node-b's queries, DNATed to it, cross node-a's FORWARD too: evidence on the one finding.
      assert.deepEqual(problems(r), ['KPD-FILTER-DROP node-a'])
      const f = findings(r).find((x) => x.code === 'KPD-FILTER-DROP')!
      assert.match(
        f.message,
        /^node-a: new connections to .*10\.244\.2\.10:8080 \(web-b1\).* are dropped by the DROP policy of filter FORWARD/,
      )
      assert.match(f.message, /entry points: pod→ClusterIP \(http\)/)
      assert.match(
        f.message,
        /node-b's pod→ClusterIP \(http\), arriving DNATed/,
        "the second half of node-b's path, to web-a1, crosses node-a",
      )
      assert.equal(f.evidence[0], "filter: :FORWARD DROP (the chain's policy)")
      assert.match(
        f.evidence.join('\n'),
        /\nnode-b: asking 10\.96\.0\.10 for the A record of web\.shop\.svc\.cluster\.local failed \(.+\): its DNS endpoint 10\.244\.1\.53 \(pod coredns-a\) on node-a is behind this fault/,
      )
      assert.match(f.text!, /^Docker set this policy/)
      assert.deepEqual(f.check?.argv, [
        [
          'ssh',
          '-F',
          lab.sshConfigPath,
          '--',
          'node-a',
          'sudo',
          'iptables',
          '-t',
          'filter',
          '-L',
          'FORWARD',
          '-v',
          '-n',
          '--line-numbers',
        ],
      ])
      const broken = r.json.paths
        .filter((p: {ok: boolean}) => p.ok === false)
        .map(
          (p: {node: string; entry: string; breaksAt: string; breaksOn: string}) =>
            `${p.node} ${p.entry} ${p.breaksAt} on ${p.breaksOn}`,
        )
      // node-b's paths that send a share to web-a1 break there too: in their second half, on node-a (one path across two nodes).
      assert.deepEqual(broken.sort(), [
        'node-a pod→ClusterIP filter on node-a',
        'node-a pod→itself filter on node-a',
        'node-b node→ClusterIP filter on node-a',
        'node-b outside→NodePort filter on node-a',
        'node-b pod→ClusterIP filter on node-a',
        'node-b pod→itself filter on node-a',
      ])
      const half = r.json.paths.find(
        (p: {node: string; entry: string}) => p.node === 'node-b' && p.entry === 'pod→ClusterIP',
      )
      assert.deepEqual(
        half.remote.map(
          (h: {endpoint: string; node: string; ok: boolean; breaksAt: string}) =>
            `${h.endpoint} ${h.node} ${h.ok} ${h.breaksAt}`,
        ),
        ['10.244.1.10:8080 node-a false filter'],
      )
    } finally {
      lab.setForeignRules('node-a', undefined)
    }
  })

  test("(f) a Calico chain in node-b's FORWARD drops web-b2: KPD-FILTER-DROP on node-b (not node-a), with the rule, its chain and owner", async () => {
    lab.setForeignRules('node-b', {policyChain: {name: 'cali-FORWARD', dropTo: [WEB_B2]}})
    try {
      assert.equal(
        lab.probe(lab.podNs('client-a'), WEB_B2, 8080, 1).kind,
        'timeout',
        'the fault really breaks connections',
      )
      assert.equal(lab.probe(lab.podNs('client-a'), WEB_B1, 8080, 1).kind, 'answer')
      const r = await doctor()
      assert.equal(r.code, 1, r.stdout + r.stderr)
      assert.deepEqual(problems(r), ['KPD-FILTER-DROP node-b'], JSON.stringify(findings(r).map((f) => f.message)))
      // node-a's pod→ClusterIP works on node-a; the share it sends to web-b2 breaks on node-b.
      const a = r.json.paths.find(
        (p: {node: string; entry: string}) => p.node === 'node-a' && p.entry === 'pod→ClusterIP',
      )
      assert.deepEqual([a.ok, a.breaksAt, a.breaksOn], [false, 'filter', 'node-b'])
      const f = findings(r).find((x) => x.code === 'KPD-FILTER-DROP')!
      assert.match(
        f.message,
        /^node-b: new connections to 10\.244\.2\.11:8080 \(web-b2\) are dropped by filter cali-FORWARD line \d+, a Calico chain; entry points: /,
      )
      assert.match(f.message, /node-a's pod→ClusterIP \(http\), arriving DNATed/)
      assert.equal(f.evidence.length, 2)
      assert.match(f.evidence[0], /^filter line \d+: -A cali-FORWARD -d 10\.244\.2\.11\/32 .*-j DROP$/)
      // node-a's live probe of web-b2 really fails: the symptom is evidence on the cause, on node-b, not a second finding.
      assert.match(
        f.evidence[1],
        /^live probe: endpoint 10\.244\.2\.11:8080 \(pod web-b2 on node-b\) answers from node-b \(\d+\/\d+ connected\) but not from node-a \(0\/\d+ connected \(.+\)\)$/,
      )
      assert.match(f.text!, /^Calico drops it, usually for a NetworkPolicy/)
      assert.deepEqual(f.check?.argv, [
        [
          'ssh',
          '-F',
          lab.sshConfigPath,
          '--',
          'node-b',
          'sudo',
          'iptables',
          '-t',
          'filter',
          '-L',
          'cali-FORWARD',
          '-v',
          '-n',
          '--line-numbers',
        ],
      ])
    } finally {
      lab.setForeignRules('node-b', undefined)
    }
    const r = await doctor()
    assert.deepEqual(problems(r), [], 'the healthy lab again')
  })
  /** client-b served by the API as a Pod of namespace monitoring (its address is the one kube-router's rules let in). */
  const clientBInMonitoring = (yes: boolean) => {
    lab.pods.find((p) => p.name === 'client-b')!.namespace = yes ? 'monitoring' : 'shop'
    lab.publish()
    if (yes)
      lab.api.set(
        'namespaces',
        ['default', 'shop', 'kube-system', 'monitoring'].map((name) => ({metadata: {name}})),
      )
  }

  test("(p) kube-router's firewall for web-b2 lets in only namespace monitoring, as NetworkPolicy shop/only-monitoring says: shop's client refused, monitoring's answered; one finding, the policy's, with node-b's REJECT as evidence", async () => {
    clientBInMonitoring(true)
    lab.setForeignRules('node-b', {
      kubeRouterPod: {pod: 'web-b2', namespace: 'shop', ip: WEB_B2, policy: 'only-monitoring', allowFrom: [CLIENT_B]},
    })
    lab.api.set('networkpolicies', [
      {
        metadata: {namespace: 'shop', name: 'only-monitoring'},
        spec: {
          podSelector: {},
          ingress: [{from: [{namespaceSelector: {matchLabels: {'kubernetes.io/metadata.name': 'monitoring'}}}]}],
        },
      },
    ])
    try {
      assert.equal(lab.probe(lab.podNs('client-a'), WEB_B2, 8080, 1).kind, 'refused', "shop's client is refused")
      assert.match(lab.connect(lab.podNs('client-b'), WEB_B2, 8080), /^web-b2 /, "monitoring's client is let in")
      const r = await doctor()
      assert.equal(r.code, 1, r.stdout + r.stderr)
      assert.deepEqual(problems(r), ['KPD-POLICY-DENIES -'], JSON.stringify(findings(r).map((f) => f.message)))
      const f = findings(r).find((x) => x.code === 'KPD-POLICY-DENIES')!
      assert.match(f.message, /NetworkPolicy shop\/only-monitoring selects them/)
      assert.ok(
        f.evidence.some((e) =>
          /^node-b drops it too \(kube-router, for shop\/only-monitoring\): filter line \d+: -A KUBE-POD-FW-LABPODFIREWALL1 .*-j REJECT/.test(
            e,
          ),
        ),
        f.evidence.join('\n'),
      )
      // The walk from each client, on its node, through kube-router's rules on node-b: as the real traffic above went.
      const walks = (x: CliResult) =>
        (x.json?.paths ?? []).map((p: {node: string; entry: string; source?: string; ok: boolean | null}) => ({
          node: p.node,
          entry: p.entry,
          source: p.source,
          ok: p.ok,
        }))
      const shop = await doctor('--from', 'shop/client-a')
      assert.equal(shop.code, 1, shop.stdout + shop.stderr)
      assert.deepEqual(walks(shop), [
        {node: 'node-a', entry: 'pod→ClusterIP', source: `shop/client-a ${CLIENT_A} on node-a`, ok: false},
      ])
      const broken = shop.json.paths[0]
      assert.equal(broken.breaksOn, 'node-b')
      assert.deepEqual(
        broken.remote.filter((h: {ok: boolean | null}) => h.ok === false).map((h: {pod: string}) => h.pod),
        ['web-b2'],
      )
      assert.deepEqual(problems(shop), ['KPD-POLICY-DENIES -'], JSON.stringify(findings(shop).map((f) => f.message)))
      const monitoring = await doctor('--from', 'monitoring/client-b')
      assert.deepEqual(walks(monitoring), [
        {node: 'node-b', entry: 'pod→ClusterIP', source: `monitoring/client-b ${CLIENT_B} on node-b`, ok: true},
      ])
      // node-a's own probe to web-b2 is refused (kube-router lets in client-b only): said, with node-a not walked.
      assert.deepEqual(
        problems(monitoring),
        ['KPD-ENDPOINT-CROSS-NODE -'],
        JSON.stringify(findings(monitoring).map((f) => `${f.code}: ${f.message}`)),
      )
      assert.match(
        findings(monitoring)[0].message,
        /^an endpoint answers from node-b but not from node-a \(endpoint 10\.244\.2\.11:8080 .*\), and node-a's own packets were not walked \(--from: the walks start from monitoring\/client-b 10\.244\.2\.100 on node-b only; the live probes start from the nodes\)/,
      )
      assert.equal(monitoring.code, 0, monitoring.stdout + monitoring.stderr)
    } finally {
      lab.setForeignRules('node-b', undefined)
      lab.api.set('networkpolicies', [])
      clientBInMonitoring(false)
    }
    const r = await doctor()
    assert.deepEqual(problems(r), [], 'the healthy lab again')
  })

  test("(q) NetworkPolicy shop/allow-shop-http allows shop's Pods on port 80, the Service's port, and kube-router enforces it on node-b: the connection to 8080 refused, the mistake named with the policy", async () => {
    lab.setForeignRules('node-b', {
      kubeRouterPod: {
        pod: 'web-b2',
        namespace: 'shop',
        ip: WEB_B2,
        policy: 'allow-shop-http',
        allowFrom: [CLIENT_A],
        port: 80,
      },
    })
    lab.api.set('networkpolicies', [
      {
        metadata: {namespace: 'shop', name: 'allow-shop-http'},
        spec: {podSelector: {}, ingress: [{from: [{podSelector: {}}], ports: [{protocol: 'TCP', port: 80}]}]},
      },
    ])
    try {
      assert.equal(lab.probe(lab.podNs('client-a'), WEB_B2, 8080, 1).kind, 'refused', 'the targetPort is refused')
      const r = await doctor()
      assert.equal(r.code, 1, r.stdout + r.stderr)
      const messages = JSON.stringify(findings(r).map((f) => `${f.code}: ${f.message} ${f.evidence.join(' | ')}`))
      // shop's Pods are let in on the Service's port only: the mistake, named; the nodes on no port: the policy denies.
      assert.deepEqual(problems(r), ['KPD-POLICY-DENIES -', 'KPD-POLICY-SERVICE-PORT -'], messages)
      const f = findings(r).find((x) => x.code === 'KPD-POLICY-SERVICE-PORT')!
      assert.match(
        f.message,
        /^NetworkPolicy shop\/allow-shop-http ingress rule 0 allows TCP 80, the Service's port; after DNAT the endpoints receive TCP 8080/,
      )
      assert.ok(
        f.evidence.some((e) => /^node-b drops it too \(kube-router, for shop\/allow-shop-http\)/.test(e)),
        f.evidence.join('\n'),
      )
    } finally {
      lab.setForeignRules('node-b', undefined)
      lab.api.set('networkpolicies', [])
    }
    const r = await doctor()
    assert.deepEqual(problems(r), [], 'the healthy lab again')
  })
})
