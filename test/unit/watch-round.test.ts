/**
 * svc --watch: what one round reads again. The decision as a table (why the round runs × what changed × the interval's
 * full refresh × how the round before left the node → the API's reads and the node's), the --verbose line that says
 * it, and the two sources a round reads the API through: the watch's store over a memo of the objects not watched.
 */
import assert from 'node:assert/strict'
import {test} from 'node:test'
import type {V1Pod} from '@kubernetes/client-node'
import {
  apiRead,
  describeRound,
  nodeRead,
  type ApiRead,
  type NodeBefore,
  type NodeRead,
  type RoundInput,
  type RoundTrigger,
  type WatchedChange,
} from '../../src/diagnosis/watch-round.js'
import {CachedClusterSource} from '../../src/cluster/cached-source.js'
import {WatchCacheSource} from '../../src/cluster/watch-cache-source.js'
import {WatchStore, type WatchTarget} from '../../src/cluster/watch-objects.js'
import type {ClusterSource} from '../../src/cluster/cluster-source.js'

const slice: WatchedChange = {role: 'endpointslice', name: 'web-abc12', node: null}
const service: WatchedChange = {role: 'service', name: 'web', node: null}
const pod: WatchedChange = {role: 'pod', name: 'web-b2', node: 'node-b'}
const proxyB: WatchedChange = {role: 'proxy-pod', name: 'kube-proxy-b', node: 'node-b'}
const proxyRelisted: WatchedChange = {role: 'proxy-pod', name: null, node: null}

type Row = [
  trigger: RoundTrigger,
  changes: WatchedChange[],
  fullRefresh: boolean,
  probes: boolean,
  api: ApiRead,
  /** node-a and node-b read the round before; node-a's read: */
  nodeA: NodeRead,
  nodeB: NodeRead,
  /** a node whose read failed the round before, and one not read then (new in the selection): */
  failed: NodeRead,
  absent: NodeRead,
]

// prettier-ignore
const TABLE: Row[] = [
  // why            what changed             full   probes  API                        node-a   node-b   failed  absent
  ['first',        [],                       false, false, 'list',                    'full',  'full',  'full', 'full'],
  ['interval',     [],                       false, false, 'store',                   'rules', 'rules', 'full', 'full'],
  ['interval',     [],                       true,  false, 'store, the rest again',   'full',  'full',  'full', 'full'],
  ['change',       [slice],                  false, false, 'store',                   'rules', 'rules', 'full', 'full'],
  ['change',       [service],                false, false, 'store, the rest again',   'rules', 'rules', 'full', 'full'],
  ['change',       [pod],                    false, false, 'store',                   'kept',  'kept',  'full', 'full'],
  ['change',       [pod],                    false, true,  'store',                   'rules', 'rules', 'full', 'full'],
  ['change',       [pod, slice],             false, false, 'store',                   'rules', 'rules', 'full', 'full'],
  ['change',       [proxyB],                 false, false, 'store, the rest again',   'kept',  'full',  'full', 'full'],
  ['change',       [proxyB, slice],          false, false, 'store, the rest again',   'rules', 'full',  'full', 'full'],
  ['change',       [proxyRelisted],          false, false, 'store, the rest again',   'full',  'full',  'full', 'full'],
  ['settle',       [],                       false, false, 'store',                   'rules', 'rules', 'full', 'full'],
]

test('what a round reads: the API and each node, by why it runs, what changed and how the node was left', () => {
  for (const [trigger, changes, fullRefresh, probes, api, nodeA, nodeB, failed, absent] of TABLE) {
    const round: RoundInput = {trigger, changes, fullRefresh, probes}
    const label = `${trigger} ${changes.map((c) => `${c.role}:${c.name}`).join('+')}${fullRefresh ? ' full' : ''}${probes ? ' probes' : ''}`
    const before = (n: NodeBefore, node: string) => nodeRead(round, node, n)
    assert.deepEqual(
      [
        apiRead(round),
        before('read', 'node-a'),
        before('read', 'node-b'),
        before('failed', 'node-c'),
        before('absent', 'node-d'),
      ],
      [api, nodeA, nodeB, failed, absent],
      label,
    )
  }
})

test('--verbose says per round what was read', () => {
  const reads = (entries: Array<[string, NodeRead]>) => new Map(entries)
  assert.equal(
    describeRound(
      3,
      {trigger: 'change', changes: [slice, slice], fullRefresh: false, probes: false},
      reads([
        ['node-a', 'rules'],
        ['node-b', 'rules'],
      ]),
    ),
    "round 3: API from the watch's store, the rest kept (EndpointSlice web-abc12 changed); nodes: rules of node-a, node-b; other reads kept",
  )
  assert.equal(
    describeRound(
      4,
      {trigger: 'change', changes: [proxyB, pod], fullRefresh: false, probes: false},
      reads([
        ['node-a', 'kept'],
        ['node-b', 'full'],
      ]),
    ),
    "round 4: API from the watch's store, the rest read again (Pod kube-proxy-b, Pod web-b2 changed); nodes: all of node-b; nothing of node-a; other reads kept",
  )
  assert.equal(
    describeRound(9, {trigger: 'interval', changes: [], fullRefresh: true, probes: false}, reads([['node-a', 'full']])),
    "round 9: API from the watch's store, the rest read again (--watch-interval, full refresh); nodes: all of node-a",
  )
  assert.equal(
    describeRound(1, {trigger: 'first', changes: [], fullRefresh: false, probes: false}, reads([])),
    'round 1: API listed (first diagnosis); nodes: none',
  )
})

