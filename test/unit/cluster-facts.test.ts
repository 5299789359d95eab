import {test} from 'node:test'
import assert from 'node:assert/strict'
import type {V1ConfigMap, V1Service} from '@kubernetes/client-node'
import {chooseClusterDomain, zoneFromCorefile} from '../../src/cluster/cluster-domain.js'
import {parseKubeProxyConfig} from '../../src/cluster/kube-proxy-config.js'
import {readClusterState} from '../../src/cluster/read-cluster.js'
import type {ClusterSource} from '../../src/cluster/cluster-source.js'

const KUBEADM_COREFILE = `.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf
    cache 30
}
`

test('cluster domain: the first forward zone of the Corefile kubernetes plugin', () => {
  const cases: [string, string | undefined][] = [
    [KUBEADM_COREFILE, 'cluster.local'],
    [KUBEADM_COREFILE.replace('kubernetes cluster.local', 'kubernetes corp.example.'), 'corp.example'],
    [
      KUBEADM_COREFILE.replace('kubernetes cluster.local in-addr.arpa', 'kubernetes in-addr.arpa Prod.Internal'),
      'prod.internal',
    ],
    ['.:53 {\n    # kubernetes old.local\n    kubernetes in-addr.arpa ip6.arpa\n}\n', undefined],
    ['.:53 {\n    forward . 8.8.8.8\n}\n', undefined],
    ['kubernetes bad_zone!.local {\n}\n', undefined],
    ['', undefined],
  ]
  for (const [corefile, expected] of cases) assert.equal(zoneFromCorefile(corefile), expected, corefile)
})

test('cluster domain: --cluster-domain wins, then CoreDNS, else the default said as assumed', () => {
  const cm: V1ConfigMap = {
    metadata: {name: 'coredns', namespace: 'kube-system'},
    data: {Corefile: KUBEADM_COREFILE.replace('cluster.local', 'k8s.lan')},
  }
  assert.deepEqual(chooseClusterDomain('Override.Example.', cm), {
    domain: 'override.example',
    source: '--cluster-domain',
  })
  assert.deepEqual(chooseClusterDomain(undefined, cm), {
    domain: 'k8s.lan',
    source: 'the kubernetes zone in ConfigMap kube-system/coredns',
  })
  assert.deepEqual(chooseClusterDomain(undefined, undefined), {
    domain: 'cluster.local',
    source: 'assumed, the Kubernetes default (no CoreDNS ConfigMap in kube-system)',
  })
  assert.deepEqual(chooseClusterDomain(undefined, {data: {}}), {
    domain: 'cluster.local',
    source: 'assumed, the Kubernetes default (its Corefile has no kubernetes zone)',
  })
})

