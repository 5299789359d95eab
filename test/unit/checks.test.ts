import assert from 'node:assert/strict'
import {describe, test} from 'node:test'
import type {V1Pod} from '@kubernetes/client-node'
import {CATALOGUE} from '../../src/checks/catalogue.js'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {rulesFromCodes} from '../../src/diagnosis/ignore-rules.js'
import type {NodeObservation} from '../../src/node/bundle.js'
import {DNS, NODES, WEB, dualStackNode, dualStackPods, labPods, type LabPod} from '../lab/lab-cluster.js'
import {kubeProxyNftRules} from '../lab/kube-proxy-nft.js'
import {parseNftDump} from '../../src/parse/nft-dump.js'
import {BufferSource} from '../../src/parse/dump-source.js'
import {IptablesSave} from '../../src/parse/iptables-save.js'
import {kubeProxyPodObject} from '../lab/fixtures.js'
import {offlineCluster, type OfflineOptions} from '../helpers/offline-cluster.js'
import {buildReport} from '../../src/report/report.js'
import {renderHuman} from '../../src/report/human.js'
import {Chalk} from 'chalk'
import {PROBES_OFF} from '../../src/diagnosis/probe-stage.js'
import {checkTester, firedCodes} from '../helpers/check-tester.js'
import type {DiagnoseOptions} from '../../src/diagnosis/diagnose.js'
import {planProbes, PROBE_SETTINGS} from '../../src/diagnosis/probe-plan.js'
import {interpretPathReads, type RawPathReads} from '../../src/node/path-reads.js'

const notReady = (...names: string[]) => labPods().map((p) => (names.includes(p.name) ? {...p, ready: false} : p))
const insertBefore = (anchor: string, line: string) => (text: string) => {
  assert.ok(text.includes(anchor), `the dump has ${anchor}`)
  return text.replace(anchor, `${line}\n${anchor}`)
}
/** Adds filter chains and rules to a dump: declarations after the built-in chains, FORWARD rules ahead of kube-proxy's. */
const withFilter =
  (opts: {forwardPolicy?: 'DROP'; chains?: string[]; forward?: string[]; rules?: string[]}) =>
  (text: string): string => {
    let out = text
    if (opts.forwardPolicy) out = out.replace(':FORWARD ACCEPT [0:0]', `:FORWARD ${opts.forwardPolicy} [0:0]`)
    out = out.replace(':OUTPUT ACCEPT [0:0]\n', `:OUTPUT ACCEPT [0:0]\n${(opts.chains ?? []).map((c) => `:${c} - [0:0]\n`).join('')}`)
    if (opts.forward?.length) out = insertBefore(FIRST_FORWARD_RULE, opts.forward.join('\n'))(out)
    if (opts.rules?.length) out = out.replace('\nCOMMIT\n*nat', `\n${opts.rules.join('\n')}\nCOMMIT\n*nat`)
    return out
  }
/** Docker's daemon on a node: FORWARD policy DROP, its chains, accepts for its own docker0 only (as in test/lab/foreign-rules.ts). */
const DOCKER = {
  forwardPolicy: 'DROP' as const,
  chains: ['DOCKER', 'DOCKER-USER'],
  forward: [
    '-A FORWARD -j DOCKER-USER',
    '-A FORWARD -o docker0 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
    '-A FORWARD -o docker0 -j DOCKER',
    '-A FORWARD -i docker0 ! -o docker0 -j ACCEPT',
    '-A FORWARD -i docker0 -o docker0 -j ACCEPT',
  ],
}
const DOCKER_USER_RETURN = '-A DOCKER-USER -j RETURN'
const calicoDrop = (ip: string) => ({
  chains: ['cali-FORWARD'],
  forward: ['-A FORWARD -m comment --comment "policy engine: forward hook" -j cali-FORWARD'],
  rules: [`-A cali-FORWARD -d ${ip}/32 -m comment --comment "policy engine: default deny ingress" -m conntrack --ctstate NEW -j DROP`],
})
/** Both nodes in kube-proxy's nftables mode (as configured), node-b's ruleset with `extraOnB` appended. */
const nftablesLab = (extraOnB = ''): OfflineOptions => {
  const nftNode = (index: number, extra: string) => (obs: NodeObservation) => ({
    ...obs,
    iptables: IptablesSave.parse(new BufferSource(Buffer.from(''))),
    nft: parseNftDump(kubeProxyNftRules(NODES[index], [WEB, DNS], labPods()) + extra),
  })
  return {editCluster: (c) => void (c.proxyConfig.mode = 'nftables'), editObservation: {'node-a': nftNode(0, ''), 'node-b': nftNode(1, extraOnB)}}
}
const nftForwardChain = (table: string, policy: 'accept' | 'drop', rules: string[] = []) =>
  `\ntable ${table} {\n  chain forward {\n    type filter hook forward priority filter; policy ${policy};\n${rules.map((r) => `    ${r}\n`).join('')}  }\n}\n`
const FIRST_FORWARD_RULE = '-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall"'
const STALE_REJECT = '-A KUBE-SERVICES -d 10.96.10.10/32 -p tcp -m comment --comment "shop/web:http has no endpoints" -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable'
const kubeProxyStatus = (status: NodeObservation['kubeProxy']) => (obs: NodeObservation) => ({...obs, kubeProxy: status})
const now = Math.floor(Date.now() / 1000)
const healthy: NodeObservation['kubeProxy'] = {
  proxyMode: 'iptables',
  healthz: {status: 200, lastUpdated: new Date().toISOString(), currentTime: new Date().toISOString(), nodeEligible: true},
  metrics: {kubeproxy_sync_proxy_rules_last_timestamp_seconds: now, kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds: now, kubeproxy_sync_proxy_rules_iptables_restore_failures_total: 0},
}
const IPVS_GLUE = [
  '*nat',
  ':PREROUTING ACCEPT [0:0]',
  ':KUBE-SERVICES - [0:0]',
  ':KUBE-NODE-PORT - [0:0]',
  ':KUBE-MARK-MASQ - [0:0]',
  '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
  '-A KUBE-SERVICES -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP src,dst -j KUBE-MARK-MASQ',
  '-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT',
  'COMMIT',
  '',
].join('\n')

checkTester('a healthy lab', [
  {name: 'iptables on both nodes: no finding at all', state: {}, findings: []},
  {name: 'ClientIP affinity programmed as asked', state: {web: {affinitySeconds: 10800}}, findings: []},
  {
    name: 'externalTrafficPolicy Local with a node without local endpoints (drops by design)',
    state: {web: {externalTrafficPolicy: 'Local'}, pods: notReady('web-a1')},
    findings: [['KPD-ENDPOINT-NOT-READY', 'node-a', 'warning']],
  },
  {name: 'IPVS on both nodes, as configured', state: {ipvs: {'node-a': {}, 'node-b': {}}, editCluster: (c) => void (c.proxyConfig.mode = 'ipvs')}, findings: []},
  {name: 'kube-proxy healthy and in sync on both nodes', state: {editObservation: {'node-a': kubeProxyStatus(healthy), 'node-b': kubeProxyStatus(healthy)}}, findings: []},
])

checkTester('the Service and its endpoints (not-proxied, selector-no-pods, no-ready-endpoints, target-port, endpoint-not-ready)', [
  {name: 'headless Service: nothing to judge, said so', state: {editCluster: (c) => void (c.service.spec!.clusterIP = 'None')}, findings: [['KPD-NOT-PROXIED', '-', 'info']]},
  {
    name: 'selector matches nothing',
    state: {pods: labPods().map((p) => (p.kind === 'web' ? {...p, labels: {app: 'webb'}} : p))},
    findings: [['KPD-SELECTOR-NO-PODS', '-', 'error']],
    fixes: {'KPD-SELECTOR-NO-PODS -': {argv: [['kubectl', '-n', 'shop', 'get', 'pods', '--show-labels']], text: "Compare the Pods' labels with the selector app=web."}},
  },
  {name: 'all backends not ready', state: {pods: notReady('web-a1', 'web-b1', 'web-b2')}, findings: [['KPD-NO-READY-ENDPOINTS', '-', 'error']]},
  {
    name: 'one backend not ready',
    state: {pods: notReady('web-b2')},
    findings: [['KPD-ENDPOINT-NOT-READY', 'node-b', 'warning']],
    fixes: {'KPD-ENDPOINT-NOT-READY node-b': {argv: [['kubectl', '-n', 'shop', 'describe', 'pod', 'web-b2']], text: null}},
  },
  {name: 'named targetPort missing on one pod', state: {pods: labPods().map((p) => (p.name === 'web-a1' ? {...p, portName: 'web'} : p))}, findings: [['KPD-TARGETPORT-NOT-EXPOSED', '-', 'error']]},
  {
    name: 'numeric targetPort one pod does not declare',
    state: {
      editCluster: (c) => {
        c.service.spec!.ports![0].targetPort = 8080
        const b2 = c.pods.find((p: V1Pod) => p.metadata?.name === 'web-b2')!
        for (const container of b2.spec!.containers) container.ports = [{containerPort: 9090, name: 'metrics'}]
      },
    },
    findings: [['KPD-TARGETPORT-UNDECLARED', '-', 'warning']],
  },
])

