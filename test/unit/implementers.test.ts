import assert from 'node:assert/strict'
import {describe, test} from 'node:test'
import type {V1ConfigMap, V1Pod} from '@kubernetes/client-node'
import {decideImplementer, SERVICE_IMPLEMENTERS} from '../../src/model/implementers/index.js'
import type {NodeObservation} from '../../src/node/observation.js'
import {BufferSource} from '../../src/parse/dump-source.js'
import {IptablesSave} from '../../src/parse/iptables-save.js'
import {kubeProxyConfigMap, kubeProxyPodObject} from '../fixtures/api-objects.js'
import {
  antreaAgentPod,
  antreaConfigMap,
  calicoNodePod,
  ciliumAgentPod,
  ciliumConfigMap,
  ciliumNodeDump,
  cniOnlyDump,
  felixConfiguration,
  kubeRouterPod,
  ovnkubeNodePod,
} from '../fixtures/implementers.js'
import {offlineCluster} from '../helpers/offline-cluster.js'

interface DetectionCase {
  name: string
  /** The implementers' API objects as read (none: read, nothing found). */
  pods?: unknown[]
  configMaps?: unknown[]
  /** Calico's FelixConfigurations as read (undefined: not read, or not asked for). */
  felix?: unknown[]
  /** API reads that could not be made (cluster.unread). */
  unread?: Array<{what: string; reason: string}>
  /** kube-proxy's own API objects: its Pod on node-a, its ConfigMap. */
  kubeProxyPod?: boolean
  kubeProxyConfig?: boolean
  /** node-a's iptables dump: undefined when the node was not read (API objects alone). */
  dump?: string
  /** The lab's kube-proxy rules for node-a. */
  labRules?: boolean
  /** The other read nodes (node-b) have the lab's kube-proxy rules. */
  peerRules?: boolean
  expected: {name: string; source: string; active: string[]; kubeProxyJudged: boolean; evidence: RegExp}
}

const NODE = 'node-a'

function decide(c: DetectionCase) {
  const {cluster, observations} = offlineCluster()
  cluster.implementerObjects = {
    pods: (c.pods ?? []) as V1Pod[],
    configMaps: (c.configMaps ?? []) as V1ConfigMap[],
    ...(c.felix ? {customObjects: {FelixConfiguration: c.felix}} : {}),
  }
  cluster.unread = c.unread ?? []
  cluster.kubeProxyPods = c.kubeProxyPod ? [kubeProxyPodObject(NODE, true) as unknown as V1Pod] : []
  if (c.kubeProxyConfig) cluster.proxyConfigMap = kubeProxyConfigMap() as unknown as V1ConfigMap
  const lab = observations.find((o) => o.name === NODE)!
  const obs: NodeObservation | undefined = c.labRules
    ? lab
    : c.dump !== undefined
      ? {name: NODE, reachable: true, iptables: IptablesSave.parse(new BufferSource(Buffer.from(c.dump)))}
      : undefined
  const peers = c.peerRules ? observations.filter((o) => o.name !== NODE) : []
  return decideImplementer(cluster, NODE, obs, peers)
}

const only = (name: string, source: string, evidence: RegExp) => ({
  name,
  source,
  active: [name],
  kubeProxyJudged: name === 'kube-proxy',
  evidence,
})

