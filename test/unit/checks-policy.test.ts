import assert from 'node:assert/strict'
import {test} from 'node:test'
import type {V1NetworkPolicy, V1NetworkPolicySpec} from '@kubernetes/client-node'
import type {ClusterState, PolicyState} from '../../src/cluster/types.js'
import {podObject} from '../fixtures/api-objects.js'
import {labPods} from '../fixtures/lab-cluster.js'
import {checkFamily, checkTester} from '../helpers/check-tester.js'
import {offlineCluster, type OfflineOptions} from '../helpers/offline-cluster.js'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {rulesFromCodes} from '../../src/diagnosis/ignore-rules.js'
import {buildReport, exitCode} from '../../src/report/report.js'

/**
 * NetworkPolicy findings on the lab's Service shop/web (NodePort, port 80 → targetPort "http" = 8080 on web-a1, web-b1,
 * web-b2; app=web). Default sources: any Pod of shop and, the Service being a NodePort with externalTrafficPolicy
 * Cluster, the nodes node-a (10.200.0.11) and node-b (10.200.0.12).
 */
const policy = (namespace: string, name: string, spec: V1NetworkPolicySpec): V1NetworkPolicy => ({
  metadata: {namespace, name},
  spec,
})
const NAMESPACES = {
  shop: {'kubernetes.io/metadata.name': 'shop'},
  client: {'kubernetes.io/metadata.name': 'client', team: 'blue'},
  'kube-system': {'kubernetes.io/metadata.name': 'kube-system'},
}
const curl = {
  ...podObject({...labPods()[3], name: 'curl', namespace: 'client', ip: '10.244.1.200', labels: {app: 'curl'}}),
}
const coredns = podObject(labPods().find((p) => p.name === 'coredns-a')!)

function withPolicies(
  policies: V1NetworkPolicy[],
  more: Partial<PolicyState> = {},
  edit?: (c: ClusterState) => void,
): OfflineOptions {
  return {
    editCluster: (c) => {
      c.policy = {
        clients: {},
        policies,
        namespaces: [...new Set(['shop', ...policies.map((p) => p.metadata?.namespace ?? '')])],
        namespaceLabels: NAMESPACES,
        dnsPods: [coredns] as unknown as PolicyState['dnsPods'],
        ...more,
      } as PolicyState
      edit?.(c)
    },
  }
}
const fromCurl = {
  clients: {pod: {namespace: 'client', name: 'curl'}},
  clientPod: curl,
} as unknown as Partial<PolicyState>
const denyIngress = policy('shop', 'default-deny', {podSelector: {}, policyTypes: ['Ingress']})
const clusterIP = (c: ClusterState) => {
  c.service.spec!.type = 'ClusterIP'
}

/**
 * A policy engine's drop on node-b set against the API's NetworkPolicies (web-b2 10.244.2.11 on node-b). The engines'
 * rules as iptables-save prints them (kube-router's pod firewall and policy chains; Calico's workload and policy
 * chains), with their comments.
 */
const FIRST_FORWARD_RULE =
  '-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall"'
/** Chains declared after the built-in ones, a jump ahead of kube-proxy's FORWARD rules, the chains' rules at the end. */
const withFilter =
  (chains: string[], forward: string, rules: string[]) =>
  (text: string): string => {
    assert.ok(text.includes(FIRST_FORWARD_RULE))
    return text
      .replace(':OUTPUT ACCEPT [0:0]\n', `:OUTPUT ACCEPT [0:0]\n${chains.map((c) => `:${c} - [0:0]\n`).join('')}`)
      .replace(FIRST_FORWARD_RULE, `${forward}\n${FIRST_FORWARD_RULE}`)
      .replace('\nCOMMIT\n*nat', `\n${rules.join('\n')}\nCOMMIT\n*nat`)
  }

