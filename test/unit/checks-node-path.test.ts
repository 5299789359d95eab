import assert from 'node:assert/strict'
import {describe, test} from 'node:test'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import type {NodeObservation} from '../../src/node/observation.js'
import {interpretPathReads, type RawPathReads} from '../../src/node/read/path-reads.js'
import {pathReads, withPath} from '../helpers/path-states.js'
import {notReady} from '../helpers/check-states.js'
import {offlineCluster, type OfflineOptions} from '../helpers/offline-cluster.js'
import {checkFamily, checkTester} from '../helpers/check-tester.js'
import {NODES, WEB, dualStackNode, dualStackPods, labPods, type LabPod} from '../fixtures/lab-cluster.js'

const ok = (stdout: string) => ({code: 0, stdout, stderr: ''})
const UDP_WEB = {ports: [{...WEB.ports[0], protocol: 'UDP' as const, targetPort: 8080}]}
const STALE_UDP =
  'udp      17 28 src=10.244.1.100 dst=10.96.10.10 sport=40053 dport=80 [UNREPLIED] src=10.244.2.7 dst=10.244.1.100 sport=8080 dport=40053 mark=0 use=1'
/** A client on node-b pinned to port 40053, its DNS entry still DNATed to 10.244.1.54, a CoreDNS address that is gone. */
const STALE_DNS =
  'udp      17 29 src=10.244.2.100 dst=10.96.0.10 sport=40053 dport=53 [UNREPLIED] src=10.244.1.54 dst=10.244.2.100 sport=53 dport=40053 mark=0 use=1'
const STALE_TCP =
  'tcp      6 86000 ESTABLISHED src=10.244.1.100 dst=10.96.10.10 sport=51010 dport=80 src=10.244.2.7 dst=10.244.1.100 sport=8080 dport=51010 [ASSURED] mark=0 use=1'

const HEALTHY_SYSCTL6 = {'net.ipv6.conf.all.forwarding': '1', 'net.bridge.bridge-nf-call-ip6tables': '1'}

/**
 * A dual-stack node's path reads: the IPv4 ones healthy; the IPv6 table and lookups with node-a's route to node-b's
 * IPv6 pod CIDR `v6Route` ('missing': only the IPv6 default route matches; 'old-bundle': no IPv6 table recorded).
 */
function dualStackPathReads(
  node: 'node-a' | 'node-b',
  v6Route: 'ok' | 'missing' | 'old-bundle' = 'ok',
  sysctl6: Record<string, string> | null = HEALTHY_SYSCTL6,
): RawPathReads {
  const self = dualStackNode(NODES.find((n) => n.name === node)!)
  const other = dualStackNode(NODES.find((n) => n.name !== node)!)
  const v4 = pathReads(node)
  const sysctls = sysctl6
    ? {
        ...v4.sysctls!,
        stdout:
          v4.sysctls!.stdout +
          Object.entries(sysctl6)
            .map(([k, v]) => `${k} = ${v}\n`)
            .join(''),
      }
    : v4.sysctls
  const broken = node === 'node-a' && v6Route === 'missing'
  const routeGet6 = (pod: LabPod) => {
    if (pod.node === node)
      return ok(`${pod.ip6} from :: dev cbr0 proto kernel src ${self.gateway6} metric 256 pref medium`)
    if (broken)
      return ok(`${pod.ip6} from :: via fd00:10:200::1 dev eth0 proto static src ${self.ip6} metric 1024 pref medium`)
    return ok(`${pod.ip6} from :: via ${other.ip6} dev eth0 proto static src ${self.ip6} metric 1024 pref medium`)
  }
  const webPods = dualStackPods(labPods()).filter((p) => p.kind === 'web')
  const table6 = [
    'default via fd00:10:200::1 dev eth0 proto static metric 1024 pref medium',
    'fd00:10:200::/64 dev eth0 proto kernel metric 256 pref medium',
    `${self.podCIDR6} dev cbr0 proto kernel metric 256 pref medium`,
    ...(broken ? [] : [`${other.podCIDR6} via ${other.ip6} dev eth0 proto static metric 1024 pref medium`]),
    '',
  ].join('\n')
  return {
    ...v4,
    sysctls,
    ...(v6Route === 'old-bundle' ? {} : {routeTable6: ok(table6)}),
    routeGet: [...v4.routeGet, ...webPods.map((p) => ({address: p.ip6!, ...routeGet6(p)}))],
    conntrack: [...v4.conntrack, {protocol: 'tcp', address: 'fd00:10:96::10:10', ...ok('')}],
  }
}
const withDualStackPath = (
  v6Route: 'ok' | 'missing' | 'old-bundle',
  sysctl6: Partial<Record<'node-a' | 'node-b', Record<string, string> | null>> = {},
): OfflineOptions => ({
  dualStack: true,
  editObservation: Object.fromEntries(
    (['node-a', 'node-b'] as const).map((node) => [
      node,
      (obs: NodeObservation): NodeObservation => ({
        ...obs,
        path: interpretPathReads(
          dualStackPathReads(node, v6Route, sysctl6[node] === undefined ? HEALTHY_SYSCTL6 : sysctl6[node]),
        ),
      }),
    ]),
  ),
})

