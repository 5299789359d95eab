import assert from 'node:assert/strict'
import {describe, test} from 'node:test'
import type {V1NetworkPolicy, V1NetworkPolicySpec} from '@kubernetes/client-node'
import {
  judgeEgress,
  judgeIngress,
  policyTypes,
  selectorMatches,
  type PolicyDestination,
  type PolicySource,
  type PolicyWorld,
} from '../../src/model/network-policy.js'

/**
 * The reachability matrix of upstream's NetworkPolicy e2e suite, in our own cases: namespaces x, y, z (labelled
 * ns=NAME), Pods a, b, c in each (labelled pod=NAME), each serving TCP 80 and 81 and UDP 80 under named ports
 * serve-80-tcp, serve-81-tcp, serve-80-udp. Each case gives policies and the exact set of sources that reach the
 * destination (default x/a) on a port after DNAT (default TCP 80), ingress and egress together.
 */
const NAMESPACES = ['x', 'y', 'z']
const PODS = ['a', 'b', 'c']
const ip = (ns: string, pod: string) => `10.0.${NAMESPACES.indexOf(ns) + 1}.${PODS.indexOf(pod) + 10}`
const namespaceLabels = Object.fromEntries(
  NAMESPACES.map((ns) => [ns, {ns, 'kubernetes.io/metadata.name': ns}]),
) as PolicyWorld['namespaceLabels']

const podSource = (ns: string, pod: string): PolicySource => ({
  kind: 'pod',
  namespace: ns,
  name: pod,
  ip: ip(ns, pod),
  labels: {pod},
  hostNetwork: false,
})
const destination = (ns: string, pod: string): PolicyDestination => ({
  namespace: ns,
  name: pod,
  ip: ip(ns, pod),
  labels: {pod},
  containerPorts: [
    {name: 'serve-80-tcp', containerPort: 80, protocol: 'TCP'},
    {name: 'serve-81-tcp', containerPort: 81, protocol: 'TCP'},
    {name: 'serve-80-udp', containerPort: 80, protocol: 'UDP'},
  ],
})

const policy = (namespace: string, name: string, spec: V1NetworkPolicySpec): V1NetworkPolicy => ({
  metadata: {namespace, name},
  spec,
})

interface MatrixCase {
  name: string
  policies: V1NetworkPolicy[]
  to?: [string, string]
  port?: number
  protocol?: string
  /** Every source Pod ("ns/pod") that reaches the destination; the others must not. */
  reach: string[] | 'all'
}

const ALL_SOURCES = NAMESPACES.flatMap((ns) => PODS.map((p) => `${ns}/${p}`))
const denyIngress = (ns: string) => policy(ns, 'deny-ingress', {podSelector: {}, policyTypes: ['Ingress']})
const denyEgress = (ns: string) => policy(ns, 'deny-egress', {podSelector: {}, policyTypes: ['Egress']})

function reachable(c: MatrixCase): string[] {
  const world: PolicyWorld = {policies: c.policies, namespaceLabels}
  const [ns, pod] = c.to ?? ['x', 'a']
  const dest = destination(ns, pod)
  const target = {port: c.port ?? 80, protocol: c.protocol ?? 'TCP'}
  return ALL_SOURCES.filter((s) => {
    const src = podSource(...(s.split('/') as [string, string]))
    const ingress = judgeIngress(world, src, dest, target).allowed
    const egress = judgeEgress(world, src, dest, target).allowed
    assert.notEqual(ingress, undefined, `${c.name}: a Pod source is always decided (ingress, ${s})`)
    assert.notEqual(egress, undefined, `${c.name}: a Pod source is always decided (egress, ${s})`)
    return ingress && egress
  })
}