/** kube-router's firewall for web-b2 running through the chain of NetworkPolicy shop/`name` (which takes nothing). */
const kubeRouter = (name: string) =>
  withFilter(
    ['KUBE-ROUTER-FORWARD', 'KUBE-POD-FW-4KQ2HUZKX7NJTMFO', 'KUBE-NWPLCY-7VGKF3XYVTYP2HBV'],
    '-A FORWARD -m comment --comment "kube-router netpol - TEMCG2JMHZYE7H7T" -j KUBE-ROUTER-FORWARD',
    [
      '-A KUBE-ROUTER-FORWARD -d 10.244.2.11/32 -m comment --comment "rule to jump traffic destined to POD name:web-b2 namespace: shop to chain KUBE-POD-FW-4KQ2HUZKX7NJTMFO" -j KUBE-POD-FW-4KQ2HUZKX7NJTMFO',
      '-A KUBE-POD-FW-4KQ2HUZKX7NJTMFO -m comment --comment "rule for stateful firewall for pod" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
      '-A KUBE-POD-FW-4KQ2HUZKX7NJTMFO -m comment --comment "rule to drop invalid state for pod" -m conntrack --ctstate INVALID -j DROP',
      `-A KUBE-POD-FW-4KQ2HUZKX7NJTMFO -d 10.244.2.11/32 -m comment --comment "run through nw policy ${name}" -j KUBE-NWPLCY-7VGKF3XYVTYP2HBV`,
      '-A KUBE-POD-FW-4KQ2HUZKX7NJTMFO -m comment --comment "rule to REJECT traffic destined for POD name:web-b2 namespace: shop" -m mark ! --mark 0x10000/0x10000 -j REJECT --reject-with icmp-port-unreachable',
      '-A KUBE-POD-FW-4KQ2HUZKX7NJTMFO -j MARK --set-xmark 0x0/0x10000',
    ],
  )

/** Calico's workload chain for web-b2: its policy chain takes only TCP 9090, the end of the tier drops the rest. */
const calico = withFilter(
  ['cali-FORWARD', 'cali-tw-cali95aa86cbb2a', 'cali-pi-_tTE-E7yY40ogArNVgKt'],
  '-A FORWARD -m comment --comment "cali:wUHhoiAYhphO9Mso" -j cali-FORWARD',
  [
    '-A cali-FORWARD -d 10.244.2.11/32 -m comment --comment "cali:jdEuaPBe14V2hutn" -j cali-tw-cali95aa86cbb2a',
    '-A cali-tw-cali95aa86cbb2a -m comment --comment "cali:Cu-tVtfKKu413YTT" -j MARK --set-xmark 0x0/0x10000',
    '-A cali-tw-cali95aa86cbb2a -m comment --comment "cali:pm-LK-c1ra31tRwz" -m mark --mark 0x0/0x20000 -j cali-pi-_tTE-E7yY40ogArNVgKt',
    '-A cali-tw-cali95aa86cbb2a -m comment --comment "cali:q_zG8dAujKUIBe0Q" -m comment --comment "Return if policy accepted" -m mark --mark 0x10000/0x10000 -j RETURN',
    '-A cali-tw-cali95aa86cbb2a -m comment --comment "cali:FUDVBYh1Yr6tVRgq" -m comment --comment "Drop if no policies passed packet" -m mark --mark 0x0/0x20000 -j DROP',
    '-A cali-pi-_tTE-E7yY40ogArNVgKt -p tcp -m comment --comment "cali:fwIMoHrbCWNN0i6y" -m comment --comment "Policy shop/knp.default.metrics-only ingress" -m multiport --dports 9090 -j MARK --set-xmark 0x10000/0x10000',
  ],
)

/** A firewall nobody else owns, dropping new connections to web-b1 (10.244.2.10) on node-b. */
const handWrittenDrop = withFilter(['LAB-FIREWALL'], '-A FORWARD -j LAB-FIREWALL', [
  '-A LAB-FIREWALL -d 10.244.2.10/32 -p tcp -m conntrack --ctstate NEW -j DROP',
])
/** kubelet's KUBE-FIREWALL, jumped to from FORWARD here, dropping new connections to web-b1 (10.244.2.10). */
const kubeletDrop = withFilter(['KUBE-FIREWALL'], '-A FORWARD -j KUBE-FIREWALL', [
  '-A KUBE-FIREWALL -d 10.244.2.10/32 -p tcp -m conntrack --ctstate NEW -j DROP',
])

/** shop's policies in the API (null: not read) and a policy engine's rules in node-b's dump. */
const withEngine = (policies: V1NetworkPolicy[] | null, dump: (text: string) => string): OfflineOptions => ({
  ...(policies ? withPolicies(policies) : {}),
  editDump: {'node-b': dump},
})
/**
 * kube-router's firewall for web-b2 on node-b through the chain of shop/from-node-b, which takes only sources in node-b's
 * pod range (10.244.2.0/24): a Pod of node-a (10.244.1.0/24) is rejected, a Pod of node-b let in.
 */
