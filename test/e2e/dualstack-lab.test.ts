import assert from 'node:assert/strict'
import {describe, test} from 'node:test'
import {labGuard} from '../helpers/lab-guard.js'
import {withLab} from '../helpers/lab-suite.js'
import type {CliResult} from '../helpers/run-cli.js'
import type {NetnsLab} from '../lab/netns-lab.js'
import {labSvc} from '../helpers/lab-cli.js'

const why = labGuard()

const CLUSTER_IP = '10.96.10.10'
const CLUSTER_IP6 = 'fd00:10:96::10:10'
const NODE_B6 = 'fd00:10:200::12'
const WEB_PODS = ['web-a1', 'web-b1', 'web-b2']
const WEB_NAME = 'web.shop.svc.cluster.local'
const WRONG_AAAA = 'fd00:10:96::99:99'

/** The IPv6 paths of a healthy run: each node's four entry points, all ✓. */
const EVERY_IPV6_PATH_WORKS = [
  ['node-a', 'pod→ClusterIP', `[${CLUSTER_IP6}]:80`, true],
  ['node-a', 'node→ClusterIP', `[${CLUSTER_IP6}]:80`, true],
  ['node-a', 'outside→NodePort', '[fd00:10:200::11]:30080', true],
  ['node-a', 'pod→itself', `[${CLUSTER_IP6}]:80`, true],
  ['node-b', 'pod→ClusterIP', `[${CLUSTER_IP6}]:80`, true],
  ['node-b', 'node→ClusterIP', `[${CLUSTER_IP6}]:80`, true],
  ['node-b', 'outside→NodePort', `[${NODE_B6}]:30080`, true],
  ['node-b', 'pod→itself', `[${CLUSTER_IP6}]:80`, true],
]

/** The live probes of a healthy run to IPv6 targets, per node: every connection opened. */
const IPV6_ENDPOINT_PROBES = [
  'endpoint [fd00:10:244:1::10]:8080 3/3',
  'endpoint [fd00:10:244:2::10]:8080 3/3',
  'endpoint [fd00:10:244:2::11]:8080 3/3',
]
const EVERY_IPV6_PROBE_ANSWERS = [
  ['node-a', [`ClusterIP [${CLUSTER_IP6}]:80 8/8`, 'NodePort [fd00:10:200::11]:30080 8/8', ...IPV6_ENDPOINT_PROBES]],
  ['node-b', [`ClusterIP [${CLUSTER_IP6}]:80 8/8`, `NodePort [${NODE_B6}]:30080 8/8`, ...IPV6_ENDPOINT_PROBES]],
]

const paths = (r: CliResult, family: string): PathLine[] => r.json.paths.filter((p: PathLine) => p.family === family)

/** Every IPv4 path works; the IPv6 paths that break are node-b's four entry points. */
function assertOnlyIpv6BrokenOnNodeB(r: CliResult): void {
  assert.ok(
    paths(r, 'IPv4').every((p) => p.ok === true),
    'every IPv4 path still works',
  )
  assert.deepEqual(
    paths(r, 'IPv6')
      .filter((p) => p.ok === false)
      .map((p) => p.node),
    ['node-b', 'node-b', 'node-b', 'node-b'],
  )
}

interface PathLine {
  node: string
  entry: string
  family: string
  destination: string
  ok: boolean | null
}
interface DnsLine {
  node: string
  type: string | null
  addresses: string[]
  rcode: string | null
  method: string
  error: string | null
}
interface FindingLine {
  code: string
  node: string | null
  severity: string
  message: string
}