const CASES: MatrixCase[] = [
  {name: 'no policy: everything reaches', policies: [], reach: 'all'},
  {name: 'deny all ingress in x: nothing reaches x/a', policies: [denyIngress('x')], reach: []},
  {name: 'deny all ingress in y does not touch x/a', policies: [denyIngress('y')], reach: 'all'},
  {
    name: 'allow all ingress (an empty rule) beside a deny: the union allows',
    policies: [denyIngress('x'), policy('x', 'allow-all', {podSelector: {}, ingress: [{}]})],
    reach: 'all',
  },
  {
    name: 'podSelector alone: Pods of the policy namespace only',
    policies: [
      policy('x', 'from-b', {
        podSelector: {matchLabels: {pod: 'a'}},
        ingress: [{_from: [{podSelector: {matchLabels: {pod: 'b'}}}]}],
      }),
    ],
    reach: ['x/b'],
  },
  {
    name: 'empty podSelector peer: every Pod of the policy namespace',
    policies: [policy('x', 'same-ns', {podSelector: {}, ingress: [{_from: [{podSelector: {}}]}]})],
    reach: ['x/a', 'x/b', 'x/c'],
  },
  {
    name: 'namespaceSelector alone: every Pod of the selected namespaces',
    policies: [
      policy('x', 'from-y', {podSelector: {}, ingress: [{_from: [{namespaceSelector: {matchLabels: {ns: 'y'}}}]}]}),
    ],
    reach: ['y/a', 'y/b', 'y/c'],
  },
  {
    name: 'empty namespaceSelector: every Pod of every namespace',
    policies: [policy('x', 'from-all-ns', {podSelector: {}, ingress: [{_from: [{namespaceSelector: {}}]}]})],
    reach: 'all',
  },
  {
    name: 'namespaceSelector AND podSelector in one peer',
    policies: [
      policy('x', 'y-and-c', {
        podSelector: {},
        ingress: [{_from: [{namespaceSelector: {matchLabels: {ns: 'y'}}, podSelector: {matchLabels: {pod: 'c'}}}]}],
      }),
    ],
    reach: ['y/c'],
  },
  {
    name: 'namespaceSelector OR podSelector as two peers',
    policies: [
      policy('x', 'y-or-c', {
        podSelector: {},
        ingress: [{_from: [{namespaceSelector: {matchLabels: {ns: 'y'}}}, {podSelector: {matchLabels: {pod: 'c'}}}]}],
      }),
    ],
    reach: ['x/c', 'y/a', 'y/b', 'y/c'],
  },
  {
    name: 'matchExpressions NotIn and the metadata.name label',
    policies: [
      policy('x', 'not-z', {
        podSelector: {},
        ingress: [
          {
            _from: [
              {
                namespaceSelector: {
                  matchExpressions: [{key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['z']}],
                },
                podSelector: {matchExpressions: [{key: 'pod', operator: 'In', values: ['a', 'b']}]},
              },
            ],
          },
        ],
      }),
    ],
    reach: ['x/a', 'x/b', 'y/a', 'y/b'],
  },
  {
    name: 'the policy selects another Pod: x/a stays open',
    policies: [policy('x', 'only-b', {podSelector: {matchLabels: {pod: 'b'}}, ingress: []})],
    reach: 'all',
  },
  {
    name: 'a port rule on 81 denies 80',
    policies: [policy('x', 'port-81', {podSelector: {}, ingress: [{ports: [{port: 81}]}]})],
    reach: [],
  },
  {
    name: 'a port rule on 80 allows TCP 80 from everywhere',
    policies: [policy('x', 'port-80', {podSelector: {}, ingress: [{ports: [{port: 80, protocol: 'TCP'}]}]})],
    reach: 'all',
  },
  {
    name: 'UDP 80 in a rule does not take TCP 80',
    policies: [policy('x', 'udp-80', {podSelector: {}, ingress: [{ports: [{port: 80, protocol: 'UDP'}]}]})],
    reach: [],
  },
  {
    name: 'a named port is the destination Pod container port of that name',
    policies: [policy('x', 'named', {podSelector: {}, ingress: [{ports: [{port: 'serve-80-tcp'}]}]})],
    reach: 'all',
  },
  {
    name: 'a named port of another number does not take 80',
    policies: [policy('x', 'named-81', {podSelector: {}, ingress: [{ports: [{port: 'serve-81-tcp'}]}]})],
    reach: [],
  },
  {
    name: 'a named port naming a UDP port does not take TCP 80',
    policies: [
      policy('x', 'named-udp', {podSelector: {}, ingress: [{ports: [{port: 'serve-80-udp', protocol: 'TCP'}]}]}),
    ],
    reach: [],
  },
  {
    name: 'endPort: 79-81 takes 80',
    policies: [policy('x', 'range', {podSelector: {}, ingress: [{ports: [{port: 79, endPort: 81}]}]})],
    reach: 'all',
  },
  {
    name: 'endPort: 81-90 does not take 80',
    policies: [policy('x', 'range-high', {podSelector: {}, ingress: [{ports: [{port: 81, endPort: 90}]}]})],
    reach: [],
  },
  {
    name: 'a protocol without a port takes every port of it',
    policies: [policy('x', 'any-tcp', {podSelector: {}, ingress: [{ports: [{protocol: 'TCP'}]}]})],
    reach: 'all',
  },
  {
    name: 'peers and ports together: from y on 80 only',
    policies: [
      policy('x', 'y-80', {
        podSelector: {},
        ingress: [{_from: [{namespaceSelector: {matchLabels: {ns: 'y'}}}], ports: [{port: 80}]}],
      }),
    ],
    reach: ['y/a', 'y/b', 'y/c'],
  },
  {
    name: 'ipBlock with except: y/b carved out',
    policies: [
      policy('x', 'cidr', {
        podSelector: {},
        ingress: [{_from: [{ipBlock: {cidr: '10.0.2.0/24', except: [`${ip('y', 'b')}/32`]}}]}],
      }),
    ],
    reach: ['y/a', 'y/c'],
  },
  {
    name: 'egress: deny all egress in y stops y only',
    policies: [denyEgress('y')],
    reach: ['x/a', 'x/b', 'x/c', 'z/a', 'z/b', 'z/c'],
  },
  {
    name: 'egress: y may reach namespace x on 80',
    policies: [
      denyEgress('y'),
      policy('y', 'to-x', {
        podSelector: {},
        policyTypes: ['Egress'],
        egress: [{to: [{namespaceSelector: {matchLabels: {ns: 'x'}}}], ports: [{port: 80}]}],
      }),
    ],
    reach: 'all',
  },
  {
    name: 'egress rules without policyTypes default to Ingress and Egress: x/b denies ingress too',
    to: ['x', 'b'],
    policies: [policy('x', 'b-egress', {podSelector: {matchLabels: {pod: 'b'}}, egress: [{to: [{podSelector: {}}]}]})],
    reach: [],
  },
  {
    name: 'egress only (policyTypes Egress): from x/b to y/a by ipBlock, others in x unaffected',
    to: ['y', 'a'],
    policies: [
      policy('x', 'b-egress', {
        podSelector: {matchLabels: {pod: 'b'}},
        policyTypes: ['Egress'],
        egress: [{to: [{ipBlock: {cidr: '10.0.3.0/24'}}]}],
      }),
    ],
    reach: ['x/a', 'x/c', 'y/a', 'y/b', 'y/c', 'z/a', 'z/b', 'z/c'],
  },
]