const kubeRouterBySource = withFilter(
  ['KUBE-ROUTER-FORWARD', 'KUBE-POD-FW-4KQ2HUZKX7NJTMFO', 'KUBE-NWPLCY-7VGKF3XYVTYP2HBV'],
  '-A FORWARD -m comment --comment "kube-router netpol - TEMCG2JMHZYE7H7T" -j KUBE-ROUTER-FORWARD',
  [
    '-A KUBE-ROUTER-FORWARD -d 10.244.2.11/32 -m comment --comment "rule to jump traffic destined to POD name:web-b2 namespace: shop to chain KUBE-POD-FW-4KQ2HUZKX7NJTMFO" -j KUBE-POD-FW-4KQ2HUZKX7NJTMFO',
    '-A KUBE-POD-FW-4KQ2HUZKX7NJTMFO -m comment --comment "rule for stateful firewall for pod" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
    '-A KUBE-POD-FW-4KQ2HUZKX7NJTMFO -d 10.244.2.11/32 -m comment --comment "run through nw policy from-node-b" -j KUBE-NWPLCY-7VGKF3XYVTYP2HBV',
    '-A KUBE-POD-FW-4KQ2HUZKX7NJTMFO -m comment --comment "rule to REJECT traffic destined for POD name:web-b2 namespace: shop" -m mark ! --mark 0x10000/0x10000 -j REJECT --reject-with icmp-port-unreachable',
    '-A KUBE-NWPLCY-7VGKF3XYVTYP2HBV -s 10.244.2.0/24 -m comment --comment "rule to ACCEPT traffic from source pods to dest pods selected by policy name from-node-b namespace shop" -j MARK --set-xmark 0x10000/0x10000',
  ],
)
/** The API's side of kubeRouterBySource: web's Pods take only node-b's pod range. */
const fromNodeB = policy('shop', 'from-node-b', {
  podSelector: {},
  policyTypes: ['Ingress'],
  ingress: [{_from: [{ipBlock: {cidr: '10.244.2.0/24'}}]}],
})
/** --from shop/NAME, a Pod of the lab. */
const fromLabPod = (name: string) => {
  const pod = labPods().find((p) => p.name === name)!
  return {
    clients: {pod: {namespace: pod.namespace, name}},
    clientPod: podObject(pod),
  } as unknown as Partial<PolicyState>
}
const allowAll = policy('shop', 'default-deny', {podSelector: {}, policyTypes: ['Ingress'], ingress: [{}]})