const FROM_API: DetectionCase[] = [
  {
    name: 'kube-proxy: its Pod on the node',
    kubeProxyPod: true,
    expected: only('kube-proxy', 'api', /kube-proxy's Pod kube-system\/kube-proxy-ax7k2 runs on node-a/),
  },
  {
    name: 'Cilium: agent on the node, kube-proxy-replacement true',
    pods: [ciliumAgentPod(NODE)],
    configMaps: [ciliumConfigMap('true')],
    expected: only('cilium', 'api', /cilium-config has kube-proxy-replacement: true/),
  },
  {
    name: 'Cilium: kube-proxy-replacement strict',
    pods: [ciliumAgentPod(NODE)],
    configMaps: [ciliumConfigMap('strict')],
    expected: only('cilium', 'api', /kube-proxy-replacement: strict/),
  },
  {
    name: 'Calico: calico-node with FELIX_BPFENABLED=true',
    pods: [calicoNodePod(NODE, true)],
    expected: only('calico-ebpf', 'api', /calico-system\/calico-node-aq4zt runs on node-a with FELIX_BPFENABLED=true/),
  },
  {
    name: 'Calico: FELIX_BPFENABLED=yes (Felix reads yes, y, t, 1 as true)',
    pods: [calicoNodePod(NODE, 'yes')],
    expected: only(
      'calico-ebpf',
      'api',
      /^calico-node calico-system\/calico-node-aq4zt runs on node-a with FELIX_BPFENABLED=yes$/,
    ),
  },
  {
    name: 'Calico: no FELIX_BPFENABLED, FelixConfiguration default has bpfEnabled: true',
    pods: [calicoNodePod(NODE, undefined)],
    felix: [felixConfiguration('default', true)],
    expected: only(
      'calico-ebpf',
      'api',
      /^calico-node calico-system\/calico-node-aq4zt runs on node-a and FelixConfiguration default \(crd\.projectcalico\.org\/v1\) has bpfEnabled: true$/,
    ),
  },
  {
    name: "Calico: the node's FelixConfiguration (node.node-a) turns it on over default's false",
    pods: [calicoNodePod(NODE, undefined)],
    felix: [
      felixConfiguration('default', false),
      felixConfiguration('node.node-b', false),
      felixConfiguration(`node.${NODE}`, true),
    ],
    expected: only(
      'calico-ebpf',
      'api',
      /^calico-node calico-system\/calico-node-aq4zt runs on node-a and FelixConfiguration node\.node-a \(crd\.projectcalico\.org\/v1\) has bpfEnabled: true$/,
    ),
  },
  {
    name: "Calico: the node's FelixConfiguration without bpfEnabled leaves default's true",
    pods: [calicoNodePod(NODE, undefined)],
    felix: [felixConfiguration(`node.${NODE}`, undefined), felixConfiguration('default', true, 'projectcalico.org/v3')],
    expected: only(
      'calico-ebpf',
      'api',
      /^calico-node calico-system\/calico-node-aq4zt runs on node-a and FelixConfiguration default \(projectcalico\.org\/v3\) has bpfEnabled: true$/,
    ),
  },
  {
    name: "Calico: FELIX_BPFENABLED=true wins over FelixConfiguration default's bpfEnabled: false",
    pods: [calicoNodePod(NODE, true)],
    felix: [felixConfiguration('default', false)],
    expected: only(
      'calico-ebpf',
      'api',
      /^calico-node calico-system\/calico-node-aq4zt runs on node-a with FELIX_BPFENABLED=true \(FelixConfiguration default has bpfEnabled: false; the environment wins, as Felix reads it first\)$/,
    ),
  },
  {
    name: 'Calico: FelixConfigurations forbidden (403), no FELIX_BPFENABLED: kube-proxy assumed, the gap said',
    pods: [calicoNodePod(NODE, undefined)],
    unread: [
      {
        what: 'FelixConfigurations (crd.projectcalico.org/v1, projectcalico.org/v3)',
        reason: 'RBAC forbids list felixconfigurations.crd.projectcalico.org (403): forbidden',
      },
    ],
    expected: {
      name: 'kube-proxy',
      source: 'assumed',
      active: [],
      kubeProxyJudged: true,
      evidence:
        /^no other implementer was found, but the API could not tell all: FelixConfigurations \(crd\.projectcalico\.org\/v1, projectcalico\.org\/v3\) not read$/,
    },
  },
  {
    name: 'Calico: FelixConfigurations forbidden, but FELIX_BPFENABLED=true decides (the environment comes first)',
    pods: [calicoNodePod(NODE, true)],
    unread: [{what: 'FelixConfigurations (crd.projectcalico.org/v1, projectcalico.org/v3)', reason: 'forbidden'}],
    expected: only(
      'calico-ebpf',
      'api',
      /^calico-node calico-system\/calico-node-aq4zt runs on node-a with FELIX_BPFENABLED=true$/,
    ),
  },
  {
    name: 'kube-router: service proxy on by default',
    pods: [kubeRouterPod(NODE, ['--run-router=true', '--run-firewall=true'])],
    expected: only('kube-router', 'api', /kube-router-aq4zt runs on node-a with its service proxy/),
  },
  {
    name: 'kube-router: --run-service-proxy=true',
    pods: [kubeRouterPod(NODE, ['--run-service-proxy=true'])],
    expected: only('kube-router', 'api', /service proxy/),
  },
  {
    name: 'kube-router: --run-service-proxy=false beside kube-proxy: kube-proxy remains the implementer',
    pods: [kubeRouterPod(NODE, ['--run-router=true', '--run-service-proxy=false'])],
    kubeProxyPod: true,
    expected: only('kube-proxy', 'api', /kube-proxy's Pod kube-system\/kube-proxy-ax7k2 runs on node-a/),
  },
  {
    name: 'kube-router: --run-service-proxy true (a separate word), the last of two flags wins',
    pods: [kubeRouterPod(NODE, ['--run-service-proxy=false', '--run-service-proxy', 'true'])],
    kubeProxyPod: true,
    expected: {
      name: 'kube-router',
      source: 'api',
      active: ['kube-proxy', 'kube-router'],
      kubeProxyJudged: true,
      evidence: /kube-router-aq4zt runs on node-a with its service proxy/,
    },
  },
  {
    name: 'Antrea: antrea-agent with antreaProxy.proxyAll true',
    pods: [antreaAgentPod(NODE)],
    configMaps: [antreaConfigMap(true)],
    expected: only('antrea', 'api', /antrea-agent\.conf has antreaProxy\.proxyAll: true/),
  },
  {
    name: 'OVN-Kubernetes: ovnkube-node on the node',
    pods: [ovnkubeNodePod(NODE)],
    expected: only('ovn-kubernetes', 'api', /ovnkube-node ovn-kubernetes\/ovnkube-node-aq4zt runs on node-a/),
  },
  {
    name: 'nothing on the node, but kube-proxy configured: kube-proxy assumed',
    kubeProxyConfig: true,
    expected: {
      name: 'kube-proxy',
      source: 'assumed',
      active: [],
      kubeProxyJudged: true,
      evidence: /ConfigMap kube-system\/kube-proxy/,
    },
  },
  ...(
    [
      ['Cilium without kube-proxy-replacement (a CNI only)', [ciliumAgentPod(NODE)], [ciliumConfigMap('false')]],
      ["Cilium's replacement on, but its agent on another node", [ciliumAgentPod('node-b')], [ciliumConfigMap('true')]],
      ['calico-node with FELIX_BPFENABLED=false', [calicoNodePod(NODE, false)], []],
      ['kube-router with --run-service-proxy=false', [kubeRouterPod(NODE, ['--run-service-proxy=false'])], []],
      ['Antrea with proxyAll false', [antreaAgentPod(NODE)], [antreaConfigMap(false)]],
      ['no implementer and no kube-proxy at all', [], []],
    ] as const
  ).map(([name, pods, configMaps]): DetectionCase => ({
    name: `none: ${name}`,
    pods: [...pods],
    configMaps: [...configMaps],
    expected: {name: 'none', source: 'none', active: [], kubeProxyJudged: false, evidence: /^$/},
  })),
  ...(
    [
      [
        "FelixConfiguration node.node-a's bpfEnabled: false over default's true",
        undefined,
        [felixConfiguration(`node.${NODE}`, false), felixConfiguration('default', true)],
      ],
      [
        "FELIX_BPFENABLED=false over FelixConfiguration default's bpfEnabled: true",
        false,
        [felixConfiguration('default', true)],
      ],
      ['FelixConfiguration of another node only (node.node-b)', undefined, [felixConfiguration('node.node-b', true)]],
      ['calico-node, no FelixConfiguration CRD (not served), no FELIX_BPFENABLED', undefined, []],
      [
        'FELIX_BPFENABLED=maybe (no boolean to Felix), default without bpfEnabled',
        'maybe',
        [felixConfiguration('default', undefined)],
      ],
    ] as const
  ).map(([name, env, felix]): DetectionCase => ({
    name: `none: ${name}`,
    pods: [calicoNodePod(NODE, env)],
    felix: [...felix],
    expected: {name: 'none', source: 'none', active: [], kubeProxyJudged: false, evidence: /^$/},
  })),
]

const FROM_NODE: DetectionCase[] = [
  {
    name: "kube-proxy: the lab's kube-proxy rules",
    labRules: true,
    expected: only('kube-proxy', 'node', /kube-proxy's iptables rules are programmed on the node/),
  },
  {
    name: "Cilium: its chains, no kube-proxy's",
    dump: ciliumNodeDump(),
    expected: only('cilium', 'node', /Cilium's iptables chains \(CILIUM_FORWARD, CILIUM_INPUT, CILIUM_OUTPUT, …\)/),
  },
  {
    name: "Calico: its chains, no kube-proxy's",
    dump: cniOnlyDump('cali-FORWARD'),
    expected: only('calico-ebpf', 'node', /Calico's iptables chains \(cali-FORWARD\)/),
  },
  {
    name: "kube-router: its chains, no kube-proxy's",
    dump: cniOnlyDump('KUBE-ROUTER-FORWARD'),
    expected: only('kube-router', 'node', /kube-router's iptables chains \(KUBE-ROUTER-FORWARD\)/),
  },
  {
    name: "Antrea: its chains, no kube-proxy's",
    dump: cniOnlyDump('ANTREA-FORWARD'),
    expected: only('antrea', 'node', /Antrea's iptables chains \(ANTREA-FORWARD\)/),
  },
  {
    name: 'OVN-Kubernetes: its chains',
    dump: cniOnlyDump('OVN-KUBE-NODEPORT'),
    expected: only('ovn-kubernetes', 'node', /OVN-Kubernetes' iptables chains \(OVN-KUBE-NODEPORT\)/),
  },
  {
    name: "k3s: no kube-proxy Pod or ConfigMap, node-a's rules gone, node-b's kube-proxy rules there: kube-proxy",
    dump: cniOnlyDump('LOCAL-FIREWALL'),
    peerRules: true,
    expected: {
      name: 'kube-proxy',
      source: 'assumed',
      active: [],
      kubeProxyJudged: true,
      evidence:
        /^kube-proxy's rules are programmed on node-b \(kube-proxy runs there outside any Pod, as k3s runs it\)$/,
    },
  },
  {
    name: 'none: no rules of anyone',
    dump: cniOnlyDump('LOCAL-FIREWALL'),
    expected: {name: 'none', source: 'none', active: [], kubeProxyJudged: false, evidence: /^$/},
  },
]

const TOGETHER: DetectionCase[] = [
  {
    name: "Cilium's chains beside kube-proxy's rules: Cilium is the CNI, kube-proxy serves Services",
    dump: `${ciliumNodeDump().replace(/COMMIT\n$/, '')}:KUBE-SERVICES - [0:0]\n-A PREROUTING -j KUBE-SERVICES\nCOMMIT\n`,
    expected: only('kube-proxy', 'node', /kube-proxy's iptables rules/),
  },
  {
    name: "both: kube-proxy's rules and Cilium's replacement on the node",
    labRules: true,
    pods: [ciliumAgentPod(NODE)],
    configMaps: [ciliumConfigMap('true')],
    expected: {
      name: 'cilium',
      source: 'api',
      active: ['kube-proxy', 'cilium'],
      kubeProxyJudged: true,
      evidence: /kube-proxy-replacement: true/,
    },
  },
  {
    name: 'both sources agree: Cilium from its objects and its chains',
    dump: ciliumNodeDump(),
    pods: [ciliumAgentPod(NODE)],
    configMaps: [ciliumConfigMap('true')],
    expected: {...only('cilium', 'api+node', /kube-proxy-replacement: true.*\n?/), active: ['cilium']},
  },
]

describe('who implements Services on a node', () => {
  for (const [title, cases] of [
    ['from the API objects alone', FROM_API],
    ['from the node state alone', FROM_NODE],
    ['from both', TOGETHER],
  ] as const)
    describe(title, () => {
      for (const c of cases)
        test(c.name, () => {
          const got = decide(c)
          assert.deepEqual(
            {name: got.name, source: got.source, active: got.active.map((a) => a.name), judged: got.kubeProxyJudged},
            {
              name: c.expected.name,
              source: c.expected.source,
              active: c.expected.active,
              judged: c.expected.kubeProxyJudged,
            },
          )
          assert.match(got.evidence.join('\n'), c.expected.evidence)
          assert.equal(
            got.look !== null,
            !['kube-proxy', 'none'].includes(got.name),
            'a look where another implementer serves',
          )
        })
    })

  test("a node's reads decide once, and again when they are replaced (a scan asks for every Service)", () => {
    const {cluster} = offlineCluster()
    cluster.implementerObjects = {pods: [], configMaps: []}
    cluster.kubeProxyPods = []
    const dump = (text: string) => IptablesSave.parse(new BufferSource(Buffer.from(text)))
    const obs: NodeObservation = {name: NODE, reachable: true, iptables: dump(ciliumNodeDump())}
    assert.equal(decideImplementer(cluster, NODE, obs).name, 'cilium')
    assert.equal(decideImplementer(cluster, NODE, obs).name, 'cilium', 'the same reads, the same decision')
    obs.iptables = dump(cniOnlyDump('ANTREA-FORWARD'))
    assert.equal(
      decideImplementer(cluster, NODE, obs).name,
      'antrea',
      "the replaced dump has Antrea's chain, not Cilium's",
    )
  })

  test('every implementer of the registry is recognised from the API and from the node in the tables above', () => {
    const fromApi = new Set(FROM_API.map((c) => decide(c).name))
    const fromNode = new Set(FROM_NODE.map((c) => decide(c).name))
    for (const i of SERVICE_IMPLEMENTERS) {
      assert.ok(fromApi.has(i.name), `${i.name} from API objects`)
      assert.ok(fromNode.has(i.name), `${i.name} from node state`)
    }
  })
})