checkTester('cluster DNS (dns.ts)', [
  {name: 'no DNS Service', state: {editCluster: (c) => void (c.dns = {slices: []})}, findings: [['KPD-DNS-SERVICE-MISSING', '-', 'error']]},
  {name: 'DNS pods not ready', state: {pods: notReady('coredns-a')}, findings: [['KPD-DNS-NO-ENDPOINTS', '-', 'error']]},
  {name: 'NXDOMAIN on one node', state: {dns: {'node-b': {addresses: [], rcode: 'NXDOMAIN'}}}, findings: [['KPD-DNS-NO-ANSWER', 'node-b', 'error']]},
  {name: 'the wrong address on one node', state: {dns: {'node-a': {addresses: ['10.96.99.99']}}}, findings: [['KPD-DNS-NO-ANSWER', 'node-a', 'error']]},
  {name: 'the query failed on one node', state: {dns: {'node-a': {addresses: [], error: 'connection refused'}}}, findings: [['KPD-DNS-NO-ANSWER', 'node-a', 'error']]},
  {
    name: 'not asked on one node (no TCP to the server from the node, no dig there): no verdict',
    state: {dns: {'node-a': {addresses: [], method: 'none', error: 'port forward refused; and the node has neither dig nor nslookup'}}},
    findings: [],
  },
])

const RIGHT_A = {type: 'A' as const, rcode: 'NOERROR', addresses: ['10.96.10.10']}
const RIGHT_AAAA = {type: 'AAAA' as const, rcode: 'NOERROR', addresses: ['fd00:10:96::10:10']}
/** A dual-stack web Service, both nodes answered `answers` (node-b the right A and AAAA). */
const dualStackDns = (answers: Array<{type: 'A' | 'AAAA'; rcode?: string; addresses: string[]; error?: string}>): OfflineOptions => ({dualStack: true, dns: {'node-a': {answers}}})

/** Each family's ClusterIP against the answer of its own type: [case, state, findings as "CODE node: message", DNS not-checked entries]. */
const DUAL_STACK_DNS: Array<[string, OfflineOptions, string[], string[]]> = [
  ['A and AAAA both right', dualStackDns([RIGHT_A, RIGHT_AAAA]), [], []],
  [
    'AAAA missing (NOERROR, no address): an IPv6 finding only',
    dualStackDns([RIGHT_A, {type: 'AAAA', rcode: 'NOERROR', addresses: []}]),
    ['KPD-DNS-NO-ANSWER node-a: node-a (IPv6): web.shop.svc.cluster.local AAAA resolves to nothing, not the ClusterIP fd00:10:96::10:10'],
    [],
  ],
  [
    'AAAA wrong: an IPv6 finding only',
    dualStackDns([RIGHT_A, {type: 'AAAA', rcode: 'NOERROR', addresses: ['fd00:10:96::99:99']}]),
    ['KPD-DNS-NO-ANSWER node-a: node-a (IPv6): web.shop.svc.cluster.local AAAA resolves to fd00:10:96::99:99, not the ClusterIP fd00:10:96::10:10'],
    [],
  ],
  [
    'A wrong, AAAA right: an IPv4 finding only',
    dualStackDns([{type: 'A', rcode: 'NOERROR', addresses: ['10.96.99.99']}, RIGHT_AAAA]),
    ['KPD-DNS-NO-ANSWER node-a: node-a (IPv4): web.shop.svc.cluster.local A resolves to 10.96.99.99, not the ClusterIP 10.96.10.10'],
    [],
  ],
  [
    'the AAAA question failed: an IPv6 finding naming the failure',
    dualStackDns([RIGHT_A, {type: 'AAAA', addresses: [], error: 'no DNS answer within 3s'}]),
    ['KPD-DNS-NO-ANSWER node-a: node-a (IPv6): asking 10.96.0.10 for the AAAA record of web.shop.svc.cluster.local failed: no DNS answer within 3s'],
    [],
  ],
  [
    'A right, AAAA not asked (a bundle from before AAAA questions): no finding, IPv6 DNS not checked',
    dualStackDns([RIGHT_A]),
    [],
    ['node-a dns-from-node false: IPv6 DNS: the AAAA record of web.shop.svc.cluster.local was not asked of 10.96.0.10 (recorded by a version that asked A only)'],
  ],
]

describe('cluster DNS of a dual-stack Service: A for the IPv4 ClusterIP, AAAA for the IPv6 one', () => {
  for (const [name, state, findings, notChecked] of DUAL_STACK_DNS) {
    test(name, () => {
      const {cluster, observations} = offlineCluster(state)
      const d = diagnose(cluster, observations)
      assert.deepEqual(
        d.findings.map((f) => `${f.code} ${f.node}: ${f.message}`),
        findings,
      )
      assert.deepEqual(
        d.notChecked.filter((n) => n.check === 'dns-from-node').map((n) => `${n.node} ${n.check} ${n.required}: ${n.reason}`),
        notChecked,
      )
    })
  }
  test('the finding\'s command asks the failing family\'s record type', () => {
    const {cluster, observations} = offlineCluster(DUAL_STACK_DNS[2][1])
    assert.deepEqual(diagnose(cluster, observations).findings[0].argv, [['ssh', 'node-a', 'dig', '+tcp', 'web.shop.svc.cluster.local', 'AAAA', '@10.96.0.10']])
  })
})

checkTester('nodes and kube-proxy (node-unreadable, proxy-mode, kube-proxy-health, node-diverges)', [
  {
    name: 'one node unreadable',
    state: {editObservation: {'node-b': (o) => ({name: o.name, reachable: false, error: 'ssh: connect to host 10.200.0.12 port 22: Connection refused'})}},
    findings: [['KPD-NODE-UNREADABLE', 'node-b', 'warning']],
    fixes: {'KPD-NODE-UNREADABLE node-b': {argv: [['ssh', 'node-b', 'sudo', 'iptables-save'], ['head']], text: 'Run it by hand to see why the doctor could not read the node.'}},
  },
  {name: 'IPVS node without ipvsadm output', state: {dumpFor: {'node-b': IPVS_GLUE}}, findings: [['KPD-MODE-UNSUPPORTED', 'node-b', 'warning']]},
  {
    name: 'node-b in IPVS mode while configured for iptables',
    state: {ipvs: {'node-b': {}}},
    findings: [
      ['KPD-MODE-MIXED', 'node-b', 'warning'],
      ['KPD-MODE-MISMATCH', 'node-b', 'warning'],
    ],
  },
  {
    name: 'nftables table left on an iptables node',
    state: {editObservation: {'node-a': (o) => ({...o, nft: parseNftDump(kubeProxyNftRules(NODES[0], [WEB, DNS], labPods()))})}},
    findings: [['KPD-MODE-LEFTOVER', 'node-a', 'warning']],
  },
  {
    name: "kube-proxy's Pod crash-looping on node-a",
    state: {editCluster: (c) => void (c.kubeProxyPods = [kubeProxyPodObject('node-a', false) as unknown as V1Pod, kubeProxyPodObject('node-b', true) as unknown as V1Pod])},
    findings: [['KPD-PROXY-POD-DOWN', 'node-a', 'error']],
  },
  {
    name: 'kube-proxy stuck on node-b: unhealthy, 15 min since its last sync, restores failing',
    state: {
      editObservation: {
        'node-b': kubeProxyStatus({
          proxyMode: 'iptables',
          healthz: {status: 503, lastUpdated: new Date((now - 900) * 1000).toISOString(), currentTime: new Date(now * 1000).toISOString()},
          metrics: {
            kubeproxy_sync_proxy_rules_last_timestamp_seconds: now - 900,
            kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds: now - 30,
            kubeproxy_sync_proxy_rules_iptables_restore_failures_total: 4,
          },
        }),
      },
      faults: {'node-b': {omitEndpoint: '10.244.2.11'}},
    },
    findings: [
      ['KPD-PROXY-UNHEALTHY', 'node-b', 'error'],
      ['KPD-PROXY-STUCK', 'node-b', 'error'],
      ['KPD-PROXY-SYNC-FAILURES', 'node-b', 'warning'],
      ['KPD-SEP-MISSING', 'node-b', 'error'],
      ['KPD-NODE-DIVERGES', 'node-b', 'warning'],
    ],
  },
])