checkFamily('policy', () => {
  checkTester('NetworkPolicy from the API (network-policy.ts)', [
    {name: 'policies read, none in shop: nothing', state: withPolicies([]), findings: []},
    {
      name: 'default deny in shop: the namespace and the nodes (NodePort traffic masqueraded) are denied, one finding',
      state: withPolicies([denyIngress]),
      findings: [['KPD-POLICY-DENIES', '-', 'error']],
      messages: {
        'KPD-POLICY-DENIES -': [
          /^any Pod of namespace shop, node node-a \(10\.200\.0\.11\), node node-b \(10\.200\.0\.12\) → web-a1 \(10\.244\.1\.10\), web-b1 \(10\.244\.2\.10\), web-b2 \(10\.244\.2\.11\) on TCP 8080 \(targetPort of Service port 80\): NetworkPolicy shop\/default-deny selects them and has no ingress rule \(it denies all ingress\)$/,
        ],
      },
      fixes: {
        'KPD-POLICY-DENIES -': {
          check: [['kubectl', '-n', 'shop', 'get', 'networkpolicy', 'default-deny', '-o', 'yaml']],
          fix: {
            argv: [
              [
                'kubectl',
                '-n',
                'shop',
                'patch',
                'networkpolicy',
                'default-deny',
                '--type=json',
                '-p',
                '[{"op":"add","path":"/spec/ingress","value":[{"from":[{"podSelector":{}},{"ipBlock":{"cidr":"10.200.0.11/32"}},{"ipBlock":{"cidr":"10.200.0.12/32"}}],"ports":[{"protocol":"TCP","port":8080}]}]}]',
              ],
            ],
            text: 'add to spec.ingress of NetworkPolicy shop/default-deny (or a new policy selecting the endpoint Pods): [ { from: [ { podSelector: {} }, { ipBlock: { cidr: 10.200.0.11/32 } }, { ipBlock: { cidr: 10.200.0.12/32 } } ], ports: [ { protocol: TCP, port: 8080 } ] } ]',
            changes: 'cluster',
            node: null,
          },
          text: null,
        },
      },
    },
    {
      name: 'a ClusterIP Service: only the namespace is judged by default',
      state: withPolicies([denyIngress], {}, clusterIP),
      findings: [['KPD-POLICY-DENIES', '-', 'error']],
      messages: {'KPD-POLICY-DENIES -': [/^any Pod of namespace shop → web-a1/]},
    },
    {
      name: 'a deny policy in another namespace does not touch shop',
      state: withPolicies([policy('client', 'default-deny', {podSelector: {}, policyTypes: ['Ingress']})]),
      findings: [],
    },
    {
      name: 'allow from the same namespace: the nodes are still denied (ipBlock only takes host traffic)',
      state: withPolicies([policy('shop', 'same-ns', {podSelector: {}, ingress: [{_from: [{podSelector: {}}]}]})]),
      findings: [['KPD-POLICY-DENIES', '-', 'error']],
      messages: {
        'KPD-POLICY-DENIES -': [
          /^node node-a \(10\.200\.0\.11\), node node-b \(10\.200\.0\.12\) → .* NetworkPolicy shop\/same-ns selects them and its ingress rule 0 takes only every Pod of shop$/,
        ],
      },
    },
    {
      name: 'allow from app=frontend only: for any Pod of shop it depends on its labels (no finding), the nodes are denied',
      state: withPolicies(
        [
          policy('shop', 'frontend', {
            podSelector: {matchLabels: {app: 'web'}},
            ingress: [{_from: [{podSelector: {matchLabels: {app: 'frontend'}}}]}],
          }),
        ],
        {},
        clusterIP,
      ),
      findings: [],
    },
    {
      name: '--from a Pod of another namespace that no rule takes',
      state: withPolicies(
        [
          policy('shop', 'frontend', {
            podSelector: {matchLabels: {app: 'web'}},
            ingress: [{_from: [{podSelector: {matchLabels: {app: 'frontend'}}}]}],
          }),
        ],
        fromCurl,
      ),
      findings: [['KPD-POLICY-DENIES', '-', 'error']],
      messages: {
        'KPD-POLICY-DENIES -': [
          /^Pod client\/curl → .* on TCP 8080 \(targetPort of Service port 80\): NetworkPolicy shop\/frontend selects them and its ingress rule 0 takes only Pods app=frontend of shop$/,
        ],
      },
      fixes: {
        'KPD-POLICY-DENIES -': {
          check: [['kubectl', '-n', 'shop', 'get', 'networkpolicy', 'frontend', '-o', 'yaml']],
          fix: {
            argv: [
              [
                'kubectl',
                '-n',
                'shop',
                'patch',
                'networkpolicy',
                'frontend',
                '--type=json',
                '-p',
                '[{"op":"add","path":"/spec/ingress/-","value":{"from":[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"client"}},"podSelector":{"matchLabels":{"app":"curl"}}}],"ports":[{"protocol":"TCP","port":8080}]}}]',
              ],
            ],
            text: 'add to spec.ingress of NetworkPolicy shop/frontend (or a new policy selecting the endpoint Pods): [ { from: [ { namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: client } }, podSelector: { matchLabels: { app: curl } } } ], ports: [ { protocol: TCP, port: 8080 } ] } ]',
            changes: 'cluster',
            node: null,
          },
          text: null,
        },
      },
    },
    {
      name: '--from a Pod whose namespace a rule takes: allowed',
      state: withPolicies(
        [
          policy('shop', 'team-blue', {
            podSelector: {},
            ingress: [{_from: [{namespaceSelector: {matchLabels: {team: 'blue'}}}]}],
          }),
        ],
        fromCurl,
      ),
      findings: [],
    },
    {
      name: '--from-namespace: any Pod of client, taken by namespace, not on the port',
      state: withPolicies(
        [
          policy('shop', 'team-blue', {
            podSelector: {},
            ingress: [
              {_from: [{namespaceSelector: {matchLabels: {team: 'blue'}}}], ports: [{port: 9090, endPort: 9099}]},
            ],
          }),
        ],
        {clients: {namespace: 'client'}},
      ),
      findings: [['KPD-POLICY-DENIES', '-', 'error']],
      messages: {
        'KPD-POLICY-DENIES -': [
          /^any Pod of namespace client → .*: NetworkPolicy shop\/team-blue selects them and its ingress rule 0 takes only TCP 9090-9099$/,
        ],
      },
    },
    {
      name: 'the port-80-instead-of-8080 mistake: named by policy and rule, fixed by the targetPort',
      state: withPolicies(
        [
          policy('shop', 'allow-web', {
            podSelector: {matchLabels: {app: 'web'}},
            ingress: [{ports: [{protocol: 'TCP', port: 80}]}],
          }),
        ],
        fromCurl,
      ),
      findings: [['KPD-POLICY-SERVICE-PORT', '-', 'error']],
      messages: {
        'KPD-POLICY-SERVICE-PORT -': [
          /^NetworkPolicy shop\/allow-web ingress rule 0 allows TCP 80, the Service's port; after DNAT the endpoints receive TCP 8080 \(targetPort\), which no rule allows: Pod client\/curl cannot reach web-a1/,
        ],
      },
      fixes: {
        'KPD-POLICY-SERVICE-PORT -': {
          check: [['kubectl', '-n', 'shop', 'get', 'networkpolicy', 'allow-web', '-o', 'yaml']],
          fix: {
            argv: [
              [
                'kubectl',
                '-n',
                'shop',
                'patch',
                'networkpolicy',
                'allow-web',
                '--type=json',
                '-p',
                '[{"op":"replace","path":"/spec/ingress/0/ports/0/port","value":8080}]',
              ],
            ],
            text: 'in NetworkPolicy shop/allow-web, spec.ingress[0].ports: [ { protocol: TCP, port: 8080 } ]',
            changes: 'cluster',
            node: null,
          },
          text: null,
        },
      },
    },
    {
      name: 'the named port (http) is the targetPort: allowed',
      state: withPolicies(
        [policy('shop', 'allow-http', {podSelector: {}, ingress: [{ports: [{port: 'http'}]}]})],
        fromCurl,
      ),
      findings: [],
    },
    {
      name: "the client's egress denies all: the endpoints and DNS",
      state: withPolicies([policy('client', 'deny-egress', {podSelector: {}, policyTypes: ['Egress']})], fromCurl),
      findings: [
        ['KPD-POLICY-EGRESS-DENIES', '-', 'error'],
        ['KPD-POLICY-DNS-EGRESS', '-', 'warning'],
      ],
      messages: {
        'KPD-POLICY-EGRESS-DENIES -': [
          /^Pod client\/curl → web-a1 \(10\.244\.1\.10\), web-b1 \(10\.244\.2\.10\), web-b2 \(10\.244\.2\.11\) of shop on TCP 8080 \(egress is judged after DNAT, on the endpoint and targetPort, not the ClusterIP\): NetworkPolicy client\/deny-egress selects the client and has no egress rule \(it denies all egress\)$/,
        ],
        'KPD-POLICY-DNS-EGRESS -': [/^Pod client\/curl cannot ask the cluster DNS \(coredns-a on UDP 53\)/],
      },
      fixes: {
        'KPD-POLICY-DNS-EGRESS -': {
          check: [['kubectl', '-n', 'client', 'get', 'networkpolicy', 'deny-egress', '-o', 'yaml']],
          fix: {
            argv: [
              [
                'kubectl',
                '-n',
                'client',
                'patch',
                'networkpolicy',
                'deny-egress',
                '--type=json',
                '-p',
                '[{"op":"add","path":"/spec/egress","value":[{"to":[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"kube-system"}},"podSelector":{"matchLabels":{"k8s-app":"kube-dns"}}}],"ports":[{"protocol":"UDP","port":53},{"protocol":"TCP","port":53}]}]}]',
              ],
            ],
            text: 'add to spec.egress of NetworkPolicy client/deny-egress: [ { to: [ { namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: kube-system } }, podSelector: { matchLabels: { k8s-app: kube-dns } } } ], ports: [ { protocol: UDP, port: 53 }, { protocol: TCP, port: 53 } ] } ]',
            changes: 'cluster',
            node: null,
          },
          text: null,
        },
      },
    },
    {
      name: "the client's egress allows DNS only: the endpoints are denied",
      state: withPolicies(
        [
          policy('client', 'dns-only', {
            podSelector: {},
            policyTypes: ['Egress'],
            egress: [
              {
                to: [{namespaceSelector: {}, podSelector: {matchLabels: {'k8s-app': 'kube-dns'}}}],
                ports: [{protocol: 'UDP', port: 53}],
              },
            ],
          }),
        ],
        fromCurl,
      ),
      findings: [['KPD-POLICY-EGRESS-DENIES', '-', 'error']],
      messages: {
        'KPD-POLICY-EGRESS-DENIES -': [
          /NetworkPolicy client\/dns-only selects the client and its egress rule 0 takes only Pods k8s-app=kube-dns of every namespace$/,
        ],
      },
    },
    {
      name: "the client's egress allows the ClusterIP only (before DNAT): the endpoints are denied, DNS too",
      state: withPolicies(
        [
          policy('client', 'to-vip', {
            podSelector: {matchLabels: {app: 'curl'}},
            egress: [{to: [{ipBlock: {cidr: '10.96.10.10/32'}}], ports: [{port: 80}]}],
          }),
        ],
        fromCurl,
      ),
      findings: [
        ['KPD-POLICY-EGRESS-DENIES', '-', 'error'],
        ['KPD-POLICY-DNS-EGRESS', '-', 'warning'],
      ],
      messages: {
        'KPD-POLICY-EGRESS-DENIES -': [/egress rule 0 takes only addresses 10\.96\.10\.10\/32$/],
      },
    },
    {
      name: 'any Pod of client: an egress policy of some of its Pods decides nothing (no finding)',
      state: withPolicies(
        [policy('client', 'curl-only', {podSelector: {matchLabels: {app: 'curl'}}, policyTypes: ['Egress']})],
        {clients: {namespace: 'client'}},
      ),
      findings: [],
    },
    {
      name: 'policies not read (403): no finding (the run says they were not checked)',
      state: withPolicies([denyIngress], {unread: {reason: 'RBAC forbids list networkpolicies', required: true}}),
      findings: [],
    },
  ])
  checkTester('--from POD: the walk starts from the Pod, on its node (model/paths.ts PathClient)', [
    {
      name: "--from shop/client-a (10.244.1.100, node-a), kube-router rejecting node-a's pod range at web-b2 as shop/from-node-b says: the policy's finding",
      state: {...withPolicies([fromNodeB], fromLabPod('client-a')), editDump: {'node-b': kubeRouterBySource}},
      findings: [['KPD-POLICY-DENIES', '-', 'error']],
      messages: {'KPD-POLICY-DENIES -': [/shop\/from-node-b/]},
    },
    {
      name: '--from shop/client-b (10.244.2.100, node-b), which the same rules and policy let in: nothing',
      state: {...withPolicies([fromNodeB], fromLabPod('client-b')), editDump: {'node-b': kubeRouterBySource}},
      findings: [],
    },
    {
      name: "--from shop/client-a, the API's policies read as none while kube-router rejects its range: the drop, on node-b",
      state: {...withPolicies([], fromLabPod('client-a')), editDump: {'node-b': kubeRouterBySource}},
      findings: [['KPD-POLICY-DATAPLANE-DISAGREES', 'node-b', 'error']],
    },
  ])
  checkTester("a policy engine's drop against the API's NetworkPolicies (policy-dataplane.ts)", [
    {
      name: "kube-router rejects web-b2 for shop/default-deny, which the API denies too: one finding, the policy's",
      state: withEngine([denyIngress], kubeRouter('default-deny')),
      findings: [['KPD-POLICY-DENIES', '-', 'error']],
    },
    {
      name: "kube-router rejects web-b2 as the API's policy does, and a hand-written firewall drops web-b1 on the same path: both findings",
      state: withEngine([denyIngress], (t) => handWrittenDrop(kubeRouter('default-deny')(t))),
      findings: [
        ['KPD-FILTER-DROP', 'node-b', 'error'],
        ['KPD-POLICY-DENIES', '-', 'error'],
      ],
      messages: {
        'KPD-FILTER-DROP node-b': [
          /^node-b: new connections to 10\.244\.2\.10:8080 \(web-b1\) are dropped by filter LAB-FIREWALL line \d+, a chain no known project names/,
        ],
      },
    },
    {
      name: "kube-router rejects web-b2 as the API's policy does, and kubelet's KUBE-FIREWALL drops web-b1: the break the policy does not explain is still said",
      state: withEngine([denyIngress], (t) => kubeletDrop(kubeRouter('default-deny')(t))),
      findings: [
        ['KPD-POLICY-DENIES', '-', 'error'],
        ['KPD-PATH-BROKEN', 'node-b', 'error'],
      ],
      messages: {'KPD-PATH-BROKEN node-b': [/breaks at filter/]},
    },
    {
      name: "--ignore KPD-POLICY-DENIES, kube-router rejecting web-b2 as the API's policy does: nothing reported (the break is the silenced one's)",
      state: withEngine([denyIngress], kubeRouter('default-deny')),
      options: {ignore: rulesFromCodes(['KPD-POLICY-DENIES'])},
      findings: [],
    },
    {
      name: "--ignore KPD-POLICY-DENIES, kubelet's KUBE-FIREWALL dropping web-b1 beside kube-router's reject: the break the policy does not explain is still said",
      state: withEngine([denyIngress], (t) => kubeletDrop(kubeRouter('default-deny')(t))),
      options: {ignore: rulesFromCodes(['KPD-POLICY-DENIES'])},
      findings: [['KPD-PATH-BROKEN', 'node-b', 'error']],
      messages: {'KPD-PATH-BROKEN node-b': [/breaks at filter/]},
    },
    {
      name: 'kube-router rejects web-b2 for shop/default-deny, which the API allows everyone: the disagreement',
      state: withEngine([allowAll], kubeRouter('default-deny')),
      findings: [['KPD-POLICY-DATAPLANE-DISAGREES', 'node-b', 'error']],
      messages: {
        'KPD-POLICY-DATAPLANE-DISAGREES node-b': [
          /^node-b: kube-router's rules reject new connections to web-b2 \(10\.244\.2\.11\) for NetworkPolicy shop\/default-deny, but the API's NetworkPolicies allow any Pod of namespace shop, node node-a \(10\.200\.0\.11\), node node-b \(10\.200\.0\.12\) there/,
        ],
      },
    },
    {
      name: '--from client/curl, which the API allows in, kube-router rejecting it (the walk starts from its address): the disagreement',
      state: {
        ...withPolicies(
          [
            policy('shop', 'from-blue', {
              podSelector: {},
              ingress: [{_from: [{namespaceSelector: {matchLabels: {team: 'blue'}}}]}],
            }),
          ],
          fromCurl,
        ),
        editDump: {'node-b': kubeRouter('from-blue')},
      },
      findings: [['KPD-POLICY-DATAPLANE-DISAGREES', 'node-b', 'error']],
      messages: {
        'KPD-POLICY-DATAPLANE-DISAGREES node-b': [
          /^node-b: kube-router's rules reject new connections to web-b2 \(10\.244\.2\.11\) for NetworkPolicy shop\/from-blue, but the API's NetworkPolicies allow Pod client\/curl there/,
        ],
      },
    },
    {
      name: 'kube-router rejects web-b2 for shop/old-policy, which the API does not have: the disagreement',
      state: withEngine([], kubeRouter('old-policy')),
      findings: [['KPD-POLICY-DATAPLANE-DISAGREES', 'node-b', 'error']],
      messages: {
        'KPD-POLICY-DATAPLANE-DISAGREES node-b': [
          /for NetworkPolicy shop\/old-policy, but the API has no shop\/old-policy: kube-router still enforces a deleted or renamed policy/,
        ],
      },
    },
    {
      name: "policies not read from the API: the drop as KPD-FILTER-DROP, naming the policy from kube-router's comments",
      state: withEngine(null, kubeRouter('default-deny')),
      findings: [['KPD-FILTER-DROP', 'node-b', 'error']],
      messages: {
        'KPD-FILTER-DROP node-b': [
          /rejected by filter KUBE-POD-FW-4KQ2HUZKX7NJTMFO line \d+, a kube-router chain \(its rules name NetworkPolicy shop\/default-deny\)/,
        ],
      },
    },
    {
      name: "Calico drops web-b2 at the end of the tier, its policy chain naming shop/metrics-only, which the API has and denies 8080 with: one finding, the policy's",
      state: withEngine(
        [policy('shop', 'metrics-only', {podSelector: {}, ingress: [{ports: [{protocol: 'TCP', port: 9090}]}]})],
        calico,
      ),
      findings: [['KPD-POLICY-DENIES', '-', 'error']],
    },
    {
      name: 'Calico drops web-b2 for shop/metrics-only, which the API does not have',
      state: withEngine([], calico),
      findings: [['KPD-POLICY-DATAPLANE-DISAGREES', 'node-b', 'error']],
      messages: {
        'KPD-POLICY-DATAPLANE-DISAGREES node-b': [
          /^node-b: Calico's rules drop .* for NetworkPolicy shop\/metrics-only, but the API has no shop\/metrics-only/,
        ],
      },
    },
  ])
})

