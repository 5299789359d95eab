import assert from 'node:assert/strict'
import {diagnose, type DiagnoseOptions} from '../../src/diagnosis/diagnose.js'
import {planProbes, PROBE_SETTINGS} from '../../src/diagnosis/probe-plan.js'
import {offlineCluster, type OfflineOptions} from '../helpers/offline-cluster.js'
import {test} from 'node:test'
import {checkFamily, checkTester, type CheckCase} from '../helpers/check-tester.js'
import {NODES} from '../fixtures/lab-cluster.js'
import {notReady} from '../helpers/check-states.js'
import {withPath} from '../helpers/path-states.js'
import {conntrackLine, kernelFrom, probeLines} from '../helpers/conntrack-lines.js'
import type {KernelEvidence} from '../../src/node/probe/kernel-evidence.js'

/**
 * Live probe results as the lab's nodes would give them, built from each node's own probe plan for `state`: every
 * attempt connects unless `fails` says how a target (by "node address:port") failed: [connected, refused, timed out].
 */
function probed(
  state: OfflineOptions,
  fails: Record<string, [connected: number, refused: number, timedOut: number]> = {},
  notProbed?: string,
  kernel: Record<string, KernelEvidence> = {},
): DiagnoseOptions {
  const {cluster} = offlineCluster(state)
  const nodes = NODES.map((n) => ({
    node: n.name,
    via: 'an SSH port forward',
    tallies: planProbes(cluster, n.name).targets.map((target) => {
      const attempts = target.attempts ?? PROBE_SETTINGS.vipAttempts
      if (notProbed) return {target, attempts: 0, connected: 0, refused: 0, timedOut: 0, unreachable: 0, notProbed}
      const [connected, refused, timedOut] = fails[`${n.name} ${target.host}:${target.port}`] ?? [attempts, 0, 0]
      assert.equal(
        connected + refused + timedOut,
        attempts,
        `${n.name} ${target.host}:${target.port} has ${attempts} attempts`,
      )
      return {target, attempts, connected, refused, timedOut, unreachable: 0}
    }),
    ...(kernel[n.name] ? {kernel: kernel[n.name]} : {}),
  }))
  return {probes: {ran: true, settings: PROBE_SETTINGS, nodes, notes: []}}
}
/**
 * A chain in node-b's filter FORWARD dropping new connections to `ip`: a policy engine's (Calico's) by default, or one
 * of Kubernetes' own (kubelet's KUBE-FIREWALL), which no finding of a foreign drop reports.
 */
const forwardDropOnB =
  (ip: string, chain = 'cali-FORWARD') =>
  (t: string) => {
    const first = '-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall"'
    assert.ok(t.includes(first) && t.includes('\nCOMMIT\n*nat'))
    return t
      .replace(':OUTPUT ACCEPT [0:0]\n', `:OUTPUT ACCEPT [0:0]\n:${chain} - [0:0]\n`)
      .replace(first, `-A FORWARD -j ${chain}\n${first}`)
      .replace('\nCOMMIT\n*nat', `\n-A ${chain} -d ${ip}/32 -m conntrack --ctstate NEW -j DROP\nCOMMIT\n*nat`)
  }
const withoutClusterIpRule = (t: string) =>
  t
    .split('\n')
    .filter((l) => !l.startsWith('-A KUBE-SERVICES -d 10.96.10.10/32'))
    .join('\n')

const WEB = [
  ['10.244.1.10:8080', 'replied'],
  ['10.244.2.10:8080', 'replied'],
  ['10.244.2.11:8080', 'replied'],
] as const satisfies Array<[string, 'replied']>
const healthy = (node: string) =>
  kernelFrom({
    '10.96.10.10:80': probeLines(node, '10.96.10.10', 80, [...WEB]),
    [`${node}:30080`]: probeLines(node, node, 30080, [...WEB]),
  })
const HEALTHY_A = healthy('10.200.0.11')
const HEALTHY_B = healthy('10.200.0.12')
const STRAY_A = kernelFrom({
  '10.96.10.10:80': probeLines('10.200.0.11', '10.96.10.10', 80, [...WEB, ['10.244.9.9:8080', 'replied']]),
  '10.200.0.11:30080': probeLines('10.200.0.11', '10.200.0.11', 30080, [...WEB]),
})
const REFUSING_A = kernelFrom({
  '10.96.10.10:80': probeLines('10.200.0.11', '10.96.10.10', 80, [
    ['10.244.1.10:8080', 'replied'],
    ['10.244.2.10:8080', 'replied'],
    ['10.244.2.11:8080', 'reset'],
  ]),
})

const UNTRANSLATED_B = kernelFrom({
  '10.96.10.10:80': probeLines('10.200.0.12', '10.96.10.10', 80, [
    ['10.244.1.10:8080', 'replied'],
    ['10.244.2.10:8080', 'replied'],
    ['10.96.10.10:80', 'no reply'],
  ]),
})