checkTester('dual-stack: each family of the Service judged against its own rules (iptables-save for IPv4, ip6tables-save for IPv6)', [
  {name: 'healthy dual-stack Service: both families programmed', state: {dualStack: true}, findings: []},
  {
    name: 'IPv6 half broken: DNAT deleted from an IPv6 endpoint chain, IPv4 intact',
    state: {dualStack: true, faults6: {'node-b': {dropDnatFor: 'fd00:10:244:2::10'}}},
    findings: [
      ['KPD-SEP-MISSING', 'node-b', 'error'],
      ['KPD-NODE-DIVERGES', 'node-b', 'warning'],
    ],
    fixes: {'KPD-SEP-MISSING node-b': {argv: [['ssh', 'node-b', 'sudo', 'ip6tables-save'], ['grep', '--', 'KUBE-SEP-3EIK7ZMJLCQCLWUX']], text: null}},
  },
  {name: 'IPv6 NodePorts missing on one node', state: {dualStack: true, faults6: {'node-a': {omitNodePorts: true}}}, findings: [['KPD-NODEPORT-MISSING', 'node-a', 'error']]},
  {
    name: 'IPv4 half broken, IPv6 intact',
    state: {dualStack: true, faults: {'node-b': {dropDnatFor: '10.244.1.10'}}},
    findings: [
      ['KPD-SEP-MISSING', 'node-b', 'error'],
      ['KPD-NODE-DIVERGES', 'node-b', 'warning'],
    ],
    fixes: {'KPD-SEP-MISSING node-b': {argv: [['ssh', 'node-b', 'sudo', 'iptables-save'], ['grep', '--', 'KUBE-SEP-FZQ6KZLGXRSKN2AD']], text: null}},
  },
  {
    name: 'the same hook missing in both families: one finding per family, each with its own tool',
    state: {dualStack: true, faults: {'node-b': {unhookPrerouting: true}}, faults6: {'node-b': {unhookPrerouting: true}}},
    findings: [
      ['KPD-HOOK-MISSING', 'node-b', 'error'],
      ['KPD-HOOK-MISSING', 'node-b', 'error'],
    ],
  },
  {
    name: 'one backend not ready: a cluster fact per family (its IPv4 and IPv6 endpoints)',
    state: {dualStack: true, pods: dualStackPods(notReady('web-b2'))},
    findings: [
      ['KPD-ENDPOINT-NOT-READY', 'node-b', 'warning'],
      ['KPD-ENDPOINT-NOT-READY', 'node-b', 'warning'],
    ],
  },
])

describe('dual-stack: what the user reads names the family and the address', () => {
  test('an IPv6-only fault: the headline names the IPv6 path and address, the findings say (IPv6), IPv4 paths still work', () => {
    const {cluster, observations} = offlineCluster({dualStack: true, faults6: {'node-b': {dropDnatFor: 'fd00:10:244:2::10'}}})
    const r = buildReport(diagnose(cluster, observations, {probes: PROBES_OFF}))
    assert.equal(
      r.summary,
      '✗ shop/web: pod→ClusterIP to [fd00:10:96::10:10]:80 (http) breaks at KUBE-SEP on node-b: KUBE-SEP-3EIK7ZMJLCQCLWUX (endpoint [fd00:10:244:2::10]:8080, web-b1) has no DNAT rule: the jump falls through and the endpoint never gets traffic',
    )
    assert.deepEqual(r.service.clusterIPs, ['10.96.10.10', 'fd00:10:96::10:10'])
    assert.equal(
      r.findings[0].message,
      'node-b (IPv6): KUBE-SEP-3EIK7ZMJLCQCLWUX (endpoint [fd00:10:244:2::10]:8080 (pod web-b1 on node-b)) has no DNAT rule: the jump falls through, the endpoint gets no traffic from this node',
    )
    const row = (p: (typeof r.paths)[number]) => [p.node, p.entry, p.family, p.destination, p.ok]
    assert.deepEqual(r.paths.filter((p) => p.node === 'node-b').map(row), [
      ['node-b', 'pod→ClusterIP', 'IPv4', '10.96.10.10:80', true],
      ['node-b', 'node→ClusterIP', 'IPv4', '10.96.10.10:80', true],
      ['node-b', 'outside→NodePort', 'IPv4', '10.200.0.12:30080', true],
      ['node-b', 'pod→itself', 'IPv4', '10.96.10.10:80', true],
      ['node-b', 'pod→ClusterIP', 'IPv6', '[fd00:10:96::10:10]:80', false],
      ['node-b', 'node→ClusterIP', 'IPv6', '[fd00:10:96::10:10]:80', false],
      ['node-b', 'outside→NodePort', 'IPv6', '[fd00:10:200::12]:30080', false],
      ['node-b', 'pod→itself', 'IPv6', '[fd00:10:96::10:10]:80', false],
    ])
    assert.deepEqual(r.notChecked.filter((n) => n.required), [])
    const human = renderHuman(r, new Chalk({level: 0}), 120).split('\n')
    assert.ok(human.includes('Service shop/web  NodePort 10.96.10.10, fd00:10:96::10:10  ports http 80→http/TCP (NodePort 30080)'), human.join('\n'))
    const nodeB = human.find((l) => /^\W*node-b\b/.test(l))
    assert.equal(nodeB?.match(/✗ KUBE-SEP IPv6/g)?.length, 4, human.join('\n'))
  })
})

checkTester("kube-proxy's rules (hook, service rule, reject, nodeport, endpoints, DNAT, probability, affinity, masquerade)", [
  {name: 'PREROUTING unhooked', state: {faults: {'node-b': {unhookPrerouting: true}}}, findings: [['KPD-HOOK-MISSING', 'node-b', 'error']]},
  {name: 'NodePorts missing', state: {faults: {'node-a': {omitNodePorts: true}}}, findings: [['KPD-NODEPORT-MISSING', 'node-a', 'error']]},
  {
    name: 'a "has no endpoints" REJECT left behind while endpoints are ready (harmless: DNAT runs first)',
    state: {editDump: {'node-a': (t) => t.replace('\nCOMMIT\n', `\n${STALE_REJECT}\nCOMMIT\n`)}},
    findings: [['KPD-REJECT-STALE', 'node-a', 'error']],
  },
  {
    name: 'DNAT rule deleted from one SEP',
    state: {faults: {'node-b': {dropDnatFor: '10.244.1.10'}}},
    findings: [
      ['KPD-SEP-MISSING', 'node-b', 'error'],
      ['KPD-NODE-DIVERGES', 'node-b', 'warning'],
    ],
  },
  {
    name: 'endpoint left out of KUBE-SVC',
    state: {faults: {'node-a': {omitEndpoint: '10.244.2.11'}}},
    findings: [
      ['KPD-SEP-MISSING', 'node-a', 'error'],
      ['KPD-NODE-DIVERGES', 'node-a', 'warning'],
    ],
    fixes: {
      'KPD-SEP-MISSING node-a': {
        argv: [
          ['ssh', 'node-a', 'sudo', 'iptables-save'],
          ['grep', '--', 'KUBE-SVC-67NZLRHBNDSAWJRO'],
        ],
        text: null,
      },
    },
  },
  {
    name: 'externalTrafficPolicy Local: a local endpoint missing from KUBE-SVL',
    state: {web: {externalTrafficPolicy: 'Local'}, faults: {'node-b': {omitEndpoint: '10.244.2.11'}}},
    findings: [
      ['KPD-SEP-MISSING', 'node-b', 'error'],
      ['KPD-SEP-MISSING', 'node-b', 'error'],
      ['KPD-NODE-DIVERGES', 'node-b', 'warning'],
    ],
  },
  {
    name: 'stale endpoint',
    state: {faults: {'node-a': {staleEndpoint: {ip: '10.244.9.9', port: 8080}}}},
    findings: [
      ['KPD-SEP-STALE', 'node-a', 'error'],
      ['KPD-NODE-DIVERGES', 'node-a', 'warning'],
    ],
  },
  {
    name: 'wrong DNAT port',
    state: {faults: {'node-b': {wrongPortFor: {ip: '10.244.2.10', port: 9999}}}},
    findings: [
      ['KPD-DNAT-WRONG', 'node-b', 'error'],
      ['KPD-NODE-DIVERGES', 'node-b', 'warning'],
    ],
  },
  {
    name: 'statistic probabilities that do not split evenly',
    state: {editDump: {'node-b': (t) => t.replace('--probability 0.3333333333', '--probability 0.1000000000')}},
    findings: [['KPD-PROBABILITY-WRONG', 'node-b', 'warning']],
  },
  {
    name: 'ClientIP affinity asked for but not programmed',
    state: {web: {affinitySeconds: 10800}, faults: {'node-a': {omitAffinity: true}}},
    findings: [['KPD-AFFINITY-MISMATCH', 'node-a', 'warning']],
  },
  {name: 'MASQUERADE missing', state: {faults: {'node-a': {omitMasquerade: true}}}, findings: [['KPD-MASQ-MISSING', 'node-a', 'error']]},
])