describe(
  'a dual-stack Service against the netns lab: real IPv6 traffic, each family judged against its own rules',
  {skip: why},
  () => {
    let lab: NetnsLab
    withLab((l) => (lab = l), {dualStack: true})

    const doctor = (...extra: string[]): Promise<CliResult> => labSvc(lab, '-o', 'json', ...extra)
    const errors = (r: CliResult): FindingLine[] =>
      (r.json?.findings ?? []).filter((f: FindingLine) => f.severity === 'error')
    const failures = (answers: string[]) => answers.filter((a) => a === '').length
    const dnsRows = (r: CliResult) =>
      (r.json.dns as DnsLine[]).map((d) => [d.node, d.type, d.addresses, d.rcode, d.error])
    /** Three real connections from a pod straight to web-b1 (on node-b), over IPv4 or IPv6. */
    const webB1From = (pod: string, family: 4 | 6) =>
      lab.sample(lab.podNs(pod), family === 6 ? 'fd00:10:244:2::10' : '10.244.2.10', 8080, 3)
    /** A fault on node-a's IPv6 side: from client-a every IPv6 connection to web-b1 fails, every IPv4 one works. */
    const assertOnlyIpv6ToWebB1Fails = () => {
      const v6 = webB1From('client-a', 6)
      assert.equal(failures(v6), 3, `IPv6 from client-a to web-b1 fails: ${v6}`)
      const v4 = webB1From('client-a', 4)
      assert.equal(failures(v4), 0, `IPv4 from client-a to web-b1 still works: ${v4}`)
    }
    /** Real DNS queries from a pod to the DNS Service until dnsmasq (just restarted) answers the A record; bounded. */
    const askUntilUp = async (type: 'A' | 'AAAA'): Promise<string[]> => {
      for (let i = 0; i < 25; i++) {
        if (lab.dnsQuery('client-a', WEB_NAME).length > 0) return lab.dnsQuery('client-a', WEB_NAME, undefined, type)
        await new Promise((resolve) => setTimeout(resolve, 200))
      }
      throw new Error('dnsmasq did not answer within 5s of its restart')
    }

    test('healthy: IPv4 and IPv6 connections to the ClusterIPs and the IPv6 NodePort work; svc: exit 0, no error finding, every IPv6 path traced and ✓', async () => {
      for (const node of ['node-a', 'node-b']) {
        const v4 = lab.sample(lab.nodeNs(node), CLUSTER_IP, 80, 6)
        const v6 = lab.sample(lab.nodeNs(node), CLUSTER_IP6, 80, 6)
        assert.equal(failures(v4), 0, `IPv4 from ${node}: ${v4}`)
        assert.equal(failures(v6), 0, `IPv6 from ${node}: ${v6}`)
        for (const a of v6) assert.ok(WEB_PODS.includes(a), `a web pod answers over IPv6: ${a}`)
      }
      const nodePort6 = lab.sample(lab.ns('outside'), NODE_B6, 30080, 4)
      assert.equal(failures(nodePort6), 0, `the IPv6 NodePort from outside: ${nodePort6}`)
      // Real queries from pods on both nodes to the DNS Service: the A record is the IPv4 ClusterIP, the AAAA the IPv6 one.
      for (const pod of ['client-a', 'client-b']) {
        assert.deepEqual(lab.dnsQuery(pod, WEB_NAME), [CLUSTER_IP], `A from ${pod}`)
        assert.deepEqual(lab.dnsQuery(pod, WEB_NAME, undefined, 'AAAA'), [CLUSTER_IP6], `AAAA from ${pod}`)
      }

      const r = await doctor()
      assert.equal(r.code, 0, r.stdout + r.stderr)
      assert.deepEqual(errors(r), [])
      assert.deepEqual(r.json.service.clusterIPs, [CLUSTER_IP, CLUSTER_IP6])
      assert.match(r.json.summary, /^✓ shop\/web: every traced path works on 2 node\(s\)/)
      assert.deepEqual(
        paths(r, 'IPv6').map((p) => [p.node, p.entry, p.destination, p.ok]),
        EVERY_IPV6_PATH_WORKS,
      )
      assert.equal(paths(r, 'IPv4').length, 8)
      // Each node asked the DNS Service for both records over TCP, through its SSH port forward; each family judged right.
      assert.deepEqual(dnsRows(r), [
        ['node-a', 'A', [CLUSTER_IP], 'NOERROR', null],
        ['node-a', 'AAAA', [CLUSTER_IP6], 'NOERROR', null],
        ['node-b', 'A', [CLUSTER_IP], 'NOERROR', null],
        ['node-b', 'AAAA', [CLUSTER_IP6], 'NOERROR', null],
      ])
      assert.ok(
        (r.json.dns as DnsLine[]).every((d) => d.method === 'DNS over TCP through an SSH port forward'),
        JSON.stringify(r.json.dns),
      )
      assert.deepEqual(
        r.json.notChecked.filter((n: {required: boolean}) => n.required),
        [],
      )
      // Every IPv6 part is judged: the DNS answer, the routes (ip -6 route show, the route to each IPv6 endpoint), and
      // the live probes, which connect from each node to the IPv6 ClusterIP, NodePort and endpoints too.
      assert.deepEqual(
        r.json.notChecked.filter((n: {reason: string}) => /IPv6/.test(n.reason)),
        [],
      )
      const probed6 = (
        r.json.probes.nodes as Array<{
          node: string
          targets: Array<{kind: string; address: string; connected: number; attempts: number}>
        }>
      ).map((n) => [
        n.node,
        n.targets
          .filter((t) => t.address.startsWith('['))
          .map((t) => `${t.kind} ${t.address} ${t.connected}/${t.attempts}`),
      ])
      assert.deepEqual(probed6, EVERY_IPV6_PROBE_ANSWERS)
    })

    test('an IPv6 endpoint chain on node-b DNATs to a wrong port: real IPv6 connections from node-b fail, IPv4 ones still work; svc names node-b, KPD-DNAT-WRONG, the IPv6 endpoint and ip6tables-save', async () => {
      lab.applyRules('node-b', {}, {wrongPortFor: {ip: 'fd00:10:244:2::10', port: 9999}})
      try {
        const v4 = lab.sample(lab.nodeNs('node-b'), CLUSTER_IP, 80, 12)
        assert.equal(failures(v4), 0, `IPv4 from node-b still works: ${v4}`)
        // One endpoint in three is DNATed to a port nothing listens on: about a third of new IPv6 connections are refused.
        const v6 = lab.sample(lab.nodeNs('node-b'), CLUSTER_IP6, 80, 30)
        assert.ok(failures(v6) > 0, `IPv6 from node-b must fail sometimes: ${v6}`)
        assert.ok(!v6.includes('web-b1'), `web-b1 never answers over IPv6 from node-b: ${v6}`)
        const fromA = lab.sample(lab.nodeNs('node-a'), CLUSTER_IP6, 80, 6)
        assert.equal(failures(fromA), 0, `IPv6 from node-a still works: ${fromA}`)

        const r = await doctor()
        assert.equal(r.code, 1, r.stdout + r.stderr)
        assert.deepEqual(
          errors(r).map((f) => [f.code, f.node]),
          [['KPD-DNAT-WRONG', 'node-b']],
        )
        const f = errors(r)[0] as FindingLine & {check: {command: string}}
        assert.equal(
          f.message,
          'node-b (IPv6): KUBE-SEP-3EIK7ZMJLCQCLWUX DNATs to [fd00:10:244:2::10]:9999, but the endpoint (pod web-b1) is [fd00:10:244:2::10]:8080 (targetPort http)',
        )
        assert.match(f.check.command, /ip6tables-save/)
        assert.match(
          r.json.summary,
          /^✗ shop\/web: (pod|node)→ClusterIP to \[fd00:10:96::10:10\]:80 \(http\) breaks at DNAT on node-b: 33\.3% of new connections DNAT to \[fd00:10:244:2::10\]:9999/,
        )
        assertOnlyIpv6BrokenOnNodeB(r)
      } finally {
        lab.applyRules('node-b', {}, {})
      }
    })

    test("dnsmasq answers a wrong AAAA: a real AAAA query from a pod gets it, A is still right; svc: KPD-DNS-NO-ANSWER on both nodes for IPv6 only, node-b's asked with dig (its sshd refuses forwarding)", async () => {
      await lab.stopDns()
      lab.startDns({aaaa: WRONG_AAAA})
      await lab.restartSshd('node-b', false)
      try {
        assert.deepEqual(await askUntilUp('AAAA'), [WRONG_AAAA])
        assert.deepEqual(lab.dnsQuery('client-b', WEB_NAME, undefined, 'AAAA'), [WRONG_AAAA])
        assert.deepEqual(lab.dnsQuery('client-b', WEB_NAME), [CLUSTER_IP])

        const r = await doctor()
        assert.equal(r.code, 1, r.stdout + r.stderr)
        assert.deepEqual(
          errors(r).map((f) => [f.code, f.node, f.message]),
          [
            [
              'KPD-DNS-NO-ANSWER',
              'node-a',
              `node-a (IPv6): ${WEB_NAME} AAAA resolves to ${WRONG_AAAA}, not the ClusterIP ${CLUSTER_IP6}`,
            ],
            [
              'KPD-DNS-NO-ANSWER',
              'node-b',
              `node-b (IPv6): ${WEB_NAME} AAAA resolves to ${WRONG_AAAA}, not the ClusterIP ${CLUSTER_IP6}`,
            ],
          ],
        )
        assert.deepEqual(dnsRows(r), [
          ['node-a', 'A', [CLUSTER_IP], 'NOERROR', null],
          ['node-a', 'AAAA', [WRONG_AAAA], 'NOERROR', null],
          ['node-b', 'A', [CLUSTER_IP], null, null],
          ['node-b', 'AAAA', [WRONG_AAAA], null, null],
        ])
        assert.deepEqual(
          (r.json.dns as DnsLine[]).map((d) => [d.node, d.method]),
          [
            ['node-a', 'DNS over TCP through an SSH port forward'],
            ['node-a', 'DNS over TCP through an SSH port forward'],
            ['node-b', 'dig/nslookup on the node'],
            ['node-b', 'dig/nslookup on the node'],
          ],
        )
        // The finding's command asks the IPv6 family's record.
        assert.match(
          (errors(r)[0] as FindingLine & {check: {command: string}}).check.command,
          /dig \+tcp web\.shop\.svc\.cluster\.local AAAA @10\.96\.0\.10/,
        )
        assert.ok(
          paths(r, 'IPv6').every((p) => p.ok === true),
          'the IPv6 paths themselves still work',
        )
      } finally {
        await lab.restartSshd('node-b', true)
        await lab.stopDns()
        lab.startDns()
      }
      assert.deepEqual(await askUntilUp('AAAA'), [CLUSTER_IP6], 'the right AAAA again after the fault')
    })

    test("node-a's route to node-b's IPv6 pod CIDR is unreachable: real IPv6 connections from a pod on node-a to web-b1 fail, IPv4 ones work; svc: KPD-ROUTE-MISSING on node-a for IPv6 only", async () => {
      lab.breakPodRoute('node-a', 'node-b', 'unreachable', 6)
      try {
        assertOnlyIpv6ToWebB1Fails()

        const r = await doctor()
        assert.equal(r.code, 1, r.stdout + r.stderr)
        assert.deepEqual(
          errors(r).map((f) => [f.code, f.node]),
          [['KPD-ROUTE-MISSING', 'node-a']],
        )
        const f = errors(r)[0] as FindingLine & {check: {command: string}}
        assert.equal(
          f.message,
          `node-a (IPv6): no working route to node-b's pod CIDR fd00:10:244:2::/64: the route is unreachable ("RTNETLINK answers: No route to host"), so node-a cannot reach endpoints fd00:10:244:2::10 (pod web-b1), fd00:10:244:2::11 (pod web-b2) on node-b`,
        )
        assert.match(f.check.command, /ip route get fd00:10:244:2::10/)
      } finally {
        lab.restorePodRoute('node-a', 'node-b', 6)
      }
      assert.equal(failures(webB1From('client-a', 6)), 0, 'IPv6 to web-b1 works again')
    })

    test('IPv6 forwarding off on node-a, IPv4 forwarding on: real IPv6 connections from a pod on node-a to web-b1 fail, IPv4 ones work; svc: KPD-NODE-FORWARDING-OFF on node-a for IPv6 only', async () => {
      const was = lab.setSysctl('node-a', 'net.ipv6.conf.all.forwarding', '0')
      try {
        assertOnlyIpv6ToWebB1Fails()

        const r = await doctor()
        assert.equal(r.code, 1, r.stdout + r.stderr)
        assert.deepEqual(
          errors(r).map((f) => [f.code, f.node, f.message]),
          [
            [
              'KPD-NODE-FORWARDING-OFF',
              'node-a',
              'node-a (IPv6): net.ipv6.conf.all.forwarding = 0: the node forwards no IPv6 packet, so its pods reach no Service and no pod on another node, pods on other nodes cannot reach its pods, and NodePorts on node-a reach no endpoint',
            ],
          ],
        )
        assert.match(
          (errors(r)[0] as FindingLine & {fix: {command: string}}).fix.command,
          /sysctl -w net\.ipv6\.conf\.all\.forwarding=1/,
        )
      } finally {
        lab.setSysctl('node-a', 'net.ipv6.conf.all.forwarding', was)
      }
      assert.equal(failures(webB1From('client-a', 6)), 0, 'IPv6 to web-b1 works again')
    })
  },
)