/**
 * node-a's kernel entries of its eight ClusterIP probes while node-b's FORWARD drops new connections to web-b2: five
 * sent to node-a's and node-b's other endpoints, three to web-b2 (the first `repliedProbes` of them replied, the rest
 * not); and `otherReplies` entries of another client's connections to web-b2 that it answered (a pod's, which the drop
 * does not catch) in the same seconds: entries beyond the probes' own.
 */
const droppedB2FromA = (repliedProbes: number, otherReplies: number) =>
  kernelFrom({
    '10.96.10.10:80': [
      ...probeLines('10.200.0.11', '10.96.10.10', 80, [
        ['10.244.1.10:8080', 'replied'],
        ['10.244.2.10:8080', 'replied'],
        ['10.244.1.10:8080', 'replied'],
        ['10.244.2.10:8080', 'replied'],
        ['10.244.1.10:8080', 'replied'],
        ...[0, 1, 2].map((i): [string, 'replied' | 'no reply'] => [
          '10.244.2.11:8080',
          i < repliedProbes ? 'replied' : 'no reply',
        ]),
      ]),
      ...Array.from({length: otherReplies}, (_, i) =>
        conntrackLine('10.244.1.5', '10.96.10.10', 80, '10.244.2.11:8080', 'replied', 50000 + i),
      ),
    ],
  })

