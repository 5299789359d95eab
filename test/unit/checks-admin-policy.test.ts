import type {V1NetworkPolicy, V1NetworkPolicySpec} from '@kubernetes/client-node'
import type {
  AdminNetworkPolicy,
  AdminPolicyRule,
  AdminPolicySubject,
  BaselineAdminNetworkPolicy,
} from '../../src/cluster/admin-policy-objects.js'
import type {AdminPolicyState, ClusterState, PolicyState} from '../../src/cluster/types.js'
import {podObject} from '../fixtures/api-objects.js'
import {labPods} from '../fixtures/lab-cluster.js'
import {checkFamily, checkTester} from '../helpers/check-tester.js'
import type {OfflineOptions} from '../helpers/offline-cluster.js'

/**
 * AdminNetworkPolicy and BaselineAdminNetworkPolicy precedence on the lab's Service shop/web, made a ClusterIP here (port
 * 80 → targetPort "http" = 8080 on web-a1, web-b1, web-b2; app=web), for the client Pod client/curl (app=curl, namespace
 * client labelled team=blue). Expectations learnt from network-policy-api's API text and its conformance cases (ANP
 * before NetworkPolicy before the baseline; Pass hands the connection to the NetworkPolicies).
 */
const NAMESPACES = {
  shop: {'kubernetes.io/metadata.name': 'shop'},
  client: {'kubernetes.io/metadata.name': 'client', team: 'blue'},
  'kube-system': {'kubernetes.io/metadata.name': 'kube-system'},
}
const curl = podObject({...labPods()[3], name: 'curl', namespace: 'client', ip: '10.244.1.200', labels: {app: 'curl'}})
const coredns = podObject(labPods().find((p) => p.name === 'coredns-a')!)

const np = (namespace: string, name: string, spec: V1NetworkPolicySpec): V1NetworkPolicy => ({
  metadata: {namespace, name},
  spec,
})
const denyIngress = np('shop', 'default-deny', {podSelector: {}, policyTypes: ['Ingress']})
const allowAll = np('shop', 'allow-all', {podSelector: {}, policyTypes: ['Ingress'], ingress: [{}]})

const SHOP: AdminPolicySubject = {namespaces: {matchLabels: {'kubernetes.io/metadata.name': 'shop'}}}
const BLUE = [{namespaces: {matchLabels: {team: 'blue'}}}]
const anp = (
  name: string,
  priority: number,
  ingress: AdminPolicyRule[],
  subject: AdminPolicySubject = SHOP,
): AdminNetworkPolicy => ({metadata: {name}, spec: {priority, subject, ingress}})
const rule = (name: string, action: string, more: Partial<AdminPolicyRule> = {}): AdminPolicyRule => ({
  name,
  action,
  from: BLUE,
  ...more,
})
const banp = (ingress: AdminPolicyRule[]): BaselineAdminNetworkPolicy => ({
  metadata: {name: 'default'},
  spec: {subject: SHOP, ingress},
})

/** The policies as read, --from client/curl, the Service a ClusterIP. */
function state(
  policies: V1NetworkPolicy[],
  admin: AdminPolicyState | undefined,
  more: Partial<PolicyState> = {},
): OfflineOptions {
  return {
    editCluster: (c: ClusterState) => {
      c.service.spec!.type = 'ClusterIP'
      c.policy = {
        clients: {pod: {namespace: 'client', name: 'curl'}},
        clientPod: curl,
        policies,
        namespaces: ['shop', 'client'],
        namespaceLabels: NAMESPACES,
        dnsPods: [coredns],
        ...(admin ? {admin} : {}),
        ...more,
      } as PolicyState
    },
  }
}
const admins = (anps: AdminNetworkPolicy[], baseline?: BaselineAdminNetworkPolicy): AdminPolicyState => ({
  anps,
  ...(baseline ? {banp: baseline} : {}),
})

const CONNECTION =
  'Pod client/curl → web-a1 \\(10\\.244\\.1\\.10\\), web-b1 \\(10\\.244\\.2\\.10\\), web-b2 \\(10\\.244\\.2\\.11\\) on TCP 8080 \\(targetPort of Service port 80\\)'
const exactly = (text: string) => new RegExp(`^${CONNECTION}: ${text}$`)