checkTester('IPVS (ipvs.ts and the mode-neutral rule checks on IPVS nodes)', [
  {
    name: 'real server missing',
    state: {ipvs: {'node-b': {omitRealServer: '10.244.1.10'}}},
    findings: [
      ['KPD-MODE-MIXED', 'node-b', 'warning'],
      ['KPD-MODE-MISMATCH', 'node-b', 'warning'],
      ['KPD-SEP-MISSING', 'node-b', 'error'],
      ['KPD-SEP-MISSING', 'node-b', 'error'],
      ['KPD-NODE-DIVERGES', 'node-b', 'warning'],
    ],
  },
  {
    name: 'stale real server',
    state: {ipvs: {'node-b': {staleRealServer: {ip: '10.244.9.9', port: 8080}, list: true}}},
    findings: [
      ['KPD-MODE-MIXED', 'node-b', 'warning'],
      ['KPD-MODE-MISMATCH', 'node-b', 'warning'],
      ['KPD-SEP-STALE', 'node-b', 'error'],
      ['KPD-SEP-STALE', 'node-b', 'error'],
      ['KPD-NODE-DIVERGES', 'node-b', 'warning'],
    ],
  },
  {
    name: 'weight stuck at 0',
    state: {ipvs: {'node-b': {weightZeroFor: '10.244.2.11'}}},
    findings: [
      ['KPD-MODE-MIXED', 'node-b', 'warning'],
      ['KPD-MODE-MISMATCH', 'node-b', 'warning'],
      ['KPD-IPVS-WEIGHT-ZERO', 'node-b', 'error'],
    ],
  },
  {
    name: 'real server on the wrong port',
    state: {ipvs: {'node-b': {wrongPortFor: {ip: '10.244.2.10', port: 9999}}}},
    findings: [
      ['KPD-MODE-MIXED', 'node-b', 'warning'],
      ['KPD-MODE-MISMATCH', 'node-b', 'warning'],
      ['KPD-SEP-MISSING', 'node-b', 'error'],
      ['KPD-SEP-MISSING', 'node-b', 'error'],
      ['KPD-DNAT-WRONG', 'node-b', 'error'],
      ['KPD-DNAT-WRONG', 'node-b', 'error'],
      ['KPD-MASQ-MISSING', 'node-b', 'error'],
      ['KPD-NODE-DIVERGES', 'node-b', 'warning'],
    ],
  },
  {
    name: 'ClusterIP virtual server missing',
    state: {ipvs: {'node-b': {omitClusterVs: true}}},
    findings: [
      ['KPD-MODE-MIXED', 'node-b', 'warning'],
      ['KPD-MODE-MISMATCH', 'node-b', 'warning'],
      ['KPD-SVC-RULE-MISSING', 'node-b', 'error'],
      ['KPD-NODE-DIVERGES', 'node-b', 'warning'],
    ],
  },
  {
    name: 'NodePort virtual server missing',
    state: {ipvs: {'node-b': {omitNodePortVs: true}}},
    findings: [
      ['KPD-MODE-MIXED', 'node-b', 'warning'],
      ['KPD-MODE-MISMATCH', 'node-b', 'warning'],
      ['KPD-NODEPORT-MISSING', 'node-b', 'error'],
    ],
  },
  {
    name: 'VIP not on kube-ipvs0',
    state: {ipvs: {'node-b': {unbindVip: '10.96.10.10'}}},
    findings: [
      ['KPD-MODE-MIXED', 'node-b', 'warning'],
      ['KPD-MODE-MISMATCH', 'node-b', 'warning'],
      ['KPD-IPVS-VIP-UNBOUND', 'node-b', 'error'],
    ],
  },
  {
    name: 'KUBE-CLUSTER-IP lacks the service',
    state: {ipvs: {'node-b': {omitIpsetMember: {set: 'KUBE-CLUSTER-IP', member: '10.96.10.10,tcp:80'}}}},
    findings: [
      ['KPD-MODE-MIXED', 'node-b', 'warning'],
      ['KPD-MODE-MISMATCH', 'node-b', 'warning'],
      ['KPD-IPVS-IPSET-MISSING', 'node-b', 'error'],
    ],
  },
  {
    name: 'KUBE-LOOP-BACK empty: hairpin unmasqueraded',
    state: {ipvs: {'node-b': {omitLoopBack: true}}},
    findings: [
      ['KPD-MODE-MIXED', 'node-b', 'warning'],
      ['KPD-MODE-MISMATCH', 'node-b', 'warning'],
      ['KPD-MASQ-MISSING', 'node-b', 'error'],
      ['KPD-MASQ-MISSING', 'node-b', 'error'],
    ],
  },
  {
    name: 'vs.conntrack off',
    state: {ipvs: {'node-b': {sysctl: {'net.ipv4.vs.conntrack': '0'}}}},
    findings: [
      ['KPD-MODE-MIXED', 'node-b', 'warning'],
      ['KPD-MODE-MISMATCH', 'node-b', 'warning'],
      ['KPD-IPVS-SYSCTL', 'node-b', 'error'],
    ],
  },
  {
    name: 'strictARP without arp_ignore',
    state: {strictARP: true, ipvs: {'node-b': {}}},
    findings: [
      ['KPD-MODE-MIXED', 'node-b', 'warning'],
      ['KPD-MODE-MISMATCH', 'node-b', 'warning'],
      ['KPD-IPVS-SYSCTL', 'node-b', 'error'],
      ['KPD-IPVS-SYSCTL', 'node-b', 'error'],
    ],
  },
  {
    name: 'scheduler rr on the nodes, lc configured',
    state: {ipvs: {'node-a': {}, 'node-b': {}}, editCluster: (c) => Object.assign(c.proxyConfig, {mode: 'ipvs', ipvsScheduler: 'lc'})},
    findings: [
      ['KPD-IPVS-SCHEDULER', 'node-a', 'warning'],
      ['KPD-IPVS-SCHEDULER', 'node-b', 'warning'],
    ],
  },
])