checkFamily('probes', () => {
  checkTester('live probes (vip-fails, endpoint-cross-node, backend-refused, probe-contradicts)', [
    {name: 'healthy lab, every probe connected: no finding', state: {}, options: probed({}), findings: []},
    {
      name: 'the node sshd refuses port forwarding: nothing learnt, no finding',
      state: {},
      options: probed({}, {}, 'administratively prohibited'),
      findings: [],
    },
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
      options: probed(
        {},
        {
          'node-a 10.244.2.11:8080': [0, 0, 3],
          'node-b 10.244.2.11:8080': [0, 0, 3],
          'node-b 10.96.10.10:80': [6, 0, 2],
        },
      ),
      findings: [['KPD-BACKEND-REFUSED', 'node-b', 'error']],
    },
    {
      name: "web-b1 answers from node-b but times out from node-a and neither node's walk shows why: cannot tell, a warning blaming neither node",
      state: {},
      options: probed(
        {},
        {
          'node-a 10.244.2.10:8080': [0, 0, 3],
          'node-a 10.96.10.10:80': [5, 0, 3],
          'node-a 10.200.0.11:30080': [6, 0, 2],
        },
      ),
      findings: [['KPD-ENDPOINT-CROSS-NODE', '-', 'warning']],
    },
    {
      name: 'web-b1 times out from node-a and node-b forwards nothing: the probe is evidence on KPD-NODE-FORWARDING-OFF on node-b, no second finding',
      state: withPath({'node-b': {sysctl: {'net.ipv4.ip_forward': '0'}}}),
      options: probed(
        {},
        {
          'node-a 10.244.2.10:8080': [0, 0, 3],
          'node-a 10.244.2.11:8080': [0, 0, 3],
          'node-a 10.96.10.10:80': [4, 0, 4],
          'node-a 10.200.0.11:30080': [4, 0, 4],
        },
      ),
      findings: [['KPD-NODE-FORWARDING-OFF', 'node-b', 'error']],
    },
    {
      name: "web-b2 times out from node-a, node-b's filter FORWARD drops it (the second half of node-a's paths breaks there): the probe is evidence on KPD-FILTER-DROP on node-b",
      state: {editDump: {'node-b': forwardDropOnB('10.244.2.11')}},
      options: probed(
        {editDump: {'node-b': forwardDropOnB('10.244.2.11')}},
        {
          'node-a 10.244.2.11:8080': [0, 0, 3],
          'node-a 10.96.10.10:80': [5, 0, 3],
          'node-a 10.200.0.11:30080': [6, 0, 2],
        },
      ),
      findings: [['KPD-FILTER-DROP', 'node-b', 'error']],
    },
    {
      name: "web-b2 times out from node-a, kubelet's KUBE-FIREWALL on node-b drops it (the second half of node-a's paths breaks there, no foreign drop): the probe is evidence on KPD-PATH-BROKEN on node-b, no warning",
      state: {editDump: {'node-b': forwardDropOnB('10.244.2.11', 'KUBE-FIREWALL')}},
      options: probed(
        {editDump: {'node-b': forwardDropOnB('10.244.2.11', 'KUBE-FIREWALL')}},
        {
          'node-a 10.244.2.11:8080': [0, 0, 3],
          'node-a 10.96.10.10:80': [5, 0, 3],
          'node-a 10.200.0.11:30080': [6, 0, 2],
        },
      ),
      findings: [['KPD-PATH-BROKEN', 'node-b', 'error']],
      messages: {'KPD-PATH-BROKEN node-b': [/^node-b: node-a's .* breaks at filter: .*10\.244\.2\.11:8080/]},
    },
    {
      name: "node-b's endpoints time out from node-a, whose route to node-b's pods is gone: the probe is evidence on KPD-ROUTE-MISSING on node-a",
      state: withPath({'node-a': {podRoute: 'missing'}}),
      options: probed(
        {},
        {
          'node-a 10.244.2.10:8080': [0, 0, 3],
          'node-a 10.244.2.11:8080': [0, 0, 3],
          'node-a 10.96.10.10:80': [4, 0, 4],
          'node-a 10.200.0.11:30080': [4, 0, 4],
        },
      ),
      findings: [['KPD-ROUTE-MISSING', 'node-a', 'error']],
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
      options: probed(
        {},
        {
          'node-a 10.244.2.11:8080': [0, 3, 0],
          'node-b 10.244.2.11:8080': [0, 3, 0],
          'node-a 10.96.10.10:80': [0, 0, 8],
        },
      ),
      findings: [
        ['KPD-BACKEND-REFUSED', 'node-b', 'error'],
        ['KPD-VIP-FAILS', 'node-a', 'error'],
      ],
    },
    {
      name: "node-a's ClusterIP 0/8 while two of three endpoints fail from node-a: chance explains it ((2/3)^8 is 4%), no VIP finding",
      state: {},
      options: probed(
        {},
        {
          'node-a 10.244.2.10:8080': [0, 0, 3],
          'node-a 10.244.2.11:8080': [0, 0, 3],
          'node-a 10.96.10.10:80': [0, 0, 8],
        },
      ),
      findings: [['KPD-ENDPOINT-CROSS-NODE', '-', 'warning']],
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
      options: probed(
        {web: {externalTrafficPolicy: 'Local'}, pods: notReady('web-a1')},
        {'node-a 10.200.0.11:30080': [0, 0, 8]},
      ),
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

  test('a probe failure a static cause explains is evidence on that finding, on the node where the path breaks', () => {
    const evidence = (state: OfflineOptions, fails: Parameters<typeof probed>[1]) => {
      const {cluster, observations} = offlineCluster(state)
      return diagnose(cluster, observations, probed(state, fails)).findings.map((f) => [f.code, f.node, f.evidence])
    }
    const fromA = {
      'node-a 10.244.2.11:8080': [0, 0, 3] as [number, number, number],
      'node-a 10.96.10.10:80': [5, 0, 3] as [number, number, number],
      'node-a 10.200.0.11:30080': [6, 0, 2] as [number, number, number],
    }
    const probeLine =
      'live probe: endpoint 10.244.2.11:8080 (pod web-b2 on node-b) answers from node-b (3/3 connected) but not from node-a (0/3 connected (3 timed out))'
    assert.deepEqual(evidence(withPath({'node-b': {sysctl: {'net.ipv4.ip_forward': '0'}}}), fromA), [
      ['KPD-NODE-FORWARDING-OFF', 'node-b', ['sysctl net.ipv4.ip_forward = 0', probeLine]],
    ])
    const [drop] = evidence({editDump: {'node-b': forwardDropOnB('10.244.2.11')}}, fromA)
    assert.deepEqual([drop[0], drop[1], (drop[2] as string[]).at(-1)], ['KPD-FILTER-DROP', 'node-b', probeLine])
  })

  checkTester('kernel evidence (kernel-disagrees)', [
    {
      name: "the kernel's entries on both nodes name the walk's endpoints, every one replied: no finding",
      state: {},
      options: probed({}, {}, undefined, {'node-a': HEALTHY_A, 'node-b': HEALTHY_B}),
      findings: [],
    },
    {
      name: "node-a's kernel DNATs ClusterIP probes to 10.244.9.9:8080, no endpoint of the walk: the model is wrong",
      state: {},
      options: probed({}, {}, undefined, {'node-a': STRAY_A, 'node-b': HEALTHY_B}),
      findings: [['KPD-KERNEL-DISAGREES', 'node-a', 'error']],
    },
    {
      name: 'web-b2 refusing: the kernel chose it and got resets, as the walk says it would: the backend finding alone',
      state: {},
      options: probed(
        {},
        {
          'node-a 10.244.2.11:8080': [0, 3, 0],
          'node-b 10.244.2.11:8080': [0, 3, 0],
          'node-a 10.96.10.10:80': [5, 3, 0],
        },
        undefined,
        {'node-a': REFUSING_A},
      ),
      findings: [['KPD-BACKEND-REFUSED', 'node-b', 'error']],
    },
    {
      name: "node-a's NodePort rules missing from the rules read, yet its kernel DNATs the probes and gets replies",
      state: {faults: {'node-a': {omitNodePorts: true}}},
      options: probed({}, {}, undefined, {'node-a': HEALTHY_A}),
      findings: [
        ['KPD-NODEPORT-MISSING', 'node-a', 'error'],
        ['KPD-KERNEL-DISAGREES', 'node-a', 'error'],
      ],
    },
    {
      name: 'the ClusterIP rule missing but the probe connects: the probe contradiction alone, not the kernel twice',
      state: {editDump: {'node-a': withoutClusterIpRule}},
      options: probed({}, {}, undefined, {'node-a': HEALTHY_A}),
      findings: [
        ['KPD-SVC-RULE-MISSING', 'node-a', 'error'],
        ['KPD-PROBE-CONTRADICTS', 'node-a', 'error'],
      ],
    },
    {
      name: "node-b's SEP chain of web-b2 without its DNAT: the kernel leaves those connections untranslated, as the walk does",
      state: {faults: {'node-b': {dropDnatFor: '10.244.2.11'}}},
      options: probed({}, {'node-b 10.96.10.10:80': [6, 0, 2], 'node-b 10.200.0.12:30080': [6, 0, 2]}, undefined, {
        'node-b': UNTRANSLATED_B,
      }),
      findings: [
        ['KPD-SEP-MISSING', 'node-b', 'error'],
        ['KPD-NODE-DIVERGES', 'node-b', 'warning'],
      ],
    },
    {
      name: "a healthy walk, yet the kernel leaves node-b's ClusterIP probes untranslated: the rules in force are not those read",
      state: {},
      options: probed({}, {'node-b 10.96.10.10:80': [6, 0, 2]}, undefined, {'node-b': UNTRANSLATED_B}),
      findings: [
        ['KPD-VIP-FAILS', 'node-b', 'error'],
        ['KPD-KERNEL-DISAGREES', 'node-b', 'error'],
      ],
    },
    {
      name: "a policy chain in node-b's FORWARD drops web-b2: node-b's own NodePort probes reach web-b2 through OUTPUT, not FORWARD, and its kernel saw replies: the drop alone",
      state: {editDump: {'node-b': forwardDropOnB('10.244.2.11')}},
      options: probed(
        {},
        {
          'node-a 10.244.2.11:8080': [0, 0, 3],
          'node-a 10.96.10.10:80': [5, 0, 3],
          'node-a 10.200.0.11:30080': [6, 0, 2],
        },
        undefined,
        {'node-b': HEALTHY_B},
      ),
      findings: [['KPD-FILTER-DROP', 'node-b', 'error']],
    },
    // KPD-KERNEL-DISAGREES counts replies from an endpoint the walk says is broken only when they outnumber the entries
    // beyond the probes' own (another client's may be among them).
    ...((): CheckCase[] => {
      const dropB2 = {editDump: {'node-b': forwardDropOnB('10.244.2.11')}}
      /** node-a's probes as the kernel's entries say: those to web-b2 through the ClusterIP replied `replied` times of 3. */
      const kernelOnA = (replied: number, otherReplies: number) =>
        probed(
          dropB2,
          {
            'node-a 10.244.2.11:8080': [0, 0, 3],
            'node-a 10.96.10.10:80': [5 + replied, 0, 3 - replied],
            'node-a 10.200.0.11:30080': [6, 0, 2],
          },
          undefined,
          {'node-a': droppedB2FromA(replied, otherReplies)},
        )
      const cases: Array<[replied: number, others: number, disagrees: boolean, name: string]> = [
        [0, 0, false, "node-a's probes to it unanswered, no other traffic: the drop alone"],
        [1, 0, true, "yet one of node-a's probes to it got a reply, no other traffic: the kernel disagrees"],
        [
          0,
          2,
          false,
          "2 replies from it, 2 entries beyond the probes' (another client's): they may all be the other's, the drop alone",
        ],
        [
          1,
          2,
          true,
          "3 replies from it, 2 entries beyond the probes': they outnumber the others', the kernel disagrees",
        ],
      ]
      return cases.map(([replied, others, disagrees, name]) => ({
        name: `node-b's FORWARD drops web-b2; ${name}`,
        state: dropB2,
        options: kernelOnA(replied, others),
        findings: [
          ['KPD-FILTER-DROP', 'node-b', 'error'],
          ...(disagrees ? [['KPD-KERNEL-DISAGREES', 'node-a', 'error'] satisfies CheckCase['findings'][number]] : []),
        ],
      }))
    })(),
    {
      name: 'conntrack not readable on node-a: nothing confirmed, no finding',
      state: {},
      options: probed({}, {}, undefined, {'node-a': {read: false, reason: 'no conntrack tool on the node'}}),
      findings: [],
    },
  ])
})