test("the policy finding carries the engine's drop as evidence, naming node, engine, policy and rule", () => {
  const {cluster, observations} = offlineCluster(withEngine([denyIngress], kubeRouter('default-deny')))
  const f = diagnose(cluster, observations).findings.find((x) => x.code === 'KPD-POLICY-DENIES')
  assert.ok(f)
  assert.deepEqual(
    f.evidence.filter((e) => e.startsWith('node-b drops it too')),
    [
      'node-b drops it too (kube-router, for shop/default-deny): filter line ' +
        /filter line (\d+)/.exec(f.evidence.join('\n'))![1] +
        ': -A KUBE-POD-FW-4KQ2HUZKX7NJTMFO -m comment --comment "rule to REJECT traffic destined for POD name:web-b2 namespace: shop" -m mark ! --mark 0x10000/0x10000 -j REJECT --reject-with icmp-port-unreachable',
    ],
  )
})

test('--ignore KPD-POLICY-DENIES: the paths the policy breaks are shown as silenced by it, in the table, the JSON and the headline', () => {
  const {cluster, observations} = offlineCluster(withEngine([denyIngress], kubeRouter('default-deny')))
  const plain = diagnose(cluster, observations)
  const d = diagnose(cluster, observations, {ignore: rulesFromCodes(['KPD-POLICY-DENIES'])})
  const broken = d.paths.filter((p) => p.ok === false)
  assert.ok(broken.length > 0, 'kube-router rejects some walks')
  assert.deepEqual(
    broken.map((p) => d.ignoredBreaks.get(p)),
    broken.map(() => 'KPD-POLICY-DENIES'),
  )
  assert.deepEqual(
    d.ignored.map((f) => f.code),
    ['KPD-POLICY-DENIES'],
  )
  const report = buildReport(d)
  assert.match(report.summary, /except breaks silenced by ignore rules \(KPD-POLICY-DENIES\)/)
  assert.deepEqual(
    report.paths.filter((p) => p.ok === false).map((p) => p.ignoredBy),
    broken.map(() => 'KPD-POLICY-DENIES'),
  )
  assert.equal(exitCode(report), 0)
  // Without the rule: the finding, no break silenced, and the run fails.
  assert.equal(plain.ignoredBreaks.size, 0)
  assert.equal(exitCode(buildReport(plain)), 1)
})