describe(
  "a dual-stack Service on nodes in nftables mode: kube-proxy's `ip6 kube-proxy` table loaded with the real nft, real IPv6 traffic",
  {skip: why},
  () => {
    let lab: NetnsLab
    withLab(
      (l) => {
        lab = l
        for (const node of ['node-a', 'node-b']) lab.setMode(node, 'nftables')
      },
      {dualStack: true},
    )

    const doctor = (): Promise<CliResult> => labSvc(lab, '-o', 'json')
    const findings = (r: CliResult) =>
      (r.json?.findings ?? []).map((f: FindingLine) => [f.node, f.code, f.severity, f.message])
    const failures = (answers: string[]) => answers.filter((a) => a === '').length
    // The lab's ConfigMap says iptables: both nodes running nftables is worth a warning each, and nothing more.
    const MISMATCH = ['node-a', 'node-b'].map((n) => [
      n,
      'KPD-MODE-MISMATCH',
      'warning',
      `${n} runs nftables mode (kube-proxy's /proxyMode on the node) but ConfigMap kube-system/kube-proxy says mode iptables`,
    ])

    test('healthy: IPv4 and IPv6 through the ip and ip6 kube-proxy tables work; svc reads both tables, every path ✓, no finding but the mode warnings, no family left unjudged', async () => {
      for (const node of ['node-a', 'node-b']) {
        const v6 = lab.sample(lab.nodeNs(node), CLUSTER_IP6, 80, 6)
        assert.equal(failures(v6), 0, `IPv6 from ${node}: ${v6}`)
        for (const a of v6) assert.ok(WEB_PODS.includes(a), `a web pod answers over IPv6: ${a}`)
        assert.equal(failures(lab.sample(lab.nodeNs(node), CLUSTER_IP, 80, 3)), 0, `IPv4 from ${node}`)
      }
      assert.equal(failures(lab.sample(lab.ns('outside'), NODE_B6, 30080, 4)), 0, 'the IPv6 NodePort from outside')

      const r = await doctor()
      assert.equal(r.code, 0, r.stdout + r.stderr)
      assert.deepEqual(findings(r), MISMATCH)
      assert.deepEqual(
        r.json.nodes.map((n: {name: string; mode: string}) => [n.name, n.mode]),
        [
          ['node-a', 'nftables'],
          ['node-b', 'nftables'],
        ],
      )
      assert.deepEqual(
        paths(r, 'IPv6').map((p) => [p.node, p.entry, p.destination, p.ok]),
        EVERY_IPV6_PATH_WORKS,
      )
      assert.ok(
        paths(r, 'IPv4').every((p) => p.ok === true),
        'every IPv4 path works',
      )
      assert.deepEqual(
        r.json.notChecked.filter((n: {reason: string}) => /rules not (read|judged)/.test(n.reason)),
        [],
      )
    })

    test("an endpoint chain of node-b's ip6 kube-proxy table DNATs to a wrong port: IPv6 from node-b fails, IPv4 works; svc names node-b (IPv6), KPD-DNAT-WRONG and the nft endpoint chain", async () => {
      lab.applyRules('node-b', {}, {wrongPortFor: {ip: 'fd00:10:244:2::10', port: 9999}})
      try {
        assert.equal(failures(lab.sample(lab.nodeNs('node-b'), CLUSTER_IP, 80, 12)), 0, 'IPv4 from node-b still works')
        const v6 = lab.sample(lab.nodeNs('node-b'), CLUSTER_IP6, 80, 30)
        assert.ok(failures(v6) > 0, `IPv6 from node-b must fail sometimes: ${v6}`)
        assert.ok(!v6.includes('web-b1'), `web-b1 never answers over IPv6 from node-b: ${v6}`)
        assert.equal(failures(lab.sample(lab.nodeNs('node-a'), CLUSTER_IP6, 80, 6)), 0, 'IPv6 from node-a still works')

        const r = await doctor()
        assert.equal(r.code, 1, r.stdout + r.stderr)
        assert.deepEqual(findings(r), [
          ...MISMATCH,
          [
            'node-b',
            'KPD-DNAT-WRONG',
            'error',
            'node-b (IPv6): endpoint-XYZSYKNH-shop/web/tcp/http__fd00.10.244.2..10/8080 DNATs to [fd00:10:244:2::10]:9999, but the endpoint (pod web-b1) is [fd00:10:244:2::10]:8080 (targetPort http)',
          ],
          [
            'node-b',
            'KPD-NODE-DIVERGES',
            'warning',
            'IPv6: node-b sends shop/web:http to {[fd00:10:244:1::10]:8080, [fd00:10:244:2::10]:9999, [fd00:10:244:2::11]:8080} while 1 other node(s) (node-a) send it to {[fd00:10:244:1::10]:8080, [fd00:10:244:2::10]:8080, [fd00:10:244:2::11]:8080}',
          ],
        ])
        assert.match((r.json.findings[2] as {check: {command: string}}).check.command, /nft list table ip6 kube-proxy/)
        assertOnlyIpv6BrokenOnNodeB(r)
      } finally {
        lab.applyRules('node-b', {}, {})
      }
    })

    test("node-b's ip6 kube-proxy service-ips map lacks the IPv6 ClusterIP: every IPv6 connection from node-b fails, IPv4 works; svc names node-b (IPv6) and the missing element", async () => {
      lab.applyRules('node-b', {}, {omitClusterIp: true})
      try {
        assert.equal(failures(lab.sample(lab.nodeNs('node-b'), CLUSTER_IP, 80, 6)), 0, 'IPv4 from node-b still works')
        const v6 = lab.sample(lab.nodeNs('node-b'), CLUSTER_IP6, 80, 6)
        assert.equal(failures(v6), 6, `no IPv6 connection from node-b gets through: ${v6}`)
        assert.equal(failures(lab.sample(lab.nodeNs('node-a'), CLUSTER_IP6, 80, 6)), 0, 'IPv6 from node-a still works')

        const r = await doctor()
        assert.equal(r.code, 1, r.stdout + r.stderr)
        assert.deepEqual(findings(r), [
          ...MISMATCH,
          [
            'node-b',
            'KPD-SVC-RULE-MISSING',
            'error',
            'node-b (IPv6): no nftables chain services entry for shop/web:http cluster IP [fd00:10:96::10:10]:80/tcp',
          ],
        ])
        assert.match(
          (r.json.findings[2] as {check: {command: string}}).check.command,
          /nft list table ip6 kube-proxy \| grep -- fd00:10:96::10:10/,
        )
        assert.ok(
          paths(r, 'IPv4').every((p) => p.ok === true),
          'every IPv4 path still works',
        )
      } finally {
        lab.applyRules('node-b', {}, {})
      }
    })
  },
)
