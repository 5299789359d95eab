import type {V1NetworkPolicy, V1NetworkPolicySpec} from '@kubernetes/client-node'
import type {ClusterState, PolicyState} from '../../src/cluster/types.js'
import {podObject} from '../fixtures/api-objects.js'
import {labPods} from '../fixtures/lab-cluster.js'
import {checkFamily, checkTester} from '../helpers/check-tester.js'
import type {OfflineOptions} from '../helpers/offline-cluster.js'

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
})
