/**
 * Cilium's kube-proxy replacement judged from its agents' Service lists (`cilium-dbg service list -o json`, recorded):
 * each node's frontends and backends compared with the EndpointSlices, and the nodes with one another.
 */
import assert from 'node:assert/strict'
import {test} from 'node:test'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {parseCiliumServices} from '../../src/parse/cilium-services.js'
import type {ClusterState} from '../../src/cluster/types.js'
import {offlineCluster, type OfflineOptions} from '../helpers/offline-cluster.js'
import {checkFamily, checkTester} from '../helpers/check-tester.js'
import {ciliumServiceList, type CiliumFaults} from '../fixtures/cilium-services.js'
import {ciliumAgentPod, ciliumConfigMap, ciliumNodeDump} from '../fixtures/implementers.js'
import {labPods} from '../fixtures/lab-cluster.js'

const NODES = ['node-a', 'node-b']

/**
 * The lab with Cilium in kube-proxy's place on both nodes (its agents, cilium-config, its chains, no KUBE- rule), each
 * agent's Service list recorded with the node's faults; a node left out of `lists` had its list not read.
 */
function cilium(faults: Record<string, CiliumFaults> = {}, extra: OfflineOptions = {}, lists = NODES): OfflineOptions {
  return {
    ...extra,
    dumpFor: Object.fromEntries(NODES.map((n) => [n, ciliumNodeDump()])),
    editCluster: (c: ClusterState) =>
      void (c.implementerObjects = {
        pods: NODES.map(ciliumAgentPod) as unknown[],
        configMaps: [ciliumConfigMap('true')] as unknown[],
      } as ClusterState['implementerObjects']),
    editObservation: Object.fromEntries(
      lists.map((n) => [n, (o) => ({...o, ciliumServices: parseCiliumServices(ciliumServiceList(n, faults[n]))})]),
    ),
  }
}

const SERVICE_LIST = ['kubectl', '-n', 'kube-system', 'exec', 'cilium-bq4zt', '--', 'cilium-dbg', 'service', 'list']
const RESTART_B = {
  argv: [['kubectl', '-n', 'kube-system', 'delete', 'pod', 'cilium-bq4zt']],
  text: null,
  changes: 'cluster' as const,
  node: null,
}