checkTester('the bridge and the whole path (hairpin.ts, path-verdicts.ts)', [
  {
    name: 'hairpin off on a backend port',
    state: {hairpinOff: ['web-b1']},
    findings: [['KPD-HAIRPIN-OFF', 'node-b', 'error']],
    fixes: {
      'KPD-HAIRPIN-OFF node-b': {
        argv: [['ssh', 'node-b', 'cat', '/sys/class/net/cbr0/brif/vweb-b1/hairpin_mode']],
        text: "Check the kubelet's --hairpin-mode and the CNI's hairpinMode.",
      },
    },
  },
  {
    name: 'hairpin off on a port no pod could be matched to',
    state: {hairpinOff: ['web-b1'], editNetwork: {'node-b': (t) => t.replace(/## neigh[\s\S]*$/, '## neigh\n## fdb\n')}},
    findings: [['KPD-HAIRPIN-UNMAPPED', 'node-b', 'warning']],
  },
  {
    name: 'hairpin off on an idle backend (no fdb or neighbour entry) mapped through the CNI result cache: an error',
    state: {hairpinOff: ['web-b1'], editNetwork: {'node-b': (t) => t.replace(/## neigh[\s\S]*$/, '## neigh\n## fdb\n')}, cniCache: {'node-b': (t) => t}},
    findings: [['KPD-HAIRPIN-OFF', 'node-b', 'error']],
    fixes: {
      'KPD-HAIRPIN-OFF node-b': {
        argv: [['ssh', 'node-b', 'cat', '/sys/class/net/cbr0/brif/vweb-b1/hairpin_mode']],
        text: "Check the kubelet's --hairpin-mode and the CNI's hairpinMode.",
      },
    },
  },
  {
    name: 'hairpin off, no fdb, and a CNI result cache that is truncated: the file is skipped, the warning stays',
    state: {
      hairpinOff: ['web-b1'],
      editNetwork: {'node-b': (t) => t.replace(/## neigh[\s\S]*$/, '## neigh\n## fdb\n')},
      cniCache: {
        'node-b': (t) =>
          t
            .split('\n')
            .map((l) => l.slice(0, 200))
            .join('\n'),
      },
    },
    findings: [['KPD-HAIRPIN-UNMAPPED', 'node-b', 'warning']],
  },
  {
    name: 'hairpin off on the bridge port of a pod the cache maps, bridge promiscuous: nothing',
    state: {
      hairpinOff: ['web-b1'],
      cniCache: {'node-b': (t) => t},
      editNetwork: {'node-b': (t) => t.replace('<BROADCAST,MULTICAST,UP,LOWER_UP>', '<BROADCAST,MULTICAST,PROMISC,UP,LOWER_UP>').replace(/## neigh[\s\S]*$/, '## neigh\n## fdb\n')},
    },
    findings: [],
  },
  {
    name: 'a DROP added directly to filter FORWARD: a specific finding, not the generic path-broken one',
    state: {editDump: {'node-a': insertBefore(FIRST_FORWARD_RULE, '-A FORWARD -d 10.244.2.10/32 -j DROP')}},
    findings: [['KPD-FILTER-DROP', 'node-a', 'error']],
  },
  {
    name: "a DROP hand-added to kube-proxy's own KUBE-FORWARD: no specific code explains it, the generic one does",
    state: {editDump: {'node-a': insertBefore('-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP', '-A KUBE-FORWARD -d 10.244.2.10/32 -j DROP')}},
    findings: [['KPD-PATH-BROKEN', 'node-a', 'error']],
  },
  {
    name: 'a match the tracer cannot evaluate on the path',
    state: {editDump: {'node-a': insertBefore('-A KUBE-SERVICES -d 10.96.10.10/32', '-A KUBE-SERVICES -m cgroup --path /kubepods -j RETURN')}},
    findings: [
      ['KPD-PATH-UNDECIDED', 'node-a', 'warning'],
      ['KPD-PATH-UNDECIDED', 'node-a', 'warning'],
      ['KPD-PATH-UNDECIDED', 'node-a', 'warning'],
      ['KPD-PATH-UNDECIDED', 'node-a', 'warning'],
      // node-b's paths to web-a1 cross node-a's nat PREROUTING too: one warning for all their second halves.
      ['KPD-PATH-UNDECIDED', 'node-a', 'warning'],
    ],
  },
])

checkTester('the filter path and chains kube-proxy does not own (filter-drop.ts)', [
  {name: "Docker's chains with FORWARD policy ACCEPT", state: {editDump: {'node-a': withFilter({...DOCKER, forwardPolicy: undefined, rules: [DOCKER_USER_RETURN]})}}, findings: []},
  {
    name: "Docker's FORWARD policy DROP with the pod CIDR accepted in DOCKER-USER (both directions)",
    state: {editDump: {'node-a': withFilter({...DOCKER, rules: ['-A DOCKER-USER -s 10.244.0.0/16 -j ACCEPT', '-A DOCKER-USER -d 10.244.0.0/16 -j ACCEPT', DOCKER_USER_RETURN]})}},
    findings: [],
  },
  {name: "a policy engine's chain dropping an address that is no endpoint", state: {editDump: {'node-b': withFilter(calicoDrop('10.244.2.99'))}}, findings: []},
  {
    name: "Docker's FORWARD policy DROP on node-a, nothing accepting pod traffic: node-a's own paths and the halves arriving from node-b",
    state: {editDump: {'node-a': withFilter({...DOCKER, rules: [DOCKER_USER_RETURN]})}},
    findings: [['KPD-FILTER-DROP', 'node-a', 'error']],
  },
  {
    name: "a Calico rule on node-b dropping only node-a's pods: seen only in the second half of node-a's paths, reported on node-b",
    state: {
      editDump: {
        'node-b': withFilter({
          chains: ['cali-FORWARD'],
          forward: ['-A FORWARD -j cali-FORWARD'],
          rules: ['-A cali-FORWARD -s 10.244.1.0/24 -d 10.244.2.11/32 -m conntrack --ctstate NEW -j DROP'],
        }),
      },
    },
    findings: [['KPD-FILTER-DROP', 'node-b', 'error']],
  },
  {
    name: 'FORWARD policy DROP with no Docker chain',
    state: {editDump: {'node-b': withFilter({forwardPolicy: 'DROP'})}},
    findings: [['KPD-FILTER-DROP', 'node-b', 'error']],
  },
  {
    name: "a Calico chain in node-b's FORWARD drops web-b2",
    state: {editDump: {'node-b': withFilter(calicoDrop('10.244.2.11'))}},
    findings: [['KPD-FILTER-DROP', 'node-b', 'error']],
  },
  {
    name: 'nftables mode on both nodes, a pod-CIDR accept in another table',
    state: nftablesLab(nftForwardChain('inet filter', 'drop', ['ip saddr 10.244.0.0/16 accept', 'ip daddr 10.244.0.0/16 accept'])),
    findings: [],
  },
  {
    name: "nftables mode: a Calico table's forward chain drops web-b2 on node-b",
    state: nftablesLab(nftForwardChain('inet calico', 'accept', ['ip daddr 10.244.2.11 ct state new drop'])),
    findings: [['KPD-FILTER-DROP', 'node-b', 'error']],
  },
  {
    name: "nftables mode: another table's forward chain with policy drop on node-b",
    state: nftablesLab(nftForwardChain('inet filter', 'drop')),
    findings: [['KPD-FILTER-DROP', 'node-b', 'error']],
  },
  {
    name: 'a hand-written chain in OUTPUT rejects node traffic to the pod network',
    state: {editDump: {'node-a': withFilter({chains: ['SITE-EGRESS'], rules: ['-A OUTPUT -j SITE-EGRESS', '-A SITE-EGRESS -d 10.244.0.0/16 -p tcp -j REJECT --reject-with icmp-port-unreachable']})}},
    findings: [['KPD-FILTER-DROP', 'node-a', 'error']],
  },
])

/** A node's packet-path reads as the commands print them (the lab's healthy values), with a fault's changes. */
interface PathFaults {
  sysctl?: Record<string, string>
  /** sysctl keys the node does not have (br_netfilter not loaded). */
  absent?: string[]
  /** The route table without node-b's pod CIDR (`missing`), or with it as another route type. */
  podRoute?: 'missing' | 'unreachable'
  conntrack?: string[]
  /** Entries of `conntrack -L -p udp -d 10.96.10.10` (the web Service made UDP in those cases). */
  udp?: string[]
  conntrackMissing?: boolean
}
const ok = (stdout: string) => ({code: 0, stdout, stderr: ''})
function pathReads(node: 'node-a' | 'node-b', f: PathFaults = {}): RawPathReads {
  const self = NODES.find((n) => n.name === node)!
  const other = NODES.find((n) => n.name !== node)!
  const sysctl = {
    'net.ipv4.ip_forward': '1',
    'net.bridge.bridge-nf-call-iptables': '1',
    'net.netfilter.nf_conntrack_count': '12',
    'net.netfilter.nf_conntrack_max': '262144',
    'net.ipv4.conf.all.rp_filter': '0',
    'net.ipv4.conf.all.route_localnet': '1',
    ...f.sysctl,
  }
  const absent = f.absent ?? []
  const otherRoute =
    node === 'node-a' && f.podRoute === 'missing' ? [] : node === 'node-a' && f.podRoute === 'unreachable' ? [`unreachable ${other.podCIDR}`] : [`${other.podCIDR} via ${other.ip} dev eth0`]
  const routeGet = (ip: string) => {
    if (labPods().find((p) => p.ip === ip)!.node === node) return ok(`${ip} dev cbr0 src ${self.gateway} uid 0 \\    cache `)
    if (node === 'node-a' && f.podRoute === 'missing') return ok(`${ip} via 10.200.0.1 dev eth0 src ${self.ip} uid 0 \\    cache `)
    if (node === 'node-a' && f.podRoute === 'unreachable') return {code: 2, stdout: '', stderr: 'RTNETLINK answers: No route to host\n'}
    return ok(`${ip} via ${other.ip} dev eth0 src ${self.ip} uid 0 \\    cache `)
  }
  return {
    sysctls: {
      code: absent.length > 0 ? 255 : 0,
      stdout: Object.entries(sysctl)
        .filter(([k]) => !absent.includes(k))
        .map(([k, v]) => `${k} = ${v}\n`)
        .join(''),
      stderr: absent.map((k) => `sysctl: cannot stat /proc/sys/${k.replaceAll('.', '/')}: No such file or directory\n`).join(''),
    },
    routeTable: ok(
      [
        'default via 10.200.0.1 dev eth0 onlink',
        `10.200.0.0/24 dev eth0 proto kernel scope link src ${self.ip}`,
        `${self.podCIDR} dev cbr0 proto kernel scope link src ${self.gateway}`,
        ...otherRoute,
        '',
      ].join('\n'),
    ),
    routeGet: ['10.244.1.10', '10.244.2.10', '10.244.2.11'].map((address) => ({address, ...routeGet(address)})),
    conntrack: [
      {
        protocol: 'tcp',
        address: WEB.clusterIP,
        ...(f.conntrackMissing
          ? {code: 127, stdout: '', stderr: 'sh: 1: conntrack: not found\n'}
          : ok(
              [
                `tcp      6 86390 ESTABLISHED src=10.244.1.100 dst=10.96.10.10 sport=51000 dport=80 src=10.244.2.10 dst=10.244.1.100 sport=8080 dport=51000 [ASSURED] mark=0 use=1`,
                `tcp      6 110 TIME_WAIT src=10.244.1.100 dst=10.96.10.10 sport=51002 dport=80 src=10.244.1.10 dst=10.244.1.100 sport=8080 dport=51002 [ASSURED] mark=0 use=1`,
                ...(f.conntrack ?? []),
                '',
              ].join('\n'),
            )),
      },
      {
        protocol: 'udp',
        address: WEB.clusterIP,
        ...ok(['udp      17 25 src=10.244.1.100 dst=10.96.10.10 sport=40001 dport=80 src=10.244.2.11 dst=10.244.1.100 sport=8080 dport=40001 mark=0 use=1', ...(f.udp ?? []), ''].join('\n')),
      },
    ],
  }
}
const UDP_WEB = {ports: [{...WEB.ports[0], protocol: 'UDP' as const, targetPort: 8080}]}
const STALE_UDP = 'udp      17 28 src=10.244.1.100 dst=10.96.10.10 sport=40053 dport=80 [UNREPLIED] src=10.244.2.7 dst=10.244.1.100 sport=8080 dport=40053 mark=0 use=1'
const withPath = (faults: Partial<Record<'node-a' | 'node-b', PathFaults>> = {}) => ({
  editObservation: Object.fromEntries(
    (['node-a', 'node-b'] as const).map((node) => [node, (obs: NodeObservation): NodeObservation => ({...obs, path: interpretPathReads(pathReads(node, faults[node]))})]),
  ),
})
const STALE_TCP = 'tcp      6 86000 ESTABLISHED src=10.244.1.100 dst=10.96.10.10 sport=51010 dport=80 src=10.244.2.7 dst=10.244.1.100 sport=8080 dport=51010 [ASSURED] mark=0 use=1'

/**
 * A dual-stack node's path reads: the IPv4 ones healthy; the IPv6 table and lookups with node-a's route to node-b's
 * IPv6 pod CIDR `v6Route` ('missing': only the IPv6 default route matches; 'old-bundle': no IPv6 table recorded).
 */
function dualStackPathReads(node: 'node-a' | 'node-b', v6Route: 'ok' | 'missing' | 'old-bundle' = 'ok'): RawPathReads {
  const self = dualStackNode(NODES.find((n) => n.name === node)!)
  const other = dualStackNode(NODES.find((n) => n.name !== node)!)
  const v4 = pathReads(node)
  const broken = node === 'node-a' && v6Route === 'missing'
  const routeGet6 = (pod: LabPod) => {
    if (pod.node === node) return ok(`${pod.ip6} from :: dev cbr0 proto kernel src ${self.gateway6} metric 256 pref medium`)
    if (broken) return ok(`${pod.ip6} from :: via fd00:10:200::1 dev eth0 proto static src ${self.ip6} metric 1024 pref medium`)
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
    ...(v6Route === 'old-bundle' ? {} : {routeTable6: ok(table6)}),
    routeGet: [...v4.routeGet, ...webPods.map((p) => ({address: p.ip6!, ...routeGet6(p)}))],
    conntrack: [...v4.conntrack, {protocol: 'tcp', address: 'fd00:10:96::10:10', ...ok('')}],
  }
}
const withDualStackPath = (v6Route: 'ok' | 'missing' | 'old-bundle'): OfflineOptions => ({
  dualStack: true,
  editObservation: Object.fromEntries(
    (['node-a', 'node-b'] as const).map((node) => [node, (obs: NodeObservation): NodeObservation => ({...obs, path: interpretPathReads(dualStackPathReads(node, v6Route))})]),
  ),
})

describe('the route to an IPv6 endpoint judged against the IPv6 table (ip -6 route show), per family', () => {
  const routeRows = (state: OfflineOptions) => {
    const {cluster, observations} = offlineCluster(state)
    const d = diagnose(cluster, observations)
    return {
      findings: d.findings.map((f) => `${f.code} ${f.node}: ${f.message}`),
      routes: d.notChecked.filter((n) => n.check === 'routes').map((n) => `${n.node} ${n.required}: ${n.reason}`),
    }
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
    assert.deepEqual([f.argv, f.text], [
      [['ssh', 'node-a', 'ip', 'route', 'get', 'fd00:10:244:2::10']],
      'Expected: via node-b (fd00:10:200::12) or the CNI\'s tunnel. Restart the CNI agent on node-a, or add the route by hand (ip route replace fd00:10:244:2::/64 via fd00:10:200::12).',
    ])
  })
  test('a bundle recorded before the IPv6 table was read: no finding, the IPv6 routes said not checked (not required) per node', () => {
    const why = 'IPv6 route table not read (recorded by a version that read the IPv4 table only): IPv6 endpoints reached by the default route alone are not told'
    assert.deepEqual(routeRows(withDualStackPath('old-bundle')), {findings: [], routes: [`node-a false: ${why}`, `node-b false: ${why}`]})
  })
})

checkTester('the node under the path: forwarding, bridge netfilter, routes, conntrack (node-forwarding, bridge-netfilter, route-missing, conntrack-stale, conntrack-full)', [
  {name: 'healthy path reads on both nodes: no finding', state: withPath(), findings: []},
  {name: 'ip_forward=0 on node-a', state: withPath({'node-a': {sysctl: {'net.ipv4.ip_forward': '0'}}}), findings: [['KPD-NODE-FORWARDING-OFF', 'node-a', 'error']]},
  {
    name: 'bridge-nf-call-iptables=0 on node-a (web-a1 is there)',
    state: withPath({'node-a': {sysctl: {'net.bridge.bridge-nf-call-iptables': '0'}}}),
    findings: [['KPD-BRIDGE-NF-OFF', 'node-a', 'error']],
  },
  {name: 'br_netfilter not loaded on node-b', state: withPath({'node-b': {absent: ['net.bridge.bridge-nf-call-iptables']}}), findings: [['KPD-BRIDGE-NF-OFF', 'node-b', 'error']]},
  {
    name: "bridge-nf-call-iptables=0 on a node that hosts no endpoint of the Service: not this Service's problem",
    state: {...withPath({'node-a': {sysctl: {'net.bridge.bridge-nf-call-iptables': '0'}}}), pods: labPods().filter((p) => p.name !== 'web-a1')},
    findings: [],
  },
  {
    name: 'route_localnet=0 on node-b: its localhost NodePort 127.0.0.1:30080 fails',
    state: withPath({'node-b': {sysctl: {'net.ipv4.conf.all.route_localnet': '0'}}}),
    findings: [['KPD-ROUTE-LOCALNET-OFF', 'node-b', 'warning']],
  },
  {
    name: 'route_localnet=0 on conf.all but 1 on the interfaces the endpoint routes use: no finding',
    state: withPath({'node-b': {sysctl: {'net.ipv4.conf.all.route_localnet': '0', 'net.ipv4.conf.cbr0.route_localnet': '1', 'net.ipv4.conf.eth0.route_localnet': '1'}}}),
    findings: [],
  },
  {
    name: 'route_localnet=0 where kube-proxy has localhost NodePorts off: not judged',
    state: {...withPath({'node-b': {sysctl: {'net.ipv4.conf.all.route_localnet': '0'}}}), editCluster: (c) => void (c.proxyConfig.localhostNodePorts = false)},
    findings: [],
  },
  {
    name: 'route_localnet=0 for a Service without NodePorts: not judged',
    state: {...withPath({'node-b': {sysctl: {'net.ipv4.conf.all.route_localnet': '0'}}}), web: {type: 'ClusterIP', ports: [{...WEB.ports[0], nodePort: undefined}]}},
    findings: [],
  },
  {name: "node-a's route to node-b's pod CIDR deleted: the default route takes it", state: withPath({'node-a': {podRoute: 'missing'}}), findings: [['KPD-ROUTE-MISSING', 'node-a', 'error']]},
  {name: "node-a's route to node-b's pod CIDR unreachable", state: withPath({'node-a': {podRoute: 'unreachable'}}), findings: [['KPD-ROUTE-MISSING', 'node-a', 'error']]},
  {
    name: 'the default route and no podCIDR on the nodes (a VPC-routed CNI): not judged',
    state: {...withPath({'node-a': {podRoute: 'missing'}}), editCluster: (c) => c.nodes.forEach((n) => void (n.spec = {}))},
    findings: [],
  },
  {name: 'a UDP Service with healthy conntrack entries', state: {...withPath(), web: UDP_WEB}, findings: []},
  {name: 'a UDP entry DNATed to an address that is no endpoint', state: {...withPath({'node-a': {udp: [STALE_UDP]}}), web: UDP_WEB}, findings: [['KPD-CONNTRACK-STALE', 'node-a', 'error']]},
  {
    name: 'a UDP entry DNATed to an endpoint IP on a port it no longer has',
    state: {...withPath({'node-b': {udp: [STALE_UDP.replace('src=10.244.2.7 ', 'src=10.244.2.10 ').replace('sport=8080', 'sport=9090')]}}), web: UDP_WEB},
    findings: [['KPD-CONNTRACK-STALE', 'node-b', 'error']],
  },
  {name: 'a TCP entry to an old address: a new connection takes a new entry, not judged', state: withPath({'node-a': {conntrack: [STALE_TCP]}}), findings: []},
  {name: 'a UDP entry for a port the Service does not have (TCP Service): not judged', state: withPath({'node-a': {udp: [STALE_UDP]}}), findings: []},
  {name: 'conntrack not installed on node-b: not read, no finding, no crash', state: withPath({'node-b': {conntrackMissing: true}}), findings: []},
  {
    name: 'conntrack table 91% full on node-b',
    state: withPath({'node-b': {sysctl: {'net.netfilter.nf_conntrack_count': '240000'}}}),
    findings: [['KPD-CONNTRACK-FULL', 'node-b', 'warning']],
    fixes: {
      'KPD-CONNTRACK-FULL node-b': {
        argv: [['ssh', 'node-b', 'sudo', 'conntrack', '-S']],
        text: "Then raise the limit: net.netfilter.nf_conntrack_max=524288 with sysctl -w on node-b, or kube-proxy's conntrack.maxPerCore.",
      },
    },
  },
  {name: 'conntrack table 89% full: below the 90% threshold', state: withPath({'node-b': {sysctl: {'net.netfilter.nf_conntrack_count': '233300'}}}), findings: []},
])

test('node path findings: exact messages and next steps', () => {
  const findings = (faults: Parameters<typeof withPath>[0], extra = {}) => {
    const {cluster, observations} = offlineCluster({...withPath(faults), ...extra})
    return diagnose(cluster, observations).findings.map((f) => [f.code, f.node, f.message, f.command, f.text, f.evidence])
  }
  assert.deepEqual(findings({'node-a': {sysctl: {'net.ipv4.ip_forward': '0'}}}), [
    [
      'KPD-NODE-FORWARDING-OFF',
      'node-a',
      'node-a: net.ipv4.ip_forward = 0: the node forwards no packet, so its pods reach no Service and no pod on another node, pods on other nodes cannot reach its pods, and NodePorts on node-a reach no endpoint',
      'ssh node-a sudo sysctl -w net.ipv4.ip_forward=1',
      'Then find what set it to 0 (ip_forward in /etc/sysctl.conf and /etc/sysctl.d).',
      ['sysctl net.ipv4.ip_forward = 0'],
    ],
  ])
  assert.deepEqual(findings({'node-b': {absent: ['net.bridge.bridge-nf-call-iptables']}}), [
    [
      'KPD-BRIDGE-NF-OFF',
      'node-b',
      'node-b: br_netfilter is not loaded (no net.bridge.bridge-nf-call-iptables): packets between pods on one bridge skip iptables, so a pod on node-b whose connection to shop/web is DNATed to 10.244.2.10 (pod web-b1), 10.244.2.11 (pod web-b2) on the same node gets replies that are not un-NATed, and the connection fails',
      'ssh node-b sudo modprobe br_netfilter',
      'Then set net.bridge.bridge-nf-call-iptables=1 (sysctl -w on node-b), and load br_netfilter at boot (/etc/modules-load.d).',
      ['sysctl: cannot stat /proc/sys/net/bridge/bridge-nf-call-iptables'],
    ],
  ])
  assert.deepEqual(findings({'node-b': {sysctl: {'net.ipv4.conf.all.route_localnet': '0'}}}), [
    [
      'KPD-ROUTE-LOCALNET-OFF',
      'node-b',
      'node-b: route_localnet is off on cbr0, eth0: connections to 127.0.0.1:30080 (localhost NodePorts of shop/web) on node-b fail: the kernel drops a packet from 127.0.0.1 routed to endpoint 10.244.2.10, 10.244.2.11 (out of cbr0); 10.244.1.10 (out of eth0) as a martian',
      'ssh node-b sudo sysctl -w net.ipv4.conf.all.route_localnet=1',
      "kube-proxy sets it only when it starts: find what reset it on node-b (a sysctl.d file re-applied, a hardening script). To turn localhost NodePorts off instead, set iptables.localhostNodePorts: false in kube-proxy's configuration.",
      ['sysctl net.ipv4.conf.all.route_localnet = 0'],
    ],
  ])
  assert.deepEqual(findings({'node-a': {podRoute: 'missing'}}), [
    [
      'KPD-ROUTE-MISSING',
      'node-a',
      "node-a: no working route to node-b's pod CIDR 10.244.2.0/24: only the default route matches (via 10.200.0.1 dev eth0), not a route to node-b (10.200.0.12), so node-a cannot reach endpoints 10.244.2.10 (pod web-b1), 10.244.2.11 (pod web-b2) on node-b",
      'ssh node-a ip route get 10.244.2.10',
      "Expected: via node-b (10.200.0.12) or the CNI's tunnel. Restart the CNI agent on node-a, or add the route by hand (ip route replace 10.244.2.0/24 via 10.200.0.12).",
      ['ip route get 10.244.2.10: 10.244.2.10 via 10.200.0.1 dev eth0 src 10.200.0.11 uid 0', 'ip route get 10.244.2.11: 10.244.2.11 via 10.200.0.1 dev eth0 src 10.200.0.11 uid 0'],
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
      'ssh node-a sudo conntrack -D -p udp --orig-dst 10.96.10.10 --orig-port-dst 80 --reply-src 10.244.2.7',
      null,
      [`conntrack: ${STALE_UDP}`, `conntrack: ${STALE_UDP.replace(/40053/g, '40054')}`],
    ],
  ])
  assert.deepEqual(findings({'node-b': {sysctl: {'net.netfilter.nf_conntrack_count': '240000'}}}), [
    [
      'KPD-CONNTRACK-FULL',
      'node-b',
      'node-b: the conntrack table is 91% full (nf_conntrack_count 240000 of nf_conntrack_max 262144; warned from 90%): when it is full the kernel drops the packets of new connections ("nf_conntrack: table full, dropping packet")',
      'ssh node-b sudo conntrack -S',
      "Then raise the limit: net.netfilter.nf_conntrack_max=524288 with sysctl -w on node-b, or kube-proxy's conntrack.maxPerCore.",
      ['sysctl net.netfilter.nf_conntrack_count = 240000', 'sysctl net.netfilter.nf_conntrack_max = 262144'],
    ],
  ])
})

test('--ignore: a silenced code also silences the generic path finding for its step', () => {
  const {cluster, observations} = offlineCluster({hairpinOff: ['web-b1']})
  const d = diagnose(cluster, observations, {ignore: rulesFromCodes(['KPD-HAIRPIN-OFF'])})
  assert.deepEqual(d.findings, [])
  assert.deepEqual(
    d.ignored.map((f) => `${f.code} ${f.node}`),
    ['KPD-HAIRPIN-OFF node-b'],
  )
  assert.equal(d.ok, true)
  assert.deepEqual([...d.ignoredBreaks.values()], ['KPD-HAIRPIN-OFF'])
})

/**
 * Live probe results as the lab's nodes would give them, built from each node's own probe plan for `state`: every
 * attempt connects unless `fails` says how a target (by "node address:port") failed: [connected, refused, timed out].
 */
function probed(state: OfflineOptions, fails: Record<string, [connected: number, refused: number, timedOut: number]> = {}, notProbed?: string): DiagnoseOptions {
  const {cluster} = offlineCluster(state)
  const nodes = NODES.map((n) => ({
    node: n.name,
    via: 'an SSH port forward',
    tallies: planProbes(cluster, n.name).targets.map((target) => {
      const attempts = target.attempts ?? PROBE_SETTINGS.vipAttempts
      if (notProbed) return {target, attempts: 0, connected: 0, refused: 0, timedOut: 0, unreachable: 0, notProbed}
      const [connected, refused, timedOut] = fails[`${n.name} ${target.host}:${target.port}`] ?? [attempts, 0, 0]
      assert.equal(connected + refused + timedOut, attempts, `${n.name} ${target.host}:${target.port} has ${attempts} attempts`)
      return {target, attempts, connected, refused, timedOut, unreachable: 0}
    }),
  }))
  return {probes: {ran: true, settings: PROBE_SETTINGS, nodes, notes: []}}
}
const withoutClusterIpRule = (t: string) =>
  t
    .split('\n')
    .filter((l) => !l.startsWith('-A KUBE-SERVICES -d 10.96.10.10/32'))
    .join('\n')

checkTester('live probes (vip-fails, endpoint-cross-node, backend-refused, probe-contradicts)', [
  {name: 'healthy lab, every probe connected: no finding', state: {}, options: probed({}), findings: []},
  {name: 'the node sshd refuses port forwarding: nothing learnt, no finding', state: {}, options: probed({}, {}, 'administratively prohibited'), findings: []},
  {
    name: 'web-b2 Ready but refusing its port from both nodes: one backend finding, the VIP failures it explains add none',
    state: {},
    options: probed(
      {},
      {
        'node-a 10.244.2.11:8080': [0, 3, 0],
        'node-b 10.244.2.11:8080': [0, 3, 0],
        'node-a 10.96.10.10:80': [5, 3, 0],
        'node-b 10.200.0.12:30080': [6, 2, 0],
      },
    ),
    findings: [['KPD-BACKEND-REFUSED', 'node-b', 'error']],
  },
  {
    name: 'web-b2 timing out from both nodes is a backend fault too',
    state: {},
    options: probed({}, {'node-a 10.244.2.11:8080': [0, 0, 3], 'node-b 10.244.2.11:8080': [0, 0, 3], 'node-b 10.96.10.10:80': [6, 0, 2]}),
    findings: [['KPD-BACKEND-REFUSED', 'node-b', 'error']],
  },
  {
    name: 'web-b1 answers from node-b but times out from node-a: a cross-node fault, reported on node-a',
    state: {},
    options: probed({}, {'node-a 10.244.2.10:8080': [0, 0, 3], 'node-a 10.96.10.10:80': [5, 0, 3], 'node-a 10.200.0.11:30080': [6, 0, 2]}),
    findings: [['KPD-ENDPOINT-CROSS-NODE', 'node-a', 'error']],
  },
  {
    name: "node-b's ClusterIP fails while every endpoint answers from node-b and its rules trace as working",
    state: {},
    options: probed({}, {'node-b 10.96.10.10:80': [0, 0, 8]}),
    findings: [['KPD-VIP-FAILS', 'node-b', 'error']],
  },
  {
    name: "node-a's ClusterIP fails entirely although two of its endpoints answer: more than the bad backend explains",
    state: {},
    options: probed({}, {'node-a 10.244.2.11:8080': [0, 3, 0], 'node-b 10.244.2.11:8080': [0, 3, 0], 'node-a 10.96.10.10:80': [0, 0, 8]}),
    findings: [
      ['KPD-BACKEND-REFUSED', 'node-b', 'error'],
      ['KPD-VIP-FAILS', 'node-a', 'error'],
    ],
  },
  {
    name: "node-a's ClusterIP 0/8 while two of three endpoints fail from node-a: chance explains it ((2/3)^8 is 4%), no VIP finding",
    state: {},
    options: probed({}, {'node-a 10.244.2.10:8080': [0, 0, 3], 'node-a 10.244.2.11:8080': [0, 0, 3], 'node-a 10.96.10.10:80': [0, 0, 8]}),
    findings: [
      ['KPD-ENDPOINT-CROSS-NODE', 'node-a', 'error'],
      ['KPD-ENDPOINT-CROSS-NODE', 'node-a', 'error'],
    ],
  },
  {
    name: 'a NodePort failure the static trace predicts (NodePorts missing) is its finding alone',
    state: {faults: {'node-a': {omitNodePorts: true}}},
    options: probed({}, {'node-a 10.200.0.11:30080': [0, 8, 0]}),
    findings: [['KPD-NODEPORT-MISSING', 'node-a', 'error']],
  },
  {
    name: 'a NodePort that drops by design (externalTrafficPolicy Local, no local endpoint) is no finding',
    state: {web: {externalTrafficPolicy: 'Local'}, pods: notReady('web-a1')},
    options: probed({web: {externalTrafficPolicy: 'Local'}, pods: notReady('web-a1')}, {'node-a 10.200.0.11:30080': [0, 0, 8]}),
    findings: [['KPD-ENDPOINT-NOT-READY', 'node-a', 'warning']],
  },
  {
    name: 'the ClusterIP rule missing on node-a and the probe fails: the static finding, confirmed',
    state: {editDump: {'node-a': withoutClusterIpRule}},
    options: probed({}, {'node-a 10.96.10.10:80': [0, 0, 8]}),
    findings: [['KPD-SVC-RULE-MISSING', 'node-a', 'error']],
  },
  {
    name: 'the ClusterIP rule missing on node-a but the probe connects: the contradiction is a finding too',
    state: {editDump: {'node-a': withoutClusterIpRule}},
    options: probed({}),
    findings: [
      ['KPD-SVC-RULE-MISSING', 'node-a', 'error'],
      ['KPD-PROBE-CONTRADICTS', 'node-a', 'error'],
    ],
  },
  {
    name: 'web-a1 fails from its own node but answers from node-b: neither backend nor cross-node, said so',
    state: {},
    options: probed({}, {'node-a 10.244.1.10:8080': [0, 0, 3], 'node-a 10.96.10.10:80': [6, 0, 2]}),
    findings: [['KPD-PROBE-CONTRADICTS', 'node-a', 'error']],
  },
])

test('every code in the catalogue fires in at least one case above', () => {
  const never = CATALOGUE.map((e) => e.code).filter((code) => !firedCodes.has(code))
  assert.deepEqual(never, [], `codes no case makes fire: ${never.join(', ')}`)
})