/** A diagnosis as lines: its findings, and what it says it did not check of one kind ("NODE REQUIRED: reason"). */
function findingsAndUnchecked(state: OfflineOptions, check: string): {findings: string[]; unchecked: string[]} {
  const {cluster, observations} = offlineCluster(state)
  const d = diagnose(cluster, observations)
  return {
    findings: d.findings.map((f) => `${f.code} ${f.node}: ${f.message}`),
    unchecked: d.notChecked.filter((n) => n.check === check).map((n) => `${n.node} ${n.required}: ${n.reason}`),
  }
}

checkFamily('node-path', () => {
  describe("IPv6's own forwarding settings judged for the IPv6 family (net.ipv6.conf.all.forwarding, bridge-nf-call-ip6tables)", () => {
    const rows = (state: OfflineOptions) => {
      const {findings, unchecked} = findingsAndUnchecked(state, 'sysctls')
      return {findings, sysctls: unchecked}
    }
    test('both families forward: no finding, nothing unchecked', () => {
      assert.deepEqual(rows(withDualStackPath('ok')), {findings: [], sysctls: []})
    })
    test('IPv6 forwarding off on node-b (ip_forward on): KPD-NODE-FORWARDING-OFF for IPv6 only, its fix sets the IPv6 key', () => {
      const state = withDualStackPath('ok', {'node-b': {...HEALTHY_SYSCTL6, 'net.ipv6.conf.all.forwarding': '0'}})
      assert.deepEqual(rows(state), {
        findings: [
          'KPD-NODE-FORWARDING-OFF node-b: node-b (IPv6): net.ipv6.conf.all.forwarding = 0: the node forwards no IPv6 packet, so its pods reach no Service and no pod on another node, pods on other nodes cannot reach its pods, and NodePorts on node-b reach no endpoint',
        ],
        sysctls: [],
      })
      const {cluster, observations} = offlineCluster(state)
      assert.deepEqual(diagnose(cluster, observations).findings[0].fix?.argv, [
        ['ssh', '--', 'node-b', 'sudo', 'sysctl', '-w', 'net.ipv6.conf.all.forwarding=1'],
      ])
    })
    test('bridge-nf-call-ip6tables off on node-b, which hosts endpoints: KPD-BRIDGE-NF-OFF for IPv6 only', () => {
      assert.deepEqual(
        rows(withDualStackPath('ok', {'node-b': {...HEALTHY_SYSCTL6, 'net.bridge.bridge-nf-call-ip6tables': '0'}}))
          .findings,
        [
          'KPD-BRIDGE-NF-OFF node-b: node-b (IPv6): net.bridge.bridge-nf-call-ip6tables = 0: packets between pods on one bridge skip ip6tables, so a pod on node-b whose connection to shop/web is DNATed to fd00:10:244:2::10 (pod web-b1), fd00:10:244:2::11 (pod web-b2) on the same node gets replies that are not un-NATed, and the connection fails',
        ],
      )
    })
    test("a bundle recorded before IPv6's keys were read: no finding, the IPv6 settings said not checked (not required) per node", () => {
      const why =
        "IPv6 forwarding settings not read (net.ipv6.conf.all.forwarding, net.bridge.bridge-nf-call-ip6tables; recorded by a version that read IPv4's only)"
      assert.deepEqual(rows(withDualStackPath('ok', {'node-a': null, 'node-b': null})), {
        findings: [],
        sysctls: [`node-a false: ${why}`, `node-b false: ${why}`],
      })
    })
  })

  describe('the route to an IPv6 endpoint judged against the IPv6 table (ip -6 route show), per family', () => {
    const routeRows = (state: OfflineOptions) => {
      const {findings, unchecked} = findingsAndUnchecked(state, 'routes')
      return {findings, routes: unchecked}
    }
    test('healthy IPv4 and IPv6 routes: no finding, routes not listed as unchecked for IPv6', () => {
      assert.deepEqual(routeRows(withDualStackPath('ok')), {findings: [], routes: []})
    })
    test("node-a's route to node-b's IPv6 pod CIDR is gone, only the IPv6 default route matches: KPD-ROUTE-MISSING for IPv6 only", () => {
      assert.deepEqual(routeRows(withDualStackPath('missing')), {
        findings: [
          "KPD-ROUTE-MISSING node-a: node-a (IPv6): no working route to node-b's pod CIDR fd00:10:244:2::/64: only the default route matches (via fd00:10:200::1 dev eth0), not a route to node-b (fd00:10:200::12), so node-a cannot reach endpoints fd00:10:244:2::10 (pod web-b1), fd00:10:244:2::11 (pod web-b2) on node-b",
        ],
        routes: [],
      })
      const {cluster, observations} = offlineCluster(withDualStackPath('missing'))
      const f = diagnose(cluster, observations).findings[0]
      assert.deepEqual(
        [f.check?.argv, f.fix?.argv, f.fix?.text, f.text],
        [
          [['ssh', '--', 'node-a', 'ip', 'route', 'get', 'fd00:10:244:2::10']],
          [['ssh', '--', 'node-a', 'sudo', 'ip', 'route', 'replace', 'fd00:10:244:2::/64', 'via', 'fd00:10:200::12']],
          'Restart the CNI agent on node-a: it owns the route (the command adds it by hand until then).',
          "Expected: via node-b (fd00:10:200::12) or the CNI's tunnel.",
        ],
      )
    })
    test('a bundle recorded before the IPv6 table was read: no finding, the IPv6 routes said not checked (not required) per node', () => {
      const why =
        'IPv6 route table not read (recorded by a version that read the IPv4 table only): IPv6 endpoints reached by the default route alone are not told'
      assert.deepEqual(routeRows(withDualStackPath('old-bundle')), {
        findings: [],
        routes: [`node-a false: ${why}`, `node-b false: ${why}`],
      })
    })
  })

  checkTester(
    'the node under the path: forwarding, bridge netfilter, routes, conntrack (node-forwarding, bridge-netfilter, route-missing, conntrack-stale, conntrack-full)',
    [
      {name: 'healthy path reads on both nodes: no finding', state: withPath(), findings: []},
      {
        name: 'ip_forward=0 on node-a',
        state: withPath({'node-a': {sysctl: {'net.ipv4.ip_forward': '0'}}}),
        findings: [['KPD-NODE-FORWARDING-OFF', 'node-a', 'error']],
      },
      {
        name: 'bridge-nf-call-iptables=0 on node-a (web-a1 is there)',
        state: withPath({'node-a': {sysctl: {'net.bridge.bridge-nf-call-iptables': '0'}}}),
        findings: [['KPD-BRIDGE-NF-OFF', 'node-a', 'error']],
      },
      {
        name: 'br_netfilter not loaded on node-b',
        state: withPath({'node-b': {absent: ['net.bridge.bridge-nf-call-iptables']}}),
        findings: [['KPD-BRIDGE-NF-OFF', 'node-b', 'error']],
      },
      {
        name: "bridge-nf-call-iptables=0 on a node that hosts no endpoint of the Service: not this Service's problem",
        state: {
          ...withPath({'node-a': {sysctl: {'net.bridge.bridge-nf-call-iptables': '0'}}}),
          pods: labPods().filter((p) => p.name !== 'web-a1'),
        },
        findings: [],
      },
      {
        name: 'route_localnet=0 on node-b: its localhost NodePort 127.0.0.1:30080 fails',
        state: withPath({'node-b': {sysctl: {'net.ipv4.conf.all.route_localnet': '0'}}}),
        findings: [['KPD-ROUTE-LOCALNET-OFF', 'node-b', 'warning']],
      },
      {
        name: 'route_localnet=0 on conf.all but 1 on the interfaces the endpoint routes use: no finding',
        state: withPath({
          'node-b': {
            sysctl: {
              'net.ipv4.conf.all.route_localnet': '0',
              'net.ipv4.conf.cbr0.route_localnet': '1',
              'net.ipv4.conf.eth0.route_localnet': '1',
            },
          },
        }),
        findings: [],
      },
      {
        name: 'route_localnet=0 where kube-proxy has localhost NodePorts off: not judged',
        state: {
          ...withPath({'node-b': {sysctl: {'net.ipv4.conf.all.route_localnet': '0'}}}),
          editCluster: (c) => void (c.proxyConfig.localhostNodePorts = false),
        },
        findings: [],
      },
      {
        name: 'route_localnet=0 for a Service without NodePorts: not judged',
        state: {
          ...withPath({'node-b': {sysctl: {'net.ipv4.conf.all.route_localnet': '0'}}}),
          web: {type: 'ClusterIP', ports: [{...WEB.ports[0], nodePort: undefined}]},
        },
        findings: [],
      },
      {
        name: "node-a's route to node-b's pod CIDR deleted: the default route takes it",
        state: withPath({'node-a': {podRoute: 'missing'}}),
        findings: [['KPD-ROUTE-MISSING', 'node-a', 'error']],
      },
      {
        name: "node-a's route to node-b's pod CIDR unreachable",
        state: withPath({'node-a': {podRoute: 'unreachable'}}),
        findings: [['KPD-ROUTE-MISSING', 'node-a', 'error']],
      },
      {
        name: 'the default route and no podCIDR on the nodes (a VPC-routed CNI): not judged',
        state: {
          ...withPath({'node-a': {podRoute: 'missing'}}),
          editCluster: (c) => c.nodes.forEach((n) => void (n.spec = {})),
        },
        findings: [],
      },
      {name: 'a UDP Service with healthy conntrack entries', state: {...withPath(), web: UDP_WEB}, findings: []},
      {
        name: 'a UDP entry DNATed to an address that is no endpoint',
        state: {...withPath({'node-a': {udp: [STALE_UDP]}}), web: UDP_WEB},
        findings: [['KPD-CONNTRACK-STALE', 'node-a', 'error']],
      },
      {
        name: 'a UDP entry DNATed to an endpoint IP on a port it no longer has',
        state: {
          ...withPath({
            'node-b': {
              udp: [STALE_UDP.replace('src=10.244.2.7 ', 'src=10.244.2.10 ').replace('sport=8080', 'sport=9090')],
            },
          }),
          web: UDP_WEB,
        },
        findings: [['KPD-CONNTRACK-STALE', 'node-b', 'error']],
      },
      {
        name: 'a TCP entry to an old address: a new connection takes a new entry, not judged',
        state: withPath({'node-a': {conntrack: [STALE_TCP]}}),
        findings: [],
      },
      {
        name: 'a UDP entry for a port the Service does not have (TCP Service): not judged',
        state: withPath({'node-a': {udp: [STALE_UDP]}}),
        findings: [],
      },
      {
        name: 'a stale UDP entry for cluster DNS on node-b (a pinned client, CoreDNS since readdressed): KPD-CONNTRACK-STALE on node-b while diagnosing shop/web, its exact conntrack -D',
        state: withPath({'node-b': {dnsUdp: [STALE_DNS]}}),
        findings: [['KPD-CONNTRACK-STALE', 'node-b', 'error']],
        fixes: {
          'KPD-CONNTRACK-STALE node-b': {
            check: [
              [
                'ssh',
                '--',
                'node-b',
                'sudo',
                'conntrack',
                '-L',
                '-p',
                'udp',
                '--orig-dst',
                '10.96.0.10',
                '--orig-port-dst',
                '53',
                '--reply-src',
                '10.244.1.54',
              ],
            ],
            fix: {
              argv: [
                [
                  'ssh',
                  '--',
                  'node-b',
                  'sudo',
                  'conntrack',
                  '-D',
                  '-p',
                  'udp',
                  '--orig-dst',
                  '10.96.0.10',
                  '--orig-port-dst',
                  '53',
                  '--reply-src',
                  '10.244.1.54',
                ],
              ],
              text: null,
              changes: 'node',
              node: 'node-b',
            },
            text: null,
          },
        },
      },
      {
        name: 'a UDP DNS entry DNATed to the ready CoreDNS pod (10.244.1.53:53): no finding',
        state: withPath({'node-b': {dnsUdp: [STALE_DNS.replaceAll('10.244.1.54', '10.244.1.53')]}}),
        findings: [],
      },
      {
        name: 'a UDP DNS entry to a CoreDNS pod that is no longer ready: stale (only ready DNS endpoints answer)',
        state: {
          ...withPath({'node-b': {dnsUdp: [STALE_DNS.replaceAll('10.244.1.54', '10.244.1.53')]}}),
          pods: notReady('coredns-a'),
        },
        findings: [
          ['KPD-DNS-NO-ENDPOINTS', '-', 'error'],
          ['KPD-CONNTRACK-STALE', 'node-a', 'error'],
          ['KPD-CONNTRACK-STALE', 'node-b', 'error'],
        ],
      },
      {
        name: 'a stale DNS entry in a scan: judged once, on the cluster DNS Service of its own, not on shop/web',
        state: withPath({'node-b': {dnsUdp: [STALE_DNS]}}),
        options: {dnsJudgedApart: true},
        findings: [],
      },
      {
        name: 'conntrack not installed on node-b: not read, no finding, no crash',
        state: withPath({'node-b': {conntrackMissing: true}}),
        findings: [],
      },
      {
        name: 'conntrack table 91% full on node-b',
        state: withPath({'node-b': {sysctl: {'net.netfilter.nf_conntrack_count': '240000'}}}),
        findings: [['KPD-CONNTRACK-FULL', 'node-b', 'warning']],
        fixes: {
          'KPD-CONNTRACK-FULL node-b': {
            check: [['ssh', '--', 'node-b', 'sudo', 'conntrack', '-S']],
            fix: {
              argv: [['ssh', '--', 'node-b', 'sudo', 'sysctl', '-w', 'net.netfilter.nf_conntrack_max=524288']],
              text: null,
              changes: 'node',
              node: 'node-b',
            },
            text: "To keep it, raise kube-proxy's conntrack.maxPerCore (kube-proxy sets nf_conntrack_max when it starts) or set it in /etc/sysctl.d on node-b.",
          },
        },
      },
      {
        name: 'conntrack table 89% full: below the 90% threshold',
        state: withPath({'node-b': {sysctl: {'net.netfilter.nf_conntrack_count': '233300'}}}),
        findings: [],
      },
    ],
  )

  test('node path findings: exact messages and next steps', () => {
    const findings = (faults: Parameters<typeof withPath>[0], extra = {}) => {
      const {cluster, observations} = offlineCluster({...withPath(faults), ...extra})
      return diagnose(cluster, observations).findings.map((f) => [
        f.code,
        f.node,
        f.message,
        f.check?.command ?? null,
        f.fix && `${f.fix.changes} ${f.fix.node}: ${f.fix.command ?? f.fix.text}`,
        f.text,
        f.evidence,
      ])
    }
    assert.deepEqual(findings({'node-a': {sysctl: {'net.ipv4.ip_forward': '0'}}}), [
      [
        'KPD-NODE-FORWARDING-OFF',
        'node-a',
        'node-a: net.ipv4.ip_forward = 0: the node forwards no IPv4 packet, so its pods reach no Service and no pod on another node, pods on other nodes cannot reach its pods, and NodePorts on node-a reach no endpoint',
        'ssh -- node-a sysctl net.ipv4.ip_forward',
        'node node-a: ssh -- node-a sudo sysctl -w net.ipv4.ip_forward=1',
        'Then find what set it to 0 (net.ipv4.ip_forward in /etc/sysctl.conf and /etc/sysctl.d).',
        ['sysctl net.ipv4.ip_forward = 0'],
      ],
    ])
    assert.deepEqual(findings({'node-b': {absent: ['net.bridge.bridge-nf-call-iptables']}}), [
      [
        'KPD-BRIDGE-NF-OFF',
        'node-b',
        'node-b: br_netfilter is not loaded (no net.bridge.bridge-nf-call-iptables): packets between pods on one bridge skip iptables, so a pod on node-b whose connection to shop/web is DNATed to 10.244.2.10 (pod web-b1), 10.244.2.11 (pod web-b2) on the same node gets replies that are not un-NATed, and the connection fails',
        'ssh -- node-b lsmod | grep br_netfilter',
        'node node-b: ssh -- node-b sudo modprobe br_netfilter',
        'Then set net.bridge.bridge-nf-call-iptables=1 (sysctl -w on node-b), and load br_netfilter at boot (/etc/modules-load.d).',
        ['sysctl: cannot stat /proc/sys/net/bridge/bridge-nf-call-iptables'],
      ],
    ])
    assert.deepEqual(findings({'node-b': {sysctl: {'net.ipv4.conf.all.route_localnet': '0'}}}), [
      [
        'KPD-ROUTE-LOCALNET-OFF',
        'node-b',
        'node-b: route_localnet is off on cbr0, eth0: connections to 127.0.0.1:30080 (localhost NodePorts of shop/web) on node-b fail: the kernel drops a packet from 127.0.0.1 routed to endpoint 10.244.2.10, 10.244.2.11 (out of cbr0); 10.244.1.10 (out of eth0) as a martian',
        'ssh -- node-b sysctl net.ipv4.conf.all.route_localnet',
        'node node-b: ssh -- node-b sudo sysctl -w net.ipv4.conf.all.route_localnet=1',
        "kube-proxy sets it only when it starts: find what reset it on node-b (a sysctl.d file re-applied, a hardening script). To turn localhost NodePorts off instead, set iptables.localhostNodePorts: false in kube-proxy's configuration.",
        ['sysctl net.ipv4.conf.all.route_localnet = 0'],
      ],
    ])
    assert.deepEqual(findings({'node-a': {podRoute: 'missing'}}), [
      [
        'KPD-ROUTE-MISSING',
        'node-a',
        "node-a: no working route to node-b's pod CIDR 10.244.2.0/24: only the default route matches (via 10.200.0.1 dev eth0), not a route to node-b (10.200.0.12), so node-a cannot reach endpoints 10.244.2.10 (pod web-b1), 10.244.2.11 (pod web-b2) on node-b",
        'ssh -- node-a ip route get 10.244.2.10',
        'node node-a: ssh -- node-a sudo ip route replace 10.244.2.0/24 via 10.200.0.12',
        "Expected: via node-b (10.200.0.12) or the CNI's tunnel.",
        [
          'ip route get 10.244.2.10: 10.244.2.10 via 10.200.0.1 dev eth0 src 10.200.0.11 uid 0',
          'ip route get 10.244.2.11: 10.244.2.11 via 10.200.0.1 dev eth0 src 10.200.0.11 uid 0',
        ],
      ],
    ])
    assert.deepEqual(findings({'node-a': {podRoute: 'unreachable'}})[0].slice(0, 3), [
      'KPD-ROUTE-MISSING',
      'node-a',
      'node-a: no working route to node-b\'s pod CIDR 10.244.2.0/24: the route is unreachable ("RTNETLINK answers: No route to host"), so node-a cannot reach endpoints 10.244.2.10 (pod web-b1), 10.244.2.11 (pod web-b2) on node-b',
    ])
    assert.deepEqual(findings({'node-a': {udp: [STALE_UDP, STALE_UDP.replace(/40053/g, '40054')]}}, {web: UDP_WEB}), [
      [
        'KPD-CONNTRACK-STALE',
        'node-a',
        'node-a: 2 conntrack entries for shop/web:http (UDP 10.96.10.10:80) still DNAT to 10.244.2.7:8080, which is no endpoint of the Service: 10.244.1.100:40053, 10.244.1.100:40054 get no answer (each new packet refreshes a UDP entry, so a client that keeps asking from the same port never recovers)',
        'ssh -- node-a sudo conntrack -L -p udp --orig-dst 10.96.10.10 --orig-port-dst 80 --reply-src 10.244.2.7',
        'node node-a: ssh -- node-a sudo conntrack -D -p udp --orig-dst 10.96.10.10 --orig-port-dst 80 --reply-src 10.244.2.7',
        null,
        [`conntrack: ${STALE_UDP}`, `conntrack: ${STALE_UDP.replace(/40053/g, '40054')}`],
      ],
    ])
    assert.deepEqual(findings({'node-b': {sysctl: {'net.netfilter.nf_conntrack_count': '240000'}}}), [
      [
        'KPD-CONNTRACK-FULL',
        'node-b',
        'node-b: the conntrack table is 91% full (nf_conntrack_count 240000 of nf_conntrack_max 262144; warned from 90%): when it is full the kernel drops the packets of new connections ("nf_conntrack: table full, dropping packet")',
        'ssh -- node-b sudo conntrack -S',
        'node node-b: ssh -- node-b sudo sysctl -w net.netfilter.nf_conntrack_max=524288',
        "To keep it, raise kube-proxy's conntrack.maxPerCore (kube-proxy sets nf_conntrack_max when it starts) or set it in /etc/sysctl.d on node-b.",
        ['sysctl net.netfilter.nf_conntrack_count = 240000', 'sysctl net.netfilter.nf_conntrack_max = 262144'],
      ],
    ])
  })
})