test("--from POD: the walks are the Pod's, from its address on its node; the breaking half named, no other node a source", () => {
  const summaries: string[] = []
  const walks = (client: string) => {
    const {cluster, observations} = offlineCluster({
      ...withPolicies([fromNodeB], fromLabPod(client)),
      editDump: {'node-b': kubeRouterBySource},
    })
    const report = buildReport(diagnose(cluster, observations))
    summaries.push(report.summary)
    return report.paths.map((p) => ({
      node: p.node,
      entry: p.entry,
      source: p.source,
      ok: p.ok,
      breaksOn: p.breaksOn,
      broken: p.remote.filter((h) => h.ok === false).map((h) => h.pod),
    }))
  }
  assert.deepEqual(walks('client-a'), [
    {
      node: 'node-a',
      entry: 'pod→ClusterIP',
      source: 'shop/client-a 10.244.1.100 on node-a',
      ok: false,
      breaksOn: 'node-b',
      broken: ['web-b2'],
    },
  ])
  assert.deepEqual(walks('client-b'), [
    {
      node: 'node-b',
      entry: 'pod→ClusterIP',
      source: 'shop/client-b 10.244.2.100 on node-b',
      ok: true,
      breaksOn: null,
      broken: [],
    },
  ])
  assert.match(summaries[0], /^✗ shop\/web: Pod shop\/client-a → .* NetworkPolicy shop\/from-node-b selects them/)
  assert.equal(summaries[1], '✓ shop/web: every traced path from shop/client-b 10.244.2.100 on node-b works')
})

test('--from an endpoint Pod: its walk is pod→itself; --from a Pod of an unread node: no walk, a required gap', () => {
  const own = offlineCluster(withPolicies([], fromLabPod('web-b1')))
  const d = diagnose(own.cluster, own.observations)
  assert.deepEqual(
    d.paths.map((p) => `${p.node} ${p.entry} ${p.source} ${p.ok}`),
    ['node-b pod→itself shop/web-b1 10.244.2.10 on node-b true'],
  )
  const unread = offlineCluster({
    ...withPolicies([], fromLabPod('client-a')),
    editObservation: {'node-a': (o) => ({...o, reachable: false, error: 'connection refused'})},
  })
  const r = buildReport(diagnose(unread.cluster, unread.observations))
  assert.deepEqual(r.paths, [])
  assert.ok(
    r.notChecked.some(
      (n) =>
        n.node === 'node-a' &&
        n.required &&
        n.reason === "no walk starts from shop/client-a: its node node-a's rules were not read or not judged",
    ),
    JSON.stringify(r.notChecked),
  )
  assert.equal(exitCode(r), 3)
})
