/**
 * AdminNetworkPolicies and the BaselineAdminNetworkPolicy read live from the test API server (real HTTPS on loopback,
 * serving policy.networking.k8s.io/v1alpha1 as the CRDs do, or not at all), judged, written into a bundle and read back;
 * a 404 is a cluster without the CRDs (nothing said), a 403 is a gap only where discovery says the group is served.
 */
import assert from 'node:assert/strict'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {after, before, beforeEach, test} from 'node:test'
import {
  ADMIN_POLICY_RESOURCES,
  type AdminNetworkPolicy,
  type BaselineAdminNetworkPolicy,
} from '../../src/cluster/admin-policy-objects.js'
import {CachedClusterSource} from '../../src/cluster/cached-source.js'
import {loadKubeConfig, LiveClusterSource} from '../../src/cluster/live-source.js'
import {readClusterState} from '../../src/cluster/read-cluster.js'
import {customObjectsFile, SnapshotClusterSource} from '../../src/cluster/snapshot-source.js'
import type {ClusterState} from '../../src/cluster/types.js'
import {ValidatedClusterSource} from '../../src/cluster/validated-source.js'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {writeBundle} from '../../src/diagnosis/write-bundle.js'
import {policySourcesNote} from '../../src/checks/rules/policy-sources.js'
import {LabApiServer} from '../lab/apiserver.js'
import {endpointSliceObject, nodeObject, podObject, serviceObject} from '../fixtures/api-objects.js'
import {labPods, NODES, SERVICES} from '../fixtures/lab-cluster.js'
import {offlineCluster} from '../helpers/offline-cluster.js'

const TOKEN = 'kpd-anp-read'
const api = new LabApiServer({token: TOKEN})
const work = mkdtempSync(join(tmpdir(), 'kpd-anp-'))
before(() => api.start())
after(async () => {
  await api.stop()
  rmSync(work, {recursive: true, force: true})
})

const DENY_BLUE: AdminNetworkPolicy = {
  metadata: {name: 'deny-blue'},
  spec: {
    priority: 10,
    subject: {namespaces: {matchLabels: {'kubernetes.io/metadata.name': 'shop'}}},
    ingress: [{name: 'deny-from-blue', action: 'Deny', from: [{namespaces: {matchLabels: {team: 'blue'}}}]}],
  },
}
const BASELINE: BaselineAdminNetworkPolicy = {
  metadata: {name: 'default'},
  spec: {
    subject: {namespaces: {}},
    ingress: [{name: 'allow-all', action: 'Allow', from: [{namespaces: {}}]}],
  },
}
const curl = podObject({...labPods()[3], name: 'curl', namespace: 'client', ip: '10.244.1.200', labels: {app: 'curl'}})

beforeEach(() => {
  api.opts.forbidden = undefined
  api.opts.withAdminNetworkPolicies = true
  api.requestLog.length = 0
  const pods = labPods()
  api.set('nodes', NODES.map(nodeObject))
  api.set('pods', [...pods.map(podObject), curl])
  api.set('services', SERVICES.map(serviceObject))
  api.set(
    'endpointslices',
    SERVICES.map((s) => endpointSliceObject(s, pods)),
  )
  api.set('networkpolicies', [])
  api.set('namespaces', [
    {metadata: {name: 'shop', labels: {'kubernetes.io/metadata.name': 'shop'}}},
    {metadata: {name: 'client', labels: {'kubernetes.io/metadata.name': 'client', team: 'blue'}}},
    {metadata: {name: 'kube-system', labels: {'kubernetes.io/metadata.name': 'kube-system'}}},
  ])
  api.set('adminnetworkpolicies', [DENY_BLUE as never])
  api.set('baselineadminnetworkpolicies', [BASELINE as never])
})

/** shop/web read live, as svc reads it (--from client/curl). */
async function readLive(): Promise<ClusterState> {
  const {kc} = loadKubeConfig({kubeconfig: api.writeKubeconfig('shop', TOKEN)})
  const source = new ValidatedClusterSource(new CachedClusterSource(new LiveClusterSource(kc, 5000)))
  return readClusterState(source, 'shop', 'web', {policy: {pod: {namespace: 'client', name: 'curl'}}})
}

/** The lab's cluster as the offline tests build it, with the policies as read. */
function judged(policy: ClusterState['policy']) {
  const {cluster, observations} = offlineCluster({editCluster: (c) => void (c.policy = policy)})
  return diagnose(cluster, observations)
}

const adminRequests = () =>
  api.requestLog.filter((r) => r.path.includes('policy.networking.k8s.io')).map((r) => `${r.method} ${r.path}`)

