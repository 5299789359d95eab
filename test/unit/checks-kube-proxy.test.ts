import type {V1Pod} from '@kubernetes/client-node'
import {parseNftDump} from '../../src/parse/nft-dump.js'
import {kubeProxyNftRules} from '../fixtures/kube-proxy-nft.js'
import {kubeProxyPodObject} from '../fixtures/api-objects.js'
import {checkFamily, checkTester} from '../helpers/check-tester.js'
import {DNS, NODES, WEB, labPods} from '../fixtures/lab-cluster.js'
import {kubeProxyStatus, legacyBackendLeftover, leftoverFix, now} from '../helpers/check-states.js'
import {ciliumAgentPod, ciliumConfigMap, ciliumNodeDump, cniOnlyDump} from '../fixtures/implementers.js'
import type {ClusterState} from '../../src/cluster/types.js'

/** The implementers' objects as read: these Pods and ConfigMaps (plain JSON shaped like the API's objects). */
const implementerObjects = (pods: unknown[], configMaps: unknown[]) => (c: ClusterState) =>
  void (c.implementerObjects = {pods, configMaps} as ClusterState['implementerObjects'])

/** k3s: kube-proxy runs inside the k3s server/agent binary: no kube-proxy Pod, no ConfigMap, no other implementer. */
const k3s = (c: ClusterState) => {
  c.kubeProxyPods = []
  c.proxyConfigMap = undefined
  implementerObjects([], [])(c)
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

checkFamily('kube-proxy', () => {
  checkTester('nodes and kube-proxy (node-unreadable, proxy-mode, kube-proxy-health, node-diverges)', [
    {
      name: 'one node unreadable',
      state: {
        editObservation: {
          'node-b': (o) => ({
            name: o.name,
            reachable: false,
            error: 'ssh: connect to host 10.200.0.12 port 22: Connection refused',
          }),
        },
      },
      findings: [['KPD-NODE-UNREADABLE', 'node-b', 'warning']],
      fixes: {
        'KPD-NODE-UNREADABLE node-b': {
          check: [['ssh', '--', 'node-b', 'sudo', 'iptables-save'], ['head']],
          fix: null,
          text: 'Run it by hand to see why the doctor could not read the node.',
        },
      },
    },
    {
      name: "Cilium's kube-proxy replacement on every node, no kube-proxy: kube-proxy's checks do not run",
      state: {
        dumpFor: {'node-a': ciliumNodeDump(), 'node-b': ciliumNodeDump()},
        editCluster: implementerObjects(
          [ciliumAgentPod('node-a'), ciliumAgentPod('node-b')],
          [ciliumConfigMap('true')],
        ),
      },
      findings: [],
    },
    {
      name: "no node has anybody's Service rules and the cluster runs no kube-proxy",
      state: {
        dumpFor: {'node-a': cniOnlyDump('LOCAL-FIREWALL'), 'node-b': cniOnlyDump('LOCAL-FIREWALL')},
        editCluster: implementerObjects([], []),
      },
      findings: [
        ['KPD-NO-IMPLEMENTER', 'node-a', 'error'],
        ['KPD-NO-IMPLEMENTER', 'node-b', 'error'],
      ],
      fixes: {
        'KPD-NO-IMPLEMENTER node-b': {
          check: [['kubectl', 'get', 'pods', '-A', '-o', 'wide', '--field-selector', 'spec.nodeName=node-b']],
          fix: null,
          text: null,
        },
      },
    },
    {
      name: 'k3s: kube-proxy runs inside the k3s binary (no kube-proxy Pod or ConfigMap); its rules on both nodes',
      state: {editCluster: k3s},
      findings: [],
    },
    {
      name: "k3s: node-b lost kube-proxy's rules while node-a has them: judged as kube-proxy, its hook missing",
      state: {dumpFor: {'node-b': cniOnlyDump('LOCAL-FIREWALL')}, editCluster: k3s},
      findings: [
        ['KPD-HOOK-MISSING', 'node-b', 'error'],
        ['KPD-NODE-DIVERGES', 'node-b', 'warning'],
      ],
    },
    {
      name: "kube-proxy's rules and Cilium's replacement both on node-a",
      state: {editCluster: implementerObjects([ciliumAgentPod('node-a')], [ciliumConfigMap('strict')])},
      findings: [['KPD-TWO-IMPLEMENTERS', 'node-a', 'warning']],
      messages: {
        'KPD-TWO-IMPLEMENTERS node-a': [/^node-a: kube-proxy and Cilium both implement Services on the node$/],
      },
    },
    {
      name: 'IPVS node without ipvsadm output',
      state: {dumpFor: {'node-b': IPVS_GLUE}},
      findings: [['KPD-MODE-UNSUPPORTED', 'node-b', 'warning']],
    },
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
      state: {
        editObservation: {
          'node-a': (o) => ({...o, nft: parseNftDump(kubeProxyNftRules(NODES[0], [WEB, DNS], labPods()))}),
        },
      },
      findings: [['KPD-MODE-LEFTOVER', 'node-a', 'warning']],
    },
    {
      name: "kube-proxy's rules in both iptables backends of node-b: iptables-save shows nft, iptables-legacy-save still has KUBE-SERVICES",
      state: {editObservation: {'node-b': legacyBackendLeftover(4)}},
      findings: [['KPD-MODE-LEFTOVER', 'node-b', 'warning']],
      fixes: leftoverFix('iptables'),
    },
    {
      name: "kube-proxy's Pod crash-looping on node-a",
      state: {
        editCluster: (c) =>
          void (c.kubeProxyPods = [
            kubeProxyPodObject('node-a', false) as unknown as V1Pod,
            kubeProxyPodObject('node-b', true) as unknown as V1Pod,
          ]),
      },
      findings: [['KPD-PROXY-POD-DOWN', 'node-a', 'error']],
    },
    {
      name: 'kube-proxy stuck on node-b: unhealthy, 15 min since its last sync, restores failing',
      state: {
        editObservation: {
          'node-b': kubeProxyStatus({
            proxyMode: 'iptables',
            healthz: {
              status: 503,
              lastUpdated: new Date((now - 900) * 1000).toISOString(),
              currentTime: new Date(now * 1000).toISOString(),
            },
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
      fixes: {
        // No kube-proxy Pod known (a system service): the Pods on the node are listed, the restart is prose.
        'KPD-PROXY-UNHEALTHY node-b': {
          check: [
            [
              'kubectl',
              '-n',
              'kube-system',
              'get',
              'pods',
              '-l',
              'k8s-app=kube-proxy',
              '--field-selector',
              'spec.nodeName=node-b',
              '-o',
              'wide',
            ],
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
      name: "kube-proxy's Pod on node-b unhealthy: its log and its restart name the Pod",
      state: {
        editCluster: (c) =>
          void (c.kubeProxyPods = [
            kubeProxyPodObject('node-a', true) as unknown as V1Pod,
            kubeProxyPodObject('node-b', true) as unknown as V1Pod,
          ]),
        editObservation: {
          'node-b': kubeProxyStatus({
            proxyMode: 'iptables',
            healthz: {status: 503, currentTime: new Date(now * 1000).toISOString()},
          }),
        },
        faults: {'node-b': {omitEndpoint: '10.244.2.11'}},
      },
      findings: [
        ['KPD-PROXY-UNHEALTHY', 'node-b', 'error'],
        ['KPD-SEP-MISSING', 'node-b', 'error'],
        ['KPD-NODE-DIVERGES', 'node-b', 'warning'],
      ],
      fixes: {
        'KPD-PROXY-UNHEALTHY node-b': {
          check: [['kubectl', '-n', 'kube-system', 'logs', 'kube-proxy-bx7k2', '--tail=200']],
          fix: {
            argv: [['kubectl', '-n', 'kube-system', 'delete', 'pod', 'kube-proxy-bx7k2']],
            text: null,
            changes: 'cluster',
            node: null,
          },
          text: null,
        },
        'KPD-SEP-MISSING node-b': {
          check: [
            ['ssh', '--', 'node-b', 'sudo', 'iptables-save'],
            ['grep', '--', 'KUBE-SVC-67NZLRHBNDSAWJRO'],
          ],
          fix: {
            argv: [['kubectl', '-n', 'kube-system', 'delete', 'pod', 'kube-proxy-bx7k2']],
            text: null,
            changes: 'cluster',
            node: null,
          },
          text: null,
        },
      },
    },
  ])
})