test('kube-proxy configuration: read with a YAML loader (flow style, quotes, comments), garbage gives defaults with the reason', () => {
  const flow = parseKubeProxyConfig(
    'kind: KubeProxyConfiguration\nmode: "ipvs" # comment\nclusterCIDR: 10.244.0.0/16\niptables: {masqueradeBit: 15, masqueradeAll: true}\nipvs:\n  scheduler: lc\n  strictARP: true\n',
    'cm',
  )
  assert.deepEqual(flow, {
    mode: 'ipvs',
    clusterCIDR: '10.244.0.0/16',
    masqueradeBit: 15,
    masqueradeAll: true,
    localhostNodePorts: true,
    ipvsScheduler: 'lc',
    ipvsStrictARP: true,
    source: 'cm',
  })
  assert.deepEqual(parseKubeProxyConfig('iptables:\n  masqueradeBit: 99\n', 'cm'), {
    mode: '',
    masqueradeBit: 14,
    masqueradeAll: false,
    localhostNodePorts: true,
    source: 'cm',
  })
  // Localhost NodePorts: on by default; off by iptables.localhostNodePorts or nodePortAddresses without 127.0.0.0/8.
  const localhost = (yaml: string) => parseKubeProxyConfig(yaml, 'cm').localhostNodePorts
  assert.deepEqual(
    [
      '',
      'iptables: {localhostNodePorts: false}\n',
      'nodePortAddresses: []\n',
      'nodePortAddresses: [127.0.0.0/8]\n',
      'nodePortAddresses: [10.0.0.0/8]\n',
      'nodePortAddresses: [primary]\n',
      'nodePortAddresses: [10.0.0.0/8, 127.0.0.1/32]\n',
    ].map(localhost),
    [true, false, true, true, false, false, true],
  )
  const broken = parseKubeProxyConfig('mode: [unclosed\n', 'cm')
  assert.equal(broken.mode, '')
  assert.match(broken.source, /^defaults \(cm is not valid YAML: /)
  assert.match(parseKubeProxyConfig('- a\n- b\n', 'cm').source, /^defaults \(cm is not a KubeProxyConfiguration\)$/)
})

test('cluster reads: a 403 on kube-system Pods is recorded as unread with the reason, the domain comes from CoreDNS', async () => {
  const service: V1Service = {metadata: {name: 'web', namespace: 'shop'}, spec: {clusterIP: '10.96.10.10'}}
  const source: ClusterSource = {
    describe: () => 'fake',
    getService: async (ns, name) => (ns === 'shop' && name === 'web' ? service : undefined),
    listServices: async () => [service],
    listEndpointSlices: async () => [],
    listNamespaceEndpointSlices: async () => [],
    getEndpoints: async () => undefined,
    listPods: async (ns) => {
      if (ns === 'kube-system') throw new Error('RBAC forbids list pods in namespace "kube-system" (403): forbidden')
      return []
    },
    listNodes: async () => [],
    listNetworkPolicies: async () => [],
    listNamespaces: async () => [],
    listCustomObjects: async () => 'not-served',
    getConfigMap: async (ns, name) =>
      ns === 'kube-system' && name === 'coredns'
        ? {metadata: {name, namespace: ns}, data: {Corefile: KUBEADM_COREFILE.replace('cluster.local', 'k8s.lan')}}
        : undefined,
  }
  const state = await readClusterState(source, 'shop', 'web')
  assert.deepEqual(state.unread, [
    {
      what: 'kube-proxy Pods (kube-system)',
      reason: 'RBAC forbids list pods in namespace "kube-system" (403): forbidden',
    },
  ])
  assert.equal(state.clusterDomain, 'k8s.lan')
  assert.equal(state.clusterDomainSource, 'the kubernetes zone in ConfigMap kube-system/coredns')
  assert.equal((await readClusterState(source, 'shop', 'web', {clusterDomain: 'x.example'})).clusterDomain, 'x.example')
})

test('cluster reads: the nodes and the Service’s EndpointSlices are told (onNodesKnown) while the rest of the API is still read; a failed node list tells nothing', async () => {
  const service: V1Service = {metadata: {name: 'web', namespace: 'shop'}, spec: {clusterIP: '10.96.10.10'}}
  const slice = {addressType: 'IPv4', endpoints: [{addresses: ['10.244.1.10'], nodeName: 'node-a'}]}
  const node = {metadata: {name: 'node-a'}}
  let releaseConfigMaps = () => undefined as void
  const configMapsHeld = new Promise<void>((resolve) => (releaseConfigMaps = resolve))
  const told: string[] = []
  const source = (nodes: () => Promise<unknown[]>): ClusterSource => ({
    describe: () => 'fake',
    getService: async (ns, name) => (ns === 'shop' && name === 'web' ? service : undefined),
    listServices: async () => [service],
    listEndpointSlices: async () => [slice] as never,
    listNamespaceEndpointSlices: async () => [],
    getEndpoints: async () => undefined,
    listPods: async () => [],
    listNodes: nodes as never,
    listNetworkPolicies: async () => [],
    listNamespaces: async () => [],
    listCustomObjects: async () => 'not-served',
    // The ConfigMaps answer only once the nodes were told: the read could not end before.
    getConfigMap: async () => {
      await configMapsHeld
      return undefined
    },
  })
  const state = await readClusterState(
    source(async () => [node]),
    'shop',
    'web',
    {
      onNodesKnown: (nodes, slices) => {
        told.push(
          `${nodes.map((n) => n.metadata?.name).join()} ${slices.flatMap((s) => s.endpoints.map((e) => e.nodeName)).join()}`,
        )
        releaseConfigMaps()
      },
    },
  )
  assert.deepEqual(told, ['node-a node-a'])
  assert.equal(state.nodes.length, 1)
  await assert.rejects(
    readClusterState(
      source(() => Promise.reject(new Error('nodes is forbidden'))),
      'shop',
      'web',
      {onNodesKnown: () => told.push('told')},
    ),
    /nodes is forbidden/,
  )
  assert.deepEqual(told, ['node-a node-a'])
})