test('live: both kinds listed cluster-wide through the custom objects API, judged: the ANP Deny named', async () => {
  const state = await readLive()
  assert.deepEqual(
    state.policy?.admin?.anps.map((p) => p.metadata?.name),
    ['deny-blue'],
  )
  assert.equal(state.policy?.admin?.banp?.metadata?.name, 'default')
  assert.equal(state.policy?.admin?.unread, undefined)
  assert.deepEqual(adminRequests(), [
    'GET /apis/policy.networking.k8s.io/v1alpha1/adminnetworkpolicies',
    'GET /apis/policy.networking.k8s.io/v1alpha1/baselineadminnetworkpolicies',
  ])
  const d = judged(state.policy)
  assert.deepEqual(
    d.findings.map((f) => f.code),
    ['KPD-ANP-DENIES'],
  )
  assert.match(
    d.findings[0].message,
    /^Pod client\/curl → .*: AdminNetworkPolicy deny-blue \(priority 10\) ingress rule 0 'deny-from-blue' denies it, before any NetworkPolicy; without it nothing would deny it/,
  )
  assert.deepEqual(
    d.notChecked.filter((n) => n.check.includes('policy')),
    [],
  )
  const {cluster} = offlineCluster({editCluster: (c) => void (c.policy = state.policy)})
  assert.equal(
    policySourcesNote(cluster),
    'NetworkPolicies (0 in shop, client), with 1 AdminNetworkPolicy and the baseline judged for Pod client/curl',
  )
})

test('live: the group not served (no CRDs): none, nothing said', async () => {
  api.opts.withAdminNetworkPolicies = false
  const state = await readLive()
  assert.deepEqual(state.policy?.admin, {anps: []})
  const d = judged(state.policy)
  assert.deepEqual(
    d.findings.map((f) => f.code),
    [],
  )
  assert.deepEqual(
    d.notChecked.filter((n) => n.check.includes('policy')),
    [],
  )
})

test('live: 403 where the group is served is a required gap, and no verdict claims "allowed"', async () => {
  api.opts.forbidden = new Set(['list adminnetworkpolicies *'])
  const state = await readLive()
  assert.deepEqual(state.policy?.admin, {
    anps: [],
    unread: {
      reason:
        'AdminNetworkPolicies not read (forbidden): RBAC forbids list adminnetworkpolicies.policy.networking.k8s.io (403): adminnetworkpolicies.policy.networking.k8s.io is forbidden: User "kpd-lab" cannot list resource "adminnetworkpolicies" in API group "policy.networking.k8s.io" at the cluster scope',
      required: true,
    },
  })
  assert.deepEqual(adminRequests(), [
    'GET /apis/policy.networking.k8s.io/v1alpha1/adminnetworkpolicies',
    'GET /apis/policy.networking.k8s.io/v1alpha1',
  ])
  const d = judged(state.policy)
  assert.deepEqual(
    d.notChecked.filter((n) => n.check === 'admin-network-policy').map((n) => [n.reason, n.required]),
    [[state.policy?.admin?.unread?.reason, true]],
  )
})

test('live: 403 where discovery says the group is not served: no CRDs, nothing said', async () => {
  api.opts.withAdminNetworkPolicies = false
  api.opts.forbidden = new Set(['list adminnetworkpolicies *', 'list baselineadminnetworkpolicies *'])
  const state = await readLive()
  assert.deepEqual(state.policy?.admin, {anps: []})
  assert.deepEqual(adminRequests(), [
    'GET /apis/policy.networking.k8s.io/v1alpha1/adminnetworkpolicies',
    'GET /apis/policy.networking.k8s.io/v1alpha1',
    'GET /apis/policy.networking.k8s.io/v1alpha1/baselineadminnetworkpolicies',
    'GET /apis/policy.networking.k8s.io/v1alpha1',
  ])
})

test('bundle round trip: both kinds kept and judged the same; a bundle without them says they were not recorded', async () => {
  const state = await readLive()
  const {cluster} = offlineCluster({editCluster: (c) => void (c.policy = state.policy)})
  const out = join(work, 'bundle')
  writeBundle(out, cluster, new Map(), {namespace: 'shop', name: 'web', observations: []})
  const snapshot = new SnapshotClusterSource(out)
  assert.deepEqual(await snapshot.listCustomObjects(ADMIN_POLICY_RESOURCES.AdminNetworkPolicy), [DENY_BLUE])
  assert.deepEqual(await snapshot.listCustomObjects(ADMIN_POLICY_RESOURCES.BaselineAdminNetworkPolicy), [BASELINE])
  const replayed = await readClusterState(new ValidatedClusterSource(snapshot), 'shop', 'web', {
    policy: {pod: {namespace: 'client', name: 'curl'}},
  })
  assert.deepEqual(replayed.policy?.admin, {anps: [DENY_BLUE], banp: BASELINE})
  assert.deepEqual(
    judged(replayed.policy).findings.map((f) => f.message),
    judged(state.policy).findings.map((f) => f.message),
  )
  // A bundle recorded before AdminNetworkPolicies were read.
  rmSync(join(out, customObjectsFile(ADMIN_POLICY_RESOURCES.AdminNetworkPolicy)))
  rmSync(join(out, customObjectsFile(ADMIN_POLICY_RESOURCES.BaselineAdminNetworkPolicy)))
  const older = await readClusterState(new SnapshotClusterSource(out), 'shop', 'web', {policy: {}})
  assert.deepEqual(older.policy?.admin, {
    anps: [],
    unread: {reason: `AdminNetworkPolicies not recorded (snapshot ${out})`, required: false},
  })
  assert.deepEqual(
    judged(older.policy)
      .notChecked.filter((n) => n.check === 'admin-network-policy')
      .map((n) => [n.reason, n.required]),
    [[`AdminNetworkPolicies not recorded (snapshot ${out})`, false]],
  )
})
