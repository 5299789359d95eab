import assert from 'node:assert/strict'
import {test} from 'node:test'
import {categorizeEndpoints, type EndpointInfo} from '../../src/model/endpoints.js'
import {notProxiedReason} from '../../src/model/expected.js'
import {selectNodes} from '../../src/node/select-nodes.js'

const ep = (ip: string, node: string, ready = true, serving = ready, terminating = false, zoneHints: string[] = [], nodeHints: string[] = []): EndpointInfo => ({
  ip,
  port: 80,
  nodeName: node,
  ready,
  serving,
  terminating,
  zoneHints,
  nodeHints,
})
const ips = (l: EndpointInfo[]) => l.map((e) => e.ip)

test("CategorizeEndpoints: kube-proxy's rules per traffic policy", () => {
  const eps = [ep('1', 'a'), ep('2', 'b'), ep('3', 'a', false)]
  const cluster = {internalLocal: false, externalLocal: false, externallyAccessible: true}
  assert.deepEqual(ips(categorizeEndpoints(eps, cluster, 'a').cluster), ['1', '2'])
  const local = {internalLocal: false, externalLocal: true, externallyAccessible: true}
  const r = categorizeEndpoints(eps, local, 'a')
  assert.deepEqual([ips(r.cluster), ips(r.local), ips(r.allReachable)], [['1', '2'], ['1'], ['1', '2']])
  const itp = categorizeEndpoints(eps, {internalLocal: true, externalLocal: false, externallyAccessible: false}, 'b')
  assert.deepEqual([ips(itp.cluster), ips(itp.local)], [[], ['2']])
  const none = categorizeEndpoints(eps, {internalLocal: true, externalLocal: false, externallyAccessible: false}, 'c')
  assert.deepEqual(ips(none.local), [])
  assert.equal(none.hasAny, true, 'endpoints exist elsewhere: DROP, not REJECT')
})

test('CategorizeEndpoints: serving+terminating endpoints are used only when none is ready', () => {
  const terminating = [ep('1', 'a', false, true, true), ep('2', 'b', false, false, true)]
  const cluster = {internalLocal: false, externalLocal: false, externallyAccessible: false}
  assert.deepEqual(ips(categorizeEndpoints(terminating, cluster, 'a').cluster), ['1'])
  assert.deepEqual(ips(categorizeEndpoints([...terminating, ep('3', 'b')], cluster, 'a').cluster), ['3'])
  assert.equal(categorizeEndpoints([ep('4', 'a', false)], cluster, 'a').hasAny, false)
})

test("topology hints: zone hints for this node's zone narrow cluster endpoints; missing hints or no match turn them off", () => {
  const cluster = {internalLocal: false, externalLocal: false, externallyAccessible: false}
  const eps = [ep('1', 'a', true, true, false, ['z1']), ep('2', 'b', true, true, false, ['z2']), ep('3', 'c', true, true, false, ['z1'])]
  assert.deepEqual(ips(categorizeEndpoints(eps, cluster, 'a', 'z1').cluster), ['1', '3'])
  assert.deepEqual(ips(categorizeEndpoints(eps, cluster, 'b', 'z2').cluster), ['2'])
  assert.deepEqual(ips(categorizeEndpoints(eps, cluster, 'd', 'z9').cluster), ['1', '2', '3'], 'no endpoint hinted for this zone: all')
  assert.deepEqual(ips(categorizeEndpoints([...eps, ep('4', 'd')], cluster, 'a', 'z1').cluster), ['1', '2', '3', '4'], 'one ready endpoint without hints: all')
  assert.deepEqual(ips(categorizeEndpoints(eps, cluster, 'a', undefined).cluster), ['1', '2', '3'], 'node without a zone label: all')
  const byNode = [ep('1', 'a', true, true, false, ['z1'], ['a']), ep('2', 'b', true, true, false, ['z1'], ['b'])]
  assert.deepEqual(ips(categorizeEndpoints(byNode, cluster, 'b', 'z1').cluster), ['2'], 'PreferSameNode hints')
})

test('Services kube-proxy does not program, with the reason shown', () => {
  assert.match(notProxiedReason({spec: {type: 'ExternalName', externalName: 'db.example.com'}})!, /CNAME to db\.example\.com/)
  assert.match(notProxiedReason({spec: {clusterIP: 'None'}})!, /headless/)
  assert.match(notProxiedReason({metadata: {labels: {'service.kubernetes.io/service-proxy-name': 'cilium'}}, spec: {clusterIP: '10.0.0.1'}})!, /another proxy/)
  assert.equal(notProxiedReason({spec: {clusterIP: '10.0.0.1'}}), undefined)
})

test('node selection: all up to 50, else endpoint nodes plus a stable sample; --nodes validated', () => {
  const nodes = (n: number) => Array.from({length: n}, (_, i) => ({metadata: {name: `n${String(i).padStart(3, '0')}`}}))
  assert.equal(selectNodes(nodes(50), new Set(), {}).names.length, 50)
  const big = selectNodes(nodes(200), new Set(['n150', 'n199']), {})
  assert.deepEqual(big.names, ['n150', 'n199', 'n000', 'n001', 'n002', 'n003', 'n004'])
  assert.match(big.note!, /7 of 200/)
  assert.equal(selectNodes(nodes(200), new Set(), {all: true}).names.length, 200)
  assert.deepEqual(selectNodes(nodes(3), new Set(), {only: ['n001']}).names, ['n001'])
  assert.throws(() => selectNodes(nodes(3), new Set(), {only: ['zz']}), /unknown node/)
})
