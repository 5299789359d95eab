/**
 * svc --watch: what one round reads again. The decision as a table (why the round runs × what changed × the interval's
 * full refresh × how the round before left the node → the API's reads and the node's), the --verbose line that says
 * it, and the two sources a round reads the API through: the watch's store over a memo of the objects not watched.
 */
import assert from 'node:assert/strict'
import {test} from 'node:test'
import type {V1Pod, V1Service} from '@kubernetes/client-node'
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
import {loadKubeConfig} from '../../src/cluster/live-source.js'
import {watchLoop} from '../../src/cli/watch-loop.js'
import {watchRounds} from '../../src/cli/watch-rounds.js'
import {watchTargets} from '../../src/cli/watch-targets.js'
import {LabApiServer} from '../lab/apiserver.js'
import {podObject, serviceObject} from '../fixtures/api-objects.js'
import {labPods, WEB} from '../fixtures/lab-cluster.js'

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

/** One diagnosis as the watch test sees it: the Service as read, and its Pods (name, Ready) as the round read them. */
interface SeenRound {
  number: number
  trigger: string
  changes: string[]
  service: V1Service
  pods: string[]
}

test("a Service whose selector changes: the next round's Pods are the new selector's, the old Pods' watch is closed, the new Pods' changes start rounds", async () => {
  const api = new LabApiServer({token: 'kpd-watch-retarget'})
  await api.start()
  const pod = (name: string, app: string, ready = true) =>
    podObject({...labPods()[0], name, labels: {app}, ready, ip: `10.244.1.${name.length}`})
  const web = (app: string) => serviceObject({...WEB, selector: {app}})
  api.set('services', [web('web')])
  api.set('pods', [pod('web-1', 'web'), pod('v2-1', 'web-v2')])
  const {kc} = loadKubeConfig({kubeconfig: api.writeKubeconfig()})
  const rounds = watchRounds(kc, {timeoutMs: 5000, probes: false})
  const seen: SeenRound[] = []
  let roundSeen: (() => void) | undefined
  const nextRound = async (what: string) => {
    const before = seen.length
    const deadline = Date.now() + 10_000
    while (seen.length === before) {
      assert.ok(Date.now() < deadline, `no round came: ${what}`)
      await new Promise<void>((resolve) => {
        roundSeen = resolve
        setTimeout(resolve, 100)
      })
    }
    return seen[seen.length - 1]
  }
  const until = async (what: string, ok: () => boolean) => {
    for (const deadline = Date.now() + 10_000; !ok(); await new Promise((r) => setTimeout(r, 20)))
      assert.ok(Date.now() < deadline, what)
  }
  const targets = (s: V1Service) => watchTargets(s, {namespace: 'kube-system', selector: 'k8s-app=kube-proxy'})
  const watchesOfPods = () =>
    api.requestLog
      .filter(
        (r) =>
          r.resource === 'pods' && r.namespace === 'shop' && r.query.some(([k, v]) => k === 'watch' && v === 'true'),
      )
      .map((r) => r.query.find(([k]) => k === 'labelSelector')?.[1])
  const loop = watchLoop<SeenRound>({
    kc,
    targets: (d) => targets(d.service),
    diagnose: async (round) => {
      const {source} = rounds.start(round)
      const service = (await source!.getService('shop', 'web'))!
      const selector = service.spec?.selector ?? {}
      const pods = (await source!.listPods('shop'))
        .filter((p) => Object.entries(selector).every(([k, v]) => p.metadata?.labels?.[k] === v))
        .map((p) => `${p.metadata?.name} ${p.status?.conditions?.find((c) => c.type === 'Ready')?.status}`)
      rounds.finish({observations: [], recordings: new Map(), readVia: new Map()})
      const changes = round.changes.map((c) => `${c.role} ${c.name}`)
      return {number: round.number, trigger: round.trigger, changes, service, pods}
    },
    print: (_prev, next) => {
      seen.push(next)
      roundSeen?.()
    },
    breaks: () => false,
    settleMs: 50,
    minGapMs: 50,
    intervalMs: 600_000,
    timeoutMs: 5000,
  })
  try {
    const first = await nextRound('the first diagnosis')
    assert.deepEqual(first.pods, ['web-1 True'])
    const watching = targets(first.service).length
    await until('every target watched', () => api.openWatches === watching)
    api.set('services', [web('web-v2')])
    const changed = await nextRound('the Service changed')
    assert.deepEqual([changed.trigger, changed.changes, changed.pods], ['change', ['service web'], ['v2-1 True']])
    await until('the Pods of app=web-v2 watched', () => watchesOfPods().includes('app=web-v2'))
    await until('as many watches as before: the old Pods watch closed', () => api.openWatches === watching)
    // The old selector's Pod changes: no round; the new one's changes: a round that sees it.
    api.set('pods', [pod('web-1', 'web', false), pod('v2-1', 'web-v2')])
    await new Promise((r) => setTimeout(r, 300))
    api.set('pods', [pod('web-1', 'web', false), pod('v2-1', 'web-v2', false)])
    const podChanged = await nextRound('the new Pod changed')
    assert.deepEqual(
      [podChanged.trigger, podChanged.changes, podChanged.pods],
      ['change', ['pod v2-1'], ['v2-1 False']],
    )
    assert.deepEqual(watchesOfPods(), ['app=web', 'app=web-v2'], 'one watch each, none started again')
    process.emit('SIGINT')
    await loop
    await until('no watch left open', () => api.openWatches === 0)
    assert.equal(seen.length, 3, 'no other round')
  } finally {
    process.emit('SIGINT')
    await loop
    await api.stop()
  }
})