checkFamily('cilium', () => {
  checkTester("Cilium's agents' Service lists against the EndpointSlices (cilium)", [
    {
      name: 'both agents list the ClusterIP and the NodePort with the three ready endpoints: nothing to say',
      state: cilium(),
      findings: [],
    },
    {
      name: 'agents before backend states (no state field): every backend counts as active',
      state: cilium({'node-a': {noStates: true}, 'node-b': {noStates: true}}),
      findings: [],
    },
    {
      name: "node-b's agent has no NodePort frontend for shop/web",
      state: cilium({'node-b': {dropFrontends: ['NodePort']}}),
      findings: [['KPD-CILIUM-FRONTEND-MISSING', 'node-b', 'error']],
      messages: {
        'KPD-CILIUM-FRONTEND-MISSING node-b': [
          /^node-b: Cilium's agent lists no NodePort frontend NodePort 30080\/tcp for shop\/web:http: the Service does not answer there on this node$/,
        ],
      },
      fixes: {
        'KPD-CILIUM-FRONTEND-MISSING node-b': {check: [SERVICE_LIST], fix: RESTART_B, text: null},
      },
    },
    {
      name: "node-a's agent has no ClusterIP frontend (its NodePort is there)",
      state: cilium({'node-a': {dropFrontends: ['ClusterIP']}}),
      findings: [['KPD-CILIUM-FRONTEND-MISSING', 'node-a', 'error']],
      messages: {'KPD-CILIUM-FRONTEND-MISSING node-a': [/lists no ClusterIP frontend 10\.96\.10\.10:80\/tcp/]},
    },
    {
      name: "node-b's agent missed web-b2 (ready in the slice): missing on both of its frontends, and node-b diverges",
      state: cilium({'node-b': {dropBackends: ['10.244.2.11']}}),
      findings: [
        ['KPD-CILIUM-BACKEND-MISSING', 'node-b', 'error'],
        ['KPD-CILIUM-BACKEND-MISSING', 'node-b', 'error'],
        ['KPD-CILIUM-NODE-DIVERGES', 'node-b', 'warning'],
        ['KPD-CILIUM-NODE-DIVERGES', 'node-b', 'warning'],
      ],
      messages: {
        'KPD-CILIUM-BACKEND-MISSING node-b': [
          /^node-b: Cilium's ClusterIP frontend 10\.96\.10\.10:80\/tcp lacks 10\.244\.2\.11:8080 \(pod web-b2\), ready in the EndpointSlices$/,
        ],
      },
      fixes: {'KPD-CILIUM-BACKEND-MISSING node-b': {check: [SERVICE_LIST], fix: RESTART_B, text: null}},
    },
    {
      name: 'both agents keep a backend the EndpointSlice dropped (10.244.2.99): stale on every frontend, no divergence',
      state: cilium({
        'node-a': {extraBackends: [{ip: '10.244.2.99', port: 8080, nodeName: 'node-b'}]},
        'node-b': {extraBackends: [{ip: '10.244.2.99', port: 8080, nodeName: 'node-b'}]},
      }),
      findings: [
        ['KPD-CILIUM-BACKEND-STALE', 'node-a', 'error'],
        ['KPD-CILIUM-BACKEND-STALE', 'node-a', 'error'],
        ['KPD-CILIUM-BACKEND-STALE', 'node-b', 'error'],
        ['KPD-CILIUM-BACKEND-STALE', 'node-b', 'error'],
      ],
      messages: {
        'KPD-CILIUM-BACKEND-STALE node-a': [
          /^node-a: Cilium's ClusterIP frontend 10\.96\.10\.10:80\/tcp has backend 10\.244\.2\.99:8080 \(active\), in no EndpointSlice of shop\/web$/,
        ],
      },
    },
    {
      name: 'web-b2 not ready: both agents still send new connections to it (active)',
      state: cilium({}, {pods: labPods().map((p) => (p.name === 'web-b2' ? {...p, ready: false} : p))}),
      findings: [
        ['KPD-ENDPOINT-NOT-READY', 'node-b', 'warning'],
        ['KPD-CILIUM-BACKEND-NOT-READY-ACTIVE', 'node-a', 'warning'],
        ['KPD-CILIUM-BACKEND-NOT-READY-ACTIVE', 'node-a', 'warning'],
        ['KPD-CILIUM-BACKEND-NOT-READY-ACTIVE', 'node-b', 'warning'],
        ['KPD-CILIUM-BACKEND-NOT-READY-ACTIVE', 'node-b', 'warning'],
      ],
      messages: {
        'KPD-CILIUM-BACKEND-NOT-READY-ACTIVE node-b': [
          /^node-b: Cilium's ClusterIP frontend 10\.96\.10\.10:80\/tcp sends new connections to 10\.244\.2\.11:8080 \(pod web-b2\), which the EndpointSlice marks not ready$/,
        ],
      },
    },
    {
      name: 'web-b2 not ready and both agents took it out of service (quarantined): nothing of Cilium to say',
      state: cilium(
        {'node-a': {states: {'10.244.2.11': 'quarantined'}}, 'node-b': {states: {'10.244.2.11': 'quarantined'}}},
        {pods: labPods().map((p) => (p.name === 'web-b2' ? {...p, ready: false} : p))},
      ),
      findings: [['KPD-ENDPOINT-NOT-READY', 'node-b', 'warning']],
    },
    {
      name: "node-b's agent disagrees with node-a's: it has web-a1 in maintenance (a tie: the slices' set wins)",
      state: cilium({'node-b': {states: {'10.244.1.10': 'maintenance'}}}),
      findings: [
        ['KPD-CILIUM-NODE-DIVERGES', 'node-b', 'warning'],
        ['KPD-CILIUM-NODE-DIVERGES', 'node-b', 'warning'],
      ],
      messages: {
        'KPD-CILIUM-NODE-DIVERGES node-b': [
          /^node-b: Cilium's frontend 10\.96\.10\.10:80\/tcp goes to \{10\.244\.1\.10:8080 \(maintenance\), 10\.244\.2\.10:8080 \(active\), 10\.244\.2\.11:8080 \(active\)\} while 1 other node\(s\) \(node-a\) have \{10\.244\.1\.10:8080 \(active\), /,
        ],
      },
      fixes: {'KPD-CILIUM-NODE-DIVERGES node-b': {check: [SERVICE_LIST], fix: RESTART_B, text: null}},
    },
    {
      name: "node-b's agent's list not read: node-a judged, node-b's Cilium state listed as not checked",
      state: cilium({'node-a': {dropBackends: ['10.244.1.10']}}, {}, ['node-a']),
      findings: [
        ['KPD-CILIUM-BACKEND-MISSING', 'node-a', 'error'],
        ['KPD-CILIUM-BACKEND-MISSING', 'node-a', 'error'],
      ],
    },
  ])
})

test("kube-proxy's rules are listed as not checked only where Cilium's Service list was not read", () => {
  const {cluster, observations} = offlineCluster(cilium({}, {}, ['node-a']))
  const proxyRules = diagnose(cluster, observations)
    .notChecked.filter((n) => n.check === 'proxy-rules')
    .map((n) => [n.node, n.required, n.reason.replace(/\(.*\)/, '(…)')])
  assert.deepEqual(proxyRules, [
    [
      'node-b',
      true,
      "Services here are implemented by Cilium, not kube-proxy (…): kube-proxy's rules were not judged, and Cilium's Service state was not read; look with: kubectl -n kube-system exec cilium-bq4zt -- cilium-dbg service list",
    ],
  ])
})