checkFamily('admin-policy', () => {
  checkTester('AdminNetworkPolicy and BaselineAdminNetworkPolicy precedence (policy-precedence.ts)', [
    {
      name: 'the CRDs absent (none read): the NetworkPolicies decide as before',
      state: state([denyIngress], admins([])),
      findings: [['KPD-POLICY-DENIES', '-', 'error']],
      messages: {
        'KPD-POLICY-DENIES -': [
          exactly('NetworkPolicy shop/default-deny selects them and has no ingress rule \\(it denies all ingress\\)'),
        ],
      },
    },
    {
      name: 'an ANP Allow over a NetworkPolicy deny: allowed, said as info',
      state: state([denyIngress], admins([anp('allow-blue', 10, [rule('allow-from-blue', 'Allow')])])),
      findings: [['KPD-ANP-ALLOWS', '-', 'info']],
      messages: {
        'KPD-ANP-ALLOWS -': [
          exactly(
            "AdminNetworkPolicy allow-blue \\(priority 10\\) ingress rule 0 'allow-from-blue' allows it, and an AdminNetworkPolicy Allow is final: NetworkPolicy shop/default-deny would deny it, but is not consulted",
          ),
        ],
      },
      fixes: {
        'KPD-ANP-ALLOWS -': {
          check: [['kubectl', 'get', 'adminnetworkpolicy', 'allow-blue', '-o', 'yaml']],
          fix: null,
          text: null,
        },
      },
    },
    {
      name: 'an ANP Allow where nothing would deny: no finding',
      state: state([allowAll], admins([anp('allow-blue', 10, [rule('allow-from-blue', 'Allow')])])),
      findings: [],
    },
    {
      name: 'an ANP Deny over a NetworkPolicy allow: denied, and the NetworkPolicies would have allowed it',
      state: state([allowAll], admins([anp('deny-blue', 10, [rule('deny-from-blue', 'Deny')])])),
      findings: [['KPD-ANP-DENIES', '-', 'error']],
      messages: {
        'KPD-ANP-DENIES -': [
          exactly(
            "AdminNetworkPolicy deny-blue \\(priority 10\\) ingress rule 0 'deny-from-blue' denies it, before any NetworkPolicy; without it the NetworkPolicies selecting the endpoints would allow it",
          ),
        ],
      },
      fixes: {
        'KPD-ANP-DENIES -': {
          check: [['kubectl', 'get', 'adminnetworkpolicy', 'deny-blue', '-o', 'yaml']],
          fix: {
            argv: [
              [
                'kubectl',
                'patch',
                'adminnetworkpolicy',
                'deny-blue',
                '--type=json',
                '-p',
                '[{"op":"add","path":"/spec/ingress/0","value":{"name":"pass-to-web","action":"Pass","from":[{"pods":{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"client"}},"podSelector":{"matchLabels":{"app":"curl"}}}}],"ports":[{"portNumber":{"protocol":"TCP","port":8080}}]}}]',
              ],
            ],
            text: 'if the Deny is not meant for this client, insert before spec.ingress[0] of AdminNetworkPolicy deny-blue: [ { name: pass-to-web, action: Pass, from: [ { pods: { namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: client } }, podSelector: { matchLabels: { app: curl } } } } ], ports: [ { portNumber: { protocol: TCP, port: 8080 } } ] } ]',
            changes: 'cluster',
            node: null,
          },
          text: null,
        },
      },
    },
    {
      name: 'an ANP Deny where no NetworkPolicy selects the endpoints',
      state: state([], admins([anp('deny-blue', 10, [rule('deny-from-blue', 'Deny')])])),
      findings: [['KPD-ANP-DENIES', '-', 'error']],
      messages: {
        'KPD-ANP-DENIES -': [
          /denies it, before any NetworkPolicy; without it nothing would deny it \(no NetworkPolicy selects the endpoints\)$/,
        ],
      },
    },
    {
      name: 'Pass: the NetworkPolicies decide, and their finding says the ANP passed it to them',
      state: state([denyIngress], admins([anp('pass-blue', 10, [rule('pass-from-blue', 'Pass')])])),
      findings: [['KPD-POLICY-DENIES', '-', 'error']],
      messages: {
        'KPD-POLICY-DENIES -': [
          exactly(
            "NetworkPolicy shop/default-deny selects them and has no ingress rule \\(it denies all ingress\\) \\(AdminNetworkPolicy pass-blue \\(priority 10\\) ingress rule 0 'pass-from-blue' passes it to the NetworkPolicies\\)",
          ),
        ],
      },
    },
    {
      name: 'Pass skips the lower-precedence ANPs: a Deny at priority 20 is never reached, the NetworkPolicies allow',
      state: state(
        [allowAll],
        admins([
          anp('deny-blue', 20, [rule('deny-from-blue', 'Deny')]),
          anp('pass-blue', 10, [rule('pass-from-blue', 'Pass')]),
        ]),
      ),
      findings: [],
    },
    {
      name: 'Pass, no NetworkPolicy selects the endpoints: the baseline denies',
      state: state(
        [],
        admins([anp('pass-blue', 10, [rule('pass-from-blue', 'Pass')])], banp([rule('deny-blue', 'Deny')])),
      ),
      findings: [['KPD-BANP-DENIES', '-', 'error']],
      messages: {
        'KPD-BANP-DENIES -': [
          exactly(
            "no NetworkPolicy selects the endpoints and BaselineAdminNetworkPolicy default ingress rule 0 'deny-blue' denies it \\(AdminNetworkPolicy pass-blue \\(priority 10\\) ingress rule 0 'pass-from-blue' passes it to the NetworkPolicies\\)",
          ),
        ],
      },
      fixes: {
        'KPD-BANP-DENIES -': {
          check: [['kubectl', 'get', 'baselineadminnetworkpolicy', 'default', '-o', 'yaml']],
          fix: {
            argv: null,
            text: 'a NetworkPolicy allowing it (it then decides all ingress of the endpoint Pods, instead of the baseline): { apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: { namespace: shop, name: allow-to-web }, spec: { podSelector: { matchLabels: { app: web } }, policyTypes: [ Ingress ], ingress: [ { from: [ { namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: client } }, podSelector: { matchLabels: { app: curl } } } ], ports: [ { protocol: TCP, port: 8080 } ] } ] } }; or change spec.ingress[0] of the BaselineAdminNetworkPolicy default',
            changes: 'cluster',
            node: null,
          },
          text: null,
        },
      },
    },
    {
      name: 'the baseline denies, but a NetworkPolicy selects the endpoints: the NetworkPolicy decides (allows)',
      state: state([allowAll], admins([], banp([rule('deny-blue', 'Deny')]))),
      findings: [],
    },
    {
      name: 'the baseline allows, a NetworkPolicy selecting the endpoints denies: the NetworkPolicy decides',
      state: state([denyIngress], admins([], banp([rule('allow-blue', 'Allow')]))),
      findings: [['KPD-POLICY-DENIES', '-', 'error']],
    },
    {
      name: 'the baseline: its rules in order, an Allow before a Deny of everyone',
      state: state(
        [],
        admins([], banp([rule('allow-blue', 'Allow'), rule('deny-all', 'Deny', {from: [{namespaces: {}}]})])),
      ),
      findings: [],
    },
    {
      name: 'priorities: the lower number first (Allow at 5 before Deny at 20)',
      state: state(
        [denyIngress],
        admins([
          anp('deny-20', 20, [rule('deny-from-blue', 'Deny')]),
          anp('allow-5', 5, [rule('allow-from-blue', 'Allow')]),
        ]),
      ),
      findings: [['KPD-ANP-ALLOWS', '-', 'info']],
      messages: {'KPD-ANP-ALLOWS -': [/AdminNetworkPolicy allow-5 \(priority 5\) ingress rule 0 'allow-from-blue'/]},
    },
    {
      name: 'priorities: Deny at 5 before Allow at 20; the NetworkPolicies would deny it too',
      state: state(
        [denyIngress],
        admins([
          anp('deny-5', 5, [rule('deny-from-blue', 'Deny')]),
          anp('allow-20', 20, [rule('allow-from-blue', 'Allow')]),
        ]),
      ),
      findings: [['KPD-ANP-DENIES', '-', 'error']],
      messages: {
        'KPD-ANP-DENIES -': [
          exactly(
            "AdminNetworkPolicy deny-5 \\(priority 5\\) ingress rule 0 'deny-from-blue' denies it, before any NetworkPolicy; the NetworkPolicies would deny it too",
          ),
        ],
      },
      fixes: {
        'KPD-ANP-DENIES -': {
          check: [['kubectl', 'get', 'adminnetworkpolicy', 'deny-5', '-o', 'yaml']],
          fix: {
            argv: [
              [
                'kubectl',
                'patch',
                'adminnetworkpolicy',
                'deny-5',
                '--type=json',
                '-p',
                '[{"op":"add","path":"/spec/ingress/0","value":{"name":"allow-to-web","action":"Allow","from":[{"pods":{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"client"}},"podSelector":{"matchLabels":{"app":"curl"}}}}],"ports":[{"portNumber":{"protocol":"TCP","port":8080}}]}}]',
              ],
            ],
            text: 'if the Deny is not meant for this client, insert before spec.ingress[0] of AdminNetworkPolicy deny-5: [ { name: allow-to-web, action: Allow, from: [ { pods: { namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: client } }, podSelector: { matchLabels: { app: curl } } } } ], ports: [ { portNumber: { protocol: TCP, port: 8080 } } ] } ]',
            changes: 'cluster',
            node: null,
          },
          text: null,
        },
      },
    },
    {
      name: 'rule order in one ANP: a Deny on another port does not take it, the Allow after it does',
      state: state(
        [denyIngress],
        admins([
          anp('ordered', 10, [
            rule('deny-metrics', 'Deny', {ports: [{portNumber: {protocol: 'TCP', port: 9090}}]}),
            rule('allow-from-blue', 'Allow'),
            rule('deny-everyone', 'Deny', {from: [{namespaces: {}}]}),
          ]),
        ]),
      ),
      findings: [['KPD-ANP-ALLOWS', '-', 'info']],
      messages: {'KPD-ANP-ALLOWS -': [/AdminNetworkPolicy ordered \(priority 10\) ingress rule 1 'allow-from-blue'/]},
    },
    {
      name: 'rule order in one ANP: a Deny of everyone first wins over the Allow after it',
      state: state(
        [allowAll],
        admins([
          anp('ordered', 10, [
            rule('deny-everyone', 'Deny', {from: [{namespaces: {}}]}),
            rule('allow-from-blue', 'Allow'),
          ]),
        ]),
      ),
      findings: [['KPD-ANP-DENIES', '-', 'error']],
      messages: {
        'KPD-ANP-DENIES -': [/AdminNetworkPolicy ordered \(priority 10\) ingress rule 0 'deny-everyone' denies/],
      },
    },
    {
      name: 'two ANPs at one priority deciding differently: undefined, said as a warning (no guess)',
      state: state(
        [allowAll],
        admins([
          anp('team-allow', 10, [rule('allow-from-blue', 'Allow')]),
          anp('team-deny', 10, [rule('deny-from-blue', 'Deny')]),
        ]),
      ),
      findings: [['KPD-ANP-SAME-PRIORITY', '-', 'warning']],
      messages: {
        'KPD-ANP-SAME-PRIORITY -': [
          exactly(
            "AdminNetworkPolicies team-allow and team-deny share priority 10 and decide it differently \\(AdminNetworkPolicy team-allow \\(priority 10\\) ingress rule 0 'allow-from-blue': Allow; AdminNetworkPolicy team-deny \\(priority 10\\) ingress rule 0 'deny-from-blue': Deny\\); the API leaves their order undefined, and so is the verdict",
          ),
        ],
      },
      fixes: {
        'KPD-ANP-SAME-PRIORITY -': {
          check: [['kubectl', 'get', 'adminnetworkpolicy', 'team-allow', '-o', 'yaml']],
          fix: {
            argv: [
              ['kubectl', 'patch', 'adminnetworkpolicy', 'team-deny', '--type=merge', '-p', '{"spec":{"priority":11}}'],
            ],
            text: "give them different priorities (a lower number is judged first): which one should win is the administrators' choice; priority 11 is free",
            changes: 'cluster',
            node: null,
          },
          text: null,
        },
      },
    },
    {
      name: 'two ANPs at one priority that agree: no warning, the Deny',
      state: state(
        [allowAll],
        admins([
          anp('deny-a', 10, [rule('deny-from-blue', 'Deny')]),
          anp('deny-b', 10, [rule('deny-everyone', 'Deny', {from: [{namespaces: {}}]})]),
        ]),
      ),
      findings: [['KPD-ANP-DENIES', '-', 'error']],
    },
    {
      name: "ports after DNAT: a Deny of the Service's port 80 does not take 8080",
      state: state(
        [allowAll],
        admins([anp('deny-80', 10, [rule('deny-80', 'Deny', {ports: [{portNumber: {protocol: 'TCP', port: 80}}]})])]),
      ),
      findings: [],
    },
    {
      name: 'ports after DNAT: a Deny of the named port http (the targetPort) takes it',
      state: state(
        [allowAll],
        admins([anp('deny-http', 10, [rule('deny-http', 'Deny', {ports: [{namedPort: 'http'}]})])]),
      ),
      findings: [['KPD-ANP-DENIES', '-', 'error']],
    },
    {
      name: 'ports after DNAT: a Deny of the range 8000-8100 takes 8080; of UDP 8000-8100 does not',
      state: state(
        [allowAll],
        admins([
          anp('deny-udp-range', 5, [
            rule('deny-udp', 'Deny', {ports: [{portRange: {protocol: 'UDP', start: 8000, end: 8100}}]}),
          ]),
          anp('deny-range', 10, [rule('deny-range', 'Deny', {ports: [{portRange: {start: 8000, end: 8100}}]})]),
        ]),
      ),
      findings: [['KPD-ANP-DENIES', '-', 'error']],
      messages: {'KPD-ANP-DENIES -': [/AdminNetworkPolicy deny-range \(priority 10\) ingress rule 0 'deny-range'/]},
    },
    {
      name: 'subject by Pods: a podSelector that does not take the endpoints leaves them alone',
      state: state(
        [allowAll],
        admins([
          anp('deny-db', 10, [rule('deny-from-blue', 'Deny')], {
            pods: {namespaceSelector: {}, podSelector: {matchLabels: {app: 'db'}}},
          }),
        ]),
      ),
      findings: [],
    },
    {
      name: 'subject by Pods: app=web in every namespace takes the endpoints',
      state: state(
        [allowAll],
        admins([
          anp('deny-web', 10, [rule('deny-from-blue', 'Deny')], {
            pods: {namespaceSelector: {}, podSelector: {matchLabels: {app: 'web'}}},
          }),
        ]),
      ),
      findings: [['KPD-ANP-DENIES', '-', 'error']],
    },
    {
      name: 'subject by namespace: another namespace leaves shop alone',
      state: state(
        [allowAll],
        admins([anp('deny-other', 10, [rule('deny-from-blue', 'Deny')], {namespaces: {matchLabels: {team: 'red'}}})]),
      ),
      findings: [],
    },
    {
      name: "egress: an ANP whose subject is the client's namespace denies it at the client",
      state: state(
        [],
        admins([
          {
            metadata: {name: 'no-shop'},
            spec: {
              priority: 10,
              subject: {namespaces: {matchLabels: {team: 'blue'}}},
              egress: [
                {
                  name: 'deny-to-shop',
                  action: 'Deny',
                  to: [{namespaces: {matchLabels: {'kubernetes.io/metadata.name': 'shop'}}}],
                },
              ],
            },
          },
        ]),
      ),
      findings: [['KPD-ANP-DENIES', '-', 'error']],
      messages: {
        'KPD-ANP-DENIES -': [
          exactly(
            "AdminNetworkPolicy no-shop \\(priority 10\\) egress rule 0 'deny-to-shop' denies it at the client; without it nothing would deny it \\(no NetworkPolicy selects the client\\)",
          ),
        ],
      },
    },
    {
      name: "egress: a Deny to the endpoints' addresses (networks) takes them after DNAT",
      state: state(
        [],
        admins([
          {
            metadata: {name: 'no-pods'},
            spec: {
              priority: 10,
              subject: {namespaces: {}},
              egress: [{name: 'deny-pod-range', action: 'Deny', to: [{networks: ['10.244.0.0/16']}]}],
            },
          },
        ]),
      ),
      findings: [['KPD-ANP-DENIES', '-', 'error']],
    },
    {
      name: 'AdminNetworkPolicies not read (403): the NetworkPolicy denial is still said, with the doubt',
      state: state([denyIngress], {
        anps: [],
        unread: {reason: 'AdminNetworkPolicies not read (forbidden): RBAC forbids', required: true},
      }),
      findings: [['KPD-POLICY-DENIES', '-', 'error']],
      messages: {
        'KPD-POLICY-DENIES -': [
          /\(it denies all ingress\) \(AdminNetworkPolicies were not read: one could allow or deny it before any NetworkPolicy\)$/,
        ],
      },
    },
  ])
})