describe('NetworkPolicy semantics: the reachability matrix', () => {
  for (const c of CASES)
    test(c.name, () => {
      assert.deepEqual(reachable(c), c.reach === 'all' ? ALL_SOURCES : [...c.reach].sort())
    })
})

describe('NetworkPolicy semantics: sources known in part', () => {
  const world = (policies: V1NetworkPolicy[]): PolicyWorld => ({policies, namespaceLabels})
  const target = {port: 80, protocol: 'TCP'}
  const dest = destination('x', 'a')

  test('any Pod of a namespace: allowed, denied, or it depends on the labels it carries', () => {
    const fromY: PolicySource = {kind: 'namespace', namespace: 'y'}
    const verdict = (policies: V1NetworkPolicy[]) => judgeIngress(world(policies), fromY, dest, target).allowed
    assert.equal(verdict([]), true)
    assert.equal(verdict([denyIngress('x')]), false)
    const ySelector = {namespaceSelector: {matchLabels: {ns: 'y'}}}
    assert.equal(verdict([policy('x', 'y', {podSelector: {}, ingress: [{_from: [ySelector]}]})]), true)
    assert.equal(
      verdict([
        policy('x', 'y-c', {
          podSelector: {},
          ingress: [{_from: [{...ySelector, podSelector: {matchLabels: {pod: 'c'}}}]}],
        }),
      ]),
      undefined,
    )
    assert.equal(
      verdict([
        policy('x', 'z', {podSelector: {}, ingress: [{_from: [{namespaceSelector: {matchLabels: {ns: 'z'}}}]}]}),
      ]),
      false,
    )
  })

  test('any Pod of a namespace: an egress policy with a podSelector may or may not select it', () => {
    const fromY: PolicySource = {kind: 'namespace', namespace: 'y'}
    const egress = (policies: V1NetworkPolicy[]) => judgeEgress(world(policies), fromY, dest, target).allowed
    assert.equal(egress([denyEgress('y')]), false)
    assert.equal(
      egress([policy('y', 'b-only', {podSelector: {matchLabels: {pod: 'b'}}, policyTypes: ['Egress']})]),
      undefined,
    )
  })

  test('a host source is taken by ipBlock only, and its egress is not policed', () => {
    const host: PolicySource = {kind: 'host', node: 'node-a', ip: '192.168.1.10'}
    const ingress = (policies: V1NetworkPolicy[]) => judgeIngress(world(policies), host, dest, target).allowed
    assert.equal(
      ingress([policy('x', 'all-ns', {podSelector: {}, ingress: [{_from: [{namespaceSelector: {}}]}]})]),
      false,
    )
    assert.equal(
      ingress([policy('x', 'nodes', {podSelector: {}, ingress: [{_from: [{ipBlock: {cidr: '192.168.1.0/24'}}]}]})]),
      true,
    )
    const out = judgeEgress(world([denyEgress('x')]), host, dest, target)
    assert.equal(out.allowed, true)
    assert.match(out.notApplicable ?? '', /host-network/)
  })

  test('namespace labels not read: a namespaceSelector decides nothing', () => {
    const noLabels: PolicyWorld = {
      policies: [
        policy('x', 'from-y', {podSelector: {}, ingress: [{_from: [{namespaceSelector: {matchLabels: {ns: 'y'}}}]}]}),
      ],
    }
    assert.equal(judgeIngress(noLabels, podSource('y', 'a'), dest, target).allowed, undefined)
    // kubectl's and the API's spelling of an ingress rule's peers is "from".
    const asKubectl = {
      policies: [
        {metadata: {namespace: 'x', name: 'k'}, spec: {podSelector: {}, ingress: [{from: [{podSelector: {}}]}]}},
      ],
    } as unknown as PolicyWorld
    assert.equal(judgeIngress(asKubectl, podSource('x', 'b'), dest, target).allowed, true)
    assert.equal(judgeIngress(asKubectl, podSource('y', 'b'), dest, target).allowed, false)
  })

  test('policyTypes default and selector forms', () => {
    assert.deepEqual(policyTypes(policy('x', 'p', {podSelector: {}})), ['Ingress'])
    assert.deepEqual(policyTypes(policy('x', 'p', {podSelector: {}, egress: [{}]})), ['Ingress', 'Egress'])
    assert.deepEqual(policyTypes(policy('x', 'p', {podSelector: {}, egress: []})), ['Ingress'])
    assert.equal(selectorMatches({matchExpressions: [{key: 'a', operator: 'Exists'}]}, {a: ''}), true)
    assert.equal(selectorMatches({matchExpressions: [{key: 'a', operator: 'DoesNotExist'}]}, {a: ''}), false)
    assert.equal(selectorMatches({matchExpressions: [{key: 'a', operator: 'Bogus'}]}, {a: ''}), false)
    assert.equal(selectorMatches({}, undefined), true)
    assert.equal(selectorMatches({matchLabels: {a: 'b'}}, undefined), undefined)
  })
})
