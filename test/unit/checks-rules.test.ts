import assert from 'node:assert/strict'
import {describe, test} from 'node:test'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import type {NodeObservation} from '../../src/node/observation.js'
import {parseNftDump} from '../../src/parse/nft-dump.js'
import {BufferSource} from '../../src/parse/dump-source.js'
import {IptablesSave} from '../../src/parse/iptables-save.js'
import {buildReport} from '../../src/report/report.js'
import {renderHuman} from '../../src/report/human.js'
import {Chalk} from 'chalk'
import {PROBES_OFF} from '../../src/diagnosis/probe-stage.js'
import {kubeProxyNftRules} from '../fixtures/kube-proxy-nft.js'
import type {RuleFaults} from '../fixtures/kube-proxy-rules.js'
import {offlineCluster, type OfflineOptions} from '../helpers/offline-cluster.js'
import {checkFamily, checkTester} from '../helpers/check-tester.js'
import {
  DNS,
  NODES,
  WEB,
  dualStackNode,
  dualStackPods,
  dualStackService,
  labPods,
  type LabService,
} from '../fixtures/lab-cluster.js'
import {legacyBackendLeftover, leftoverFix, notReady} from '../helpers/check-states.js'

/** Both nodes in nftables mode with the web Service dual-stack: kube-proxy's `ip` and `ip6 kube-proxy` tables, node-b's IPv6 one with `faults6`. */
/** web as a LoadBalancer Service with an external IP, open only to 203.0.113.0/24 (where the doctor's outside client is). */
const EXPOSED_WEB: Partial<LabService> = {
  type: 'LoadBalancer',
  externalIPs: ['192.0.2.50'],
  loadBalancerIPs: ['192.0.2.80'],
  loadBalancerSourceRanges: ['203.0.113.0/24'],
}
const nftablesDualStack = (faults6: RuleFaults = {}): OfflineOptions => {
  const services = [dualStackService(WEB), DNS]
  const pods = dualStackPods(labPods())
  const nftNode = (index: number, f6: RuleFaults) => (obs: NodeObservation) => ({
    ...obs,
    iptables: IptablesSave.parse(new BufferSource(Buffer.from(''))),
    ip6tables: IptablesSave.parse(new BufferSource(Buffer.from(''))),
    nft: parseNftDump(
      kubeProxyNftRules(NODES[index], services, pods) +
        kubeProxyNftRules(dualStackNode(NODES[index]), services, pods, f6, 6),
    ),
  })
  return {
    dualStack: true,
    editCluster: (c) => void (c.proxyConfig.mode = 'nftables'),
    editObservation: {'node-a': nftNode(0, {}), 'node-b': nftNode(1, faults6)},
  }
}
const STALE_REJECT =
  '-A KUBE-SERVICES -d 10.96.10.10/32 -p tcp -m comment --comment "shop/web:http has no endpoints" -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable'