/** A source that counts its calls; every answer is made up from the question. */
function countingSource(pods: V1Pod[]): {source: ClusterSource; calls: string[]} {
  const calls: string[] = []
  const answer = (name: string, value: unknown) => {
    calls.push(name)
    return Promise.resolve(value)
  }
  const source = {
    describe: () => 'test',
    getService: (ns: string, name: string) =>
      answer(`getService ${ns}/${name}`, {metadata: {name, namespace: ns, uid: 'listed'}}),
    listServices: () => answer('listServices', []),
    listEndpointSlices: (ns: string, svc: string) => answer(`listEndpointSlices ${ns}/${svc}`, []),
    listNamespaceEndpointSlices: () => answer('listNamespaceEndpointSlices', []),
    getEndpoints: () => answer('getEndpoints', undefined),
    listPods: (ns: string) => answer(`listPods ${ns}`, pods),
    listNodes: () => answer('listNodes', []),
    getConfigMap: (ns: string, name: string) => answer(`getConfigMap ${ns}/${name}`, undefined),
    listNetworkPolicies: () => answer('listNetworkPolicies', []),
    listNamespaces: () => answer('listNamespaces', []),
  } as unknown as ClusterSource
  return {source, calls}
}

const podOf = (name: string, labels: Record<string, string>, phase = 'Running'): V1Pod => ({
  metadata: {name, namespace: 'shop', labels},
  status: {phase},
})

test('the memo asks its source once per question until it is replaced; a failed question is asked again', async () => {
  const {source, calls} = countingSource([])
  const memo = new CachedClusterSource(source, {lookups: 'as asked', failures: 'forgotten'})
  await memo.listNodes()
  await memo.listNodes()
  await memo.getConfigMap('kube-system', 'kube-proxy')
  await memo.getConfigMap('kube-system', 'coredns')
  await memo.getConfigMap('kube-system', 'kube-proxy')
  assert.deepEqual(calls, ['listNodes', 'getConfigMap kube-system/kube-proxy', 'getConfigMap kube-system/coredns'])
  let fail = true
  const flaky = new CachedClusterSource(
    {
      ...source,
      listNodes: () => (fail ? Promise.reject(new Error('timeout')) : Promise.resolve([])),
    } as ClusterSource,
    {lookups: 'as asked', failures: 'forgotten'},
  )
  await assert.rejects(flaky.listNodes(), /timeout/)
  fail = false
  assert.deepEqual(await flaky.listNodes(), [])
})

test("the watch's store answers the Service, its EndpointSlices and the Pods it watches; the rest is asked", async () => {
  const targets: WatchTarget[] = [
    {resource: 'services', namespace: 'shop', fieldSelector: 'metadata.name=web'},
    {resource: 'endpointslices', namespace: 'shop', labelSelector: 'kubernetes.io/service-name=web'},
    {resource: 'pods', namespace: 'shop', labelSelector: 'app=web'},
  ]
  const store = new WatchStore()
  const listed = [podOf('client', {app: 'client'}), podOf('web-1', {app: 'web'}), podOf('web-2', {app: 'web'})]
  const {source, calls} = countingSource(listed)
  const cache = new WatchCacheSource(store, targets, source)
  // Not listed by the watches yet: everything is asked.
  assert.equal((await cache.getService('shop', 'web'))?.metadata?.uid, 'listed')
  store.replace(targets[0], [{metadata: {name: 'web', namespace: 'shop', resourceVersion: '7'}}])
  store.replace(targets[1], [{metadata: {name: 'web-abc12', namespace: 'shop'}}])
  store.replace(targets[2], [podOf('web-1', {app: 'web'}), podOf('web-2', {app: 'web'})] as never)
  store.apply(targets[2], 'MODIFIED', podOf('web-2', {app: 'web'}, 'Pending') as never)
  store.apply(targets[2], 'DELETED', podOf('web-1', {app: 'web'}) as never)
  store.apply(targets[2], 'ADDED', podOf('web-3', {app: 'web'}) as never)
  calls.length = 0
  assert.equal((await cache.getService('shop', 'web'))?.metadata?.resourceVersion, '7')
  // Another Service (the DNS Service) is not watched: asked.
  assert.equal((await cache.getService('kube-system', 'kube-dns'))?.metadata?.uid, 'listed')
  assert.deepEqual(
    (await cache.listEndpointSlices('shop', 'web'))?.map((s) => s.metadata?.name),
    ['web-abc12'],
  )
  // The watched Pods as they are now (web-1 gone, web-2 Pending, web-3 new), the others as listed.
  assert.deepEqual(
    (await cache.listPods('shop')).map((p) => `${p.metadata?.name} ${p.status?.phase}`),
    ['client Running', 'web-2 Pending', 'web-3 Running'],
  )
  await cache.listNodes()
  await cache.listEndpointSlices('shop', 'other')
  assert.deepEqual(calls, [
    'getService kube-system/kube-dns',
    'listPods shop',
    'listNodes',
    'listEndpointSlices shop/other',
  ])
})
