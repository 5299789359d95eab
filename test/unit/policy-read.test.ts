import assert from 'node:assert/strict'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {test} from 'node:test'
import type {V1NetworkPolicy, V1Pod, V1Service} from '@kubernetes/client-node'
import type {ClusterSource} from '../../src/cluster/cluster-source.js'
import {readClusterState} from '../../src/cluster/read-cluster.js'
import {SnapshotClusterSource} from '../../src/cluster/snapshot-source.js'
import {parseClientFlags} from '../../src/cli/flags.js'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {offlineCluster} from '../helpers/offline-cluster.js'

const service: V1Service = {metadata: {name: 'web', namespace: 'shop'}, spec: {clusterIP: '10.96.10.10'}}
const curl: V1Pod = {metadata: {name: 'curl', namespace: 'client', labels: {app: 'curl'}}}
const byNamespace: V1NetworkPolicy = {
  metadata: {namespace: 'shop', name: 'from-blue'},
  spec: {podSelector: {}, ingress: [{_from: [{namespaceSelector: {matchLabels: {team: 'blue'}}}]}]},
}

/** A cluster source answering from memory; `policies` throws to play a 403, undefined plays "not served". */
function source(policies: (ns: string) => V1NetworkPolicy[] | undefined, calls: string[] = []): ClusterSource {
  return {
    describe: () => 'fake',
    getService: async (ns, name) => (ns === 'shop' && name === 'web' ? service : undefined),
    listServices: async () => [service],
    listEndpointSlices: async () => [],
    listNamespaceEndpointSlices: async () => [],
    getEndpoints: async () => undefined,
    listPods: async (ns) => (ns === 'client' ? [curl] : []),
    listNodes: async () => [],
    listNetworkPolicies: async (ns) => {
      calls.push(`networkpolicies ${ns}`)
      return policies(ns)
    },
    listNamespaces: async () => {
      calls.push('namespaces')
      return [{metadata: {name: 'client', labels: {team: 'blue'}}}, {metadata: {name: 'shop'}}]
    },
    getConfigMap: async () => undefined,
    listCustomObjects: async () => 'not-served',
  }
}

test('policies: read in the Service namespace and the client one; Namespaces only when a policy selects by them', async () => {
  const calls: string[] = []
  const state = await readClusterState(
    source((ns) => (ns === 'shop' ? [byNamespace] : []), calls),
    'shop',
    'web',
    {policy: {pod: {namespace: 'client', name: 'curl'}}},
  )
  assert.deepEqual(calls, ['networkpolicies shop', 'networkpolicies client', 'namespaces'])
  assert.equal(state.policy?.clientPod, curl)
  assert.deepEqual(state.policy?.namespaceLabels, {
    client: {'kubernetes.io/metadata.name': 'client', team: 'blue'},
    shop: {'kubernetes.io/metadata.name': 'shop'},
  })
  const plain: string[] = []
  await readClusterState(
    source(() => [], plain),
    'shop',
    'web',
    {policy: {}},
  )
  assert.deepEqual(plain, ['networkpolicies shop'])
  const scan: string[] = []
  assert.equal(
    (
      await readClusterState(
        source(() => [], scan),
        'shop',
        'web',
      )
    ).policy,
    undefined,
  )
  assert.deepEqual(scan, [], 'a scan reads no policy')
})

test('policies: a 403 is a required gap, an API group not served is not required, a missing --from Pod is an error', async () => {
  const forbidden = await readClusterState(
    source(() => {
      throw new Error('RBAC forbids list networkpolicies.networking.k8s.io in namespace "shop" (403): forbidden')
    }),
    'shop',
    'web',
    {policy: {}},
  )
  assert.deepEqual(forbidden.policy?.unread, {
    reason: 'RBAC forbids list networkpolicies.networking.k8s.io in namespace "shop" (403): forbidden',
    required: true,
  })
  const {cluster, observations} = offlineCluster()
  cluster.policy = forbidden.policy
  const gaps = diagnose(cluster, observations).notChecked.filter((n) => n.check === 'network-policy')
  assert.deepEqual(gaps, [
    {
      node: null,
      check: 'network-policy',
      codes: [
        'KPD-POLICY-DENIES',
        'KPD-POLICY-SERVICE-PORT',
        'KPD-POLICY-EGRESS-DENIES',
        'KPD-POLICY-DNS-EGRESS',
        'KPD-POLICY-DATAPLANE-DISAGREES',
        'KPD-ANP-DENIES',
        'KPD-BANP-DENIES',
        'KPD-ANP-SAME-PRIORITY',
        'KPD-ANP-ALLOWS',
      ],
      reason:
        'NetworkPolicies not read: RBAC forbids list networkpolicies.networking.k8s.io in namespace "shop" (403): forbidden',
      required: true,
    },
  ])
  const notServed = await readClusterState(
    source(() => undefined),
    'shop',
    'web',
    {policy: {}},
  )
  assert.equal(notServed.policy?.unread?.required, false)
  await assert.rejects(
    readClusterState(
      source(() => []),
      'shop',
      'web',
      {policy: {pod: {namespace: 'client', name: 'nope'}}},
    ),
    {message: '--from: Pod "client/nope" not found (fake)'},
  )
})

test('policies in a bundle: "from" as kubectl writes it is read; a bundle without the file is "not recorded"', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpd-policy-'))
  try {
    const list = (items: unknown[]) => JSON.stringify({apiVersion: 'v1', kind: 'List', items})
    writeFileSync(join(dir, 'services.json'), list([service]))
    const snapshot = new SnapshotClusterSource(dir)
    assert.equal(await snapshot.listNetworkPolicies('shop'), undefined)
    assert.equal(await snapshot.listNamespaces(), undefined)
    writeFileSync(
      join(dir, 'networkpolicies.json'),
      list([
        {metadata: {namespace: 'shop', name: 'p'}, spec: {podSelector: {}, ingress: [{from: [{podSelector: {}}]}]}},
      ]),
    )
    const again = new SnapshotClusterSource(dir)
    assert.deepEqual(
      (await again.listNetworkPolicies('shop'))?.map((p) => p.metadata?.name),
      ['p'],
    )
    assert.deepEqual(await again.listNetworkPolicies('other'), [])
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})

test('--from and --from-namespace: names checked, one clear error', () => {
  assert.equal(parseClientFlags({}), undefined)
  assert.deepEqual(parseClientFlags({from: 'client/curl'}), {pod: {namespace: 'client', name: 'curl'}})
  assert.deepEqual(parseClientFlags({from: 'curl', 'from-namespace': 'client'}), {
    pod: {name: 'curl'},
    namespace: 'client',
  })
  assert.throws(() => parseClientFlags({from: 'a/b/c'}), {message: '--from "a/b/c": write POD or NAMESPACE/POD'})
  assert.throws(() => parseClientFlags({'from-namespace': 'Bad_NS'}), {
    message: `--from-namespace "Bad_NS": not a namespace name (lower-case letters, digits, '-' and '.')`,
  })
})