checkFamily('rules', () => {
  checkTester(
    'dual-stack: each family of the Service judged against its own rules (iptables-save for IPv4, ip6tables-save for IPv6)',
    [
      {name: 'healthy dual-stack Service: both families programmed', state: {dualStack: true}, findings: []},
      {
        name: 'nftables mode, healthy dual-stack Service: the ip and ip6 kube-proxy tables both programmed',
        state: nftablesDualStack(),
        findings: [],
      },
      {
        name: "nftables mode: node-b's ip6 kube-proxy service-ips map lacks the IPv6 ClusterIP",
        state: nftablesDualStack({omitClusterIp: true}),
        findings: [['KPD-SVC-RULE-MISSING', 'node-b', 'error']],
      },
      {
        name: "nftables mode: an endpoint chain of node-b's ip6 kube-proxy table DNATs to a wrong port",
        state: nftablesDualStack({wrongPortFor: {ip: 'fd00:10:244:2::10', port: 9999}}),
        findings: [
          ['KPD-DNAT-WRONG', 'node-b', 'error'],
          ['KPD-NODE-DIVERGES', 'node-b', 'warning'],
        ],
      },
      {
        name: "kube-proxy's IPv6 rules in both backends of node-b: ip6tables-save shows nft, ip6tables-legacy-save still has KUBE-SERVICES; the IPv4 side has one backend",
        state: {dualStack: true, editObservation: {'node-b': legacyBackendLeftover(6)}},
        findings: [['KPD-MODE-LEFTOVER', 'node-b', 'warning']],
        fixes: leftoverFix('ip6tables'),
      },
      {
        name: 'IPv6 half broken: DNAT deleted from an IPv6 endpoint chain, IPv4 intact',
        state: {dualStack: true, faults6: {'node-b': {dropDnatFor: 'fd00:10:244:2::10'}}},
        findings: [
          ['KPD-SEP-MISSING', 'node-b', 'error'],
          ['KPD-NODE-DIVERGES', 'node-b', 'warning'],
        ],
        fixes: {
          'KPD-SEP-MISSING node-b': {
            check: [
              ['ssh', '--', 'node-b', 'sudo', 'ip6tables-save'],
              ['grep', '--', 'KUBE-SEP-3EIK7ZMJLCQCLWUX'],
            ],
            fix: {
              argv: null,
              text: "Restart kube-proxy on node-b (its systemd unit, or its static Pod's manifest).",
              changes: 'node',
              node: 'node-b',
            },
            text: null,
          },
        },
      },
      {
        name: 'IPv6 NodePorts missing on one node',
        state: {dualStack: true, faults6: {'node-a': {omitNodePorts: true}}},
        findings: [['KPD-NODEPORT-MISSING', 'node-a', 'error']],
      },
      {
        name: 'IPv4 half broken, IPv6 intact',
        state: {dualStack: true, faults: {'node-b': {dropDnatFor: '10.244.1.10'}}},
        findings: [
          ['KPD-SEP-MISSING', 'node-b', 'error'],
          ['KPD-NODE-DIVERGES', 'node-b', 'warning'],
        ],
        fixes: {
          'KPD-SEP-MISSING node-b': {
            check: [
              ['ssh', '--', 'node-b', 'sudo', 'iptables-save'],
              ['grep', '--', 'KUBE-SEP-FZQ6KZLGXRSKN2AD'],
            ],
            fix: {
              argv: null,
              text: "Restart kube-proxy on node-b (its systemd unit, or its static Pod's manifest).",
              changes: 'node',
              node: 'node-b',
            },
            text: null,
          },
        },
      },
      {
        name: 'the same hook missing in both families: one finding per family, each with its own tool',
        state: {
          dualStack: true,
          faults: {'node-b': {unhookPrerouting: true}},
          faults6: {'node-b': {unhookPrerouting: true}},
        },
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
    ],
  )

  describe('dual-stack: what the user reads names the family and the address', () => {
    test('an IPv6-only fault: the headline names the IPv6 path and address, the findings say (IPv6), IPv4 paths still work', () => {
      const {cluster, observations} = offlineCluster({
        dualStack: true,
        faults6: {'node-b': {dropDnatFor: 'fd00:10:244:2::10'}},
      })
      const r = buildReport(diagnose(cluster, observations, {probes: PROBES_OFF}))
      assert.equal(
        r.summary,
        '✗ shop/web: pod→ClusterIP to [fd00:10:96::10:10]:80 (http) breaks at endpoint on node-b: KUBE-SEP-3EIK7ZMJLCQCLWUX (endpoint [fd00:10:244:2::10]:8080, web-b1) has no DNAT rule: the jump falls through and the endpoint never gets traffic',
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
      assert.deepEqual(
        r.notChecked.filter((n) => n.required),
        [],
      )
      const human = renderHuman(r, new Chalk({level: 0}), 120).split('\n')
      assert.ok(
        human.includes(
          'Service shop/web  NodePort 10.96.10.10, fd00:10:96::10:10  ports http 80→http/TCP (NodePort 30080)',
        ),
        human.join('\n'),
      )
      const nodeB = human.find((l) => /^\W*node-b\b/.test(l))
      assert.equal(nodeB?.match(/✗ endpoint IPv6/g)?.length, 4, human.join('\n'))
    })

    test("rules left in the other iptables backend: each family's leftover named with that family's tools, only for that family", () => {
      const message = (family: 4 | 6) => {
        const {cluster, observations} = offlineCluster({
          dualStack: true,
          editObservation: {'node-b': legacyBackendLeftover(family)},
        })
        return diagnose(cluster, observations, {probes: PROBES_OFF}).findings.map((f) => f.message)
      }
      assert.deepEqual(message(6), [
        'node-b (IPv6): ip6tables-legacy also holds kube-proxy rules (nat KUBE-SERVICES, 2 rules) while ip6tables-save shows the nft backend: both rewrite packets',
      ])
      assert.deepEqual(message(4), [
        'node-b (IPv4): iptables-legacy also holds kube-proxy rules (nat KUBE-SERVICES, 4 rules) while iptables-save shows the nft backend: both rewrite packets',
      ])
    })
  })

  checkTester(
    "kube-proxy's rules (hook, service rule, reject, nodeport, endpoints, DNAT, probability, affinity, masquerade)",
    [
      {
        name: 'PREROUTING unhooked',
        state: {faults: {'node-b': {unhookPrerouting: true}}},
        findings: [['KPD-HOOK-MISSING', 'node-b', 'error']],
      },
      {
        name: 'NodePorts missing',
        state: {faults: {'node-a': {omitNodePorts: true}}},
        findings: [['KPD-NODEPORT-MISSING', 'node-a', 'error']],
      },
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
            check: [
              ['ssh', '--', 'node-a', 'sudo', 'iptables-save'],
              ['grep', '--', 'KUBE-SVC-67NZLRHBNDSAWJRO'],
            ],
            fix: {
              argv: null,
              text: "Restart kube-proxy on node-a (its systemd unit, or its static Pod's manifest).",
              changes: 'node',
              node: 'node-a',
            },
            text: null,
          },
        },
      },
      {
        name: 'a LoadBalancer Service with an external IP and loadBalancerSourceRanges, rules as kube-proxy writes them',
        state: {web: EXPOSED_WEB},
        findings: [],
      },
      {
        name: "node-b's KUBE-SERVICES lacks the LoadBalancer IP (a missed update)",
        state: {web: EXPOSED_WEB, faults: {'node-b': {omitLoadBalancerIp: true}}},
        findings: [['KPD-SVC-RULE-MISSING', 'node-b', 'error']],
        messages: {
          'KPD-SVC-RULE-MISSING node-b': [/no nat KUBE-SERVICES entry for shop\/web:http at 192\.0\.2\.80:80/],
        },
      },
      {
        name: "node-b's KUBE-SERVICES lacks the external IP",
        state: {web: EXPOSED_WEB, faults: {'node-b': {omitExternalIp: true}}},
        findings: [['KPD-SVC-RULE-MISSING', 'node-b', 'error']],
        messages: {'KPD-SVC-RULE-MISSING node-b': [/at 192\.0\.2\.50:80/]},
      },
      {
        name: "node-b's LoadBalancer firewall (KUBE-FW) lets the wrong sources through: the Service's range is dropped",
        state: {web: EXPOSED_WEB, faults: {'node-b': {wrongSourceRanges: ['198.51.100.0/24']}}},
        findings: [['KPD-PATH-BROKEN', 'node-b', 'error']],
        messages: {
          'KPD-PATH-BROKEN node-b': [
            /outside→LoadBalancer \(http\) breaks at filter/,
            /DROP by filter KUBE-PROXY-FIREWALL/,
          ],
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
      {
        name: 'MASQUERADE missing',
        state: {faults: {'node-a': {omitMasquerade: true}}},
        findings: [['KPD-MASQ-MISSING', 'node-a', 'error']],
      },
    ],
  )

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
      name: 'the LoadBalancer IP has no virtual server on node-b',
      state: {web: EXPOSED_WEB, ipvs: {'node-b': {omitLoadBalancerIp: true}}},
      findings: [
        ['KPD-MODE-MIXED', 'node-b', 'warning'],
        ['KPD-MODE-MISMATCH', 'node-b', 'warning'],
        ['KPD-SVC-RULE-MISSING', 'node-b', 'error'],
      ],
      messages: {'KPD-SVC-RULE-MISSING node-b': [/at 192\.0\.2\.80:80/]},
    },
    {
      name: "node-b's KUBE-LOAD-BALANCER-SOURCE-CIDR holds the wrong range: the Service's range is dropped",
      state: {web: EXPOSED_WEB, ipvs: {'node-b': {wrongSourceRanges: ['198.51.100.0/24']}}},
      findings: [
        ['KPD-MODE-MIXED', 'node-b', 'warning'],
        ['KPD-MODE-MISMATCH', 'node-b', 'warning'],
        ['KPD-PATH-BROKEN', 'node-b', 'error'],
      ],
      messages: {
        'KPD-PATH-BROKEN node-b': [/outside→LoadBalancer \(http\)/, /DROP by filter KUBE-SOURCE-RANGES-FIREWALL/],
      },
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
      state: {
        ipvs: {'node-a': {}, 'node-b': {}},
        editCluster: (c) => Object.assign(c.proxyConfig, {mode: 'ipvs', ipvsScheduler: 'lc'}),
      },
      findings: [
        ['KPD-IPVS-SCHEDULER', 'node-a', 'warning'],
        ['KPD-IPVS-SCHEDULER', 'node-b', 'warning'],
      ],
    },
  ])
})
