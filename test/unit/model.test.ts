import assert from 'node:assert/strict'
import {test} from 'node:test'
import {categorizeEndpoints, type EndpointInfo} from '../../src/model/endpoints.js'
import {notProxiedReason} from '../../src/model/expected.js'
import {selectNodes} from '../../src/node/read/select-nodes.js'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {Chalk} from 'chalk'
import type {Diagnosis} from '../../src/diagnosis/diagnose.js'
import {buildReport} from '../../src/report/report.js'
import {renderHuman} from '../../src/report/human.js'
import {offlineCluster, type OfflineOptions} from '../helpers/offline-cluster.js'

const ep = (
  ip: string,
  node: string,
  ready = true,
  serving = ready,
  terminating = false,
  zoneHints: string[] = [],
  nodeHints: string[] = [],
): EndpointInfo => ({
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
  const eps = [
    ep('1', 'a', true, true, false, ['z1']),
    ep('2', 'b', true, true, false, ['z2']),
    ep('3', 'c', true, true, false, ['z1']),
  ]
  assert.deepEqual(ips(categorizeEndpoints(eps, cluster, 'a', 'z1').cluster), ['1', '3'])
  assert.deepEqual(ips(categorizeEndpoints(eps, cluster, 'b', 'z2').cluster), ['2'])
  assert.deepEqual(
    ips(categorizeEndpoints(eps, cluster, 'd', 'z9').cluster),
    ['1', '2', '3'],
    'no endpoint hinted for this zone: all',
  )
  assert.deepEqual(
    ips(categorizeEndpoints([...eps, ep('4', 'd')], cluster, 'a', 'z1').cluster),
    ['1', '2', '3', '4'],
    'one ready endpoint without hints: all',
  )
  assert.deepEqual(
    ips(categorizeEndpoints(eps, cluster, 'a', undefined).cluster),
    ['1', '2', '3'],
    'node without a zone label: all',
  )
  const byNode = [ep('1', 'a', true, true, false, ['z1'], ['a']), ep('2', 'b', true, true, false, ['z1'], ['b'])]
  assert.deepEqual(ips(categorizeEndpoints(byNode, cluster, 'b', 'z1').cluster), ['2'], 'PreferSameNode hints')
})

test('Services kube-proxy does not program, with the reason shown', () => {
  assert.match(
    notProxiedReason({spec: {type: 'ExternalName', externalName: 'db.example.com'}})!,
    /CNAME to db\.example\.com/,
  )
  assert.match(notProxiedReason({spec: {clusterIP: 'None'}})!, /headless/)
  assert.match(
    notProxiedReason({
      metadata: {labels: {'service.kubernetes.io/service-proxy-name': 'cilium'}},
      spec: {clusterIP: '10.0.0.1'},
    })!,
    /another proxy/,
  )
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

// One path across two nodes (diagnose: followEndpoints): each endpoint on another node, its half on that node.
const diagnosed = (state: OfflineOptions) => {
  const {cluster, observations} = offlineCluster(state)
  return diagnose(cluster, observations)
}
const path = (d: Diagnosis, node: string, entry: string) => {
  const p = d.paths.find((x) => x.node === node && x.entry === entry)!
  return {
    ok: p.ok,
    breaksAt: p.breaksAt,
    breaksOn: p.breaksOn,
    detail: p.detail,
    remote: p.remote.map(({trace: _trace, ...h}) => h),
  }
}
/** A Calico chain in node-b's FORWARD dropping new connections to web-b2 (10.244.2.11). */
const calicoDropsWebB2 = (text: string) =>
  text
    .replace(':OUTPUT ACCEPT [0:0]\n', ':OUTPUT ACCEPT [0:0]\n:cali-FORWARD - [0:0]\n')
    .replace(
      '-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall"',
      '-A FORWARD -j cali-FORWARD\n$&',
    )
    .replace('\nCOMMIT\n*nat', '\n-A cali-FORWARD -d 10.244.2.11/32 -m conntrack --ctstate NEW -j DROP\nCOMMIT\n*nat')
const CALI_RULE =
  'DROP by filter cali-FORWARD line 25: -A cali-FORWARD -d 10.244.2.11/32 -m conntrack --ctstate NEW -j DROP'
const healthyHalf = (ip: string, pod: string, node: string) => ({
  endpoint: `${ip}:8080`,
  pod,
  node,
  share: 0.3333,
  followed: true,
  ok: true,
  breaksAt: null,
  detail: `33.3% of new connections go to ${ip}:8080 (${pod}) on ${node}, which forwards them to the pod`,
})

test("paths across two nodes: node-b's FORWARD drops web-b2, so node-a's pod→ClusterIP breaks there for its share", () => {
  const d = diagnosed({editDump: {'node-b': calicoDropsWebB2}})
  const dropped = `33.3% of new connections go to 10.244.2.11:8080 (web-b2) on node-b, which drops them (arriving DNATed): ${CALI_RULE}`
  assert.deepEqual(path(d, 'node-a', 'pod→ClusterIP'), {
    ok: false,
    breaksAt: 'filter',
    breaksOn: 'node-b',
    detail: dropped,
    remote: [
      healthyHalf('10.244.2.10', 'web-b1', 'node-b'),
      {...healthyHalf('10.244.2.11', 'web-b2', 'node-b'), ok: false, breaksAt: 'filter', detail: dropped},
    ],
  })
  // node-b's own path breaks on node-b first (its FORWARD, before any second half); its half on node-a works.
  const own = path(d, 'node-b', 'pod→ClusterIP')
  assert.deepEqual(
    [own.ok, own.breaksAt, own.breaksOn, own.remote],
    [false, 'filter', 'node-b', [healthyHalf('10.244.1.10', 'web-a1', 'node-a')]],
  )
  // The specific finding, on the node that drops, explains every path it breaks: no generic KPD-PATH-BROKEN.
  assert.deepEqual(
    d.findings.filter((f) => f.severity !== 'info').map((f) => `${f.code} ${f.node}`),
    ['KPD-FILTER-DROP node-b'],
  )
  const r = buildReport(d, {meta: {toolVersion: 't', time: 't', context: null}})
  assert.match(
    r.summary,
    /^✗ shop\/web: pod→ClusterIP \(http\) from node-a breaks at filter on node-b: 33\.3% of new connections go to 10\.244\.2\.11:8080 \(web-b2\) on node-b/,
  )
  // Wide enough, the table: node-a's cell names the step and the node it breaks on.
  const wide = renderHuman(r, new Chalk({level: 0}), 120).split('\n')
  const row = wide.find((l) => /^\W*node-a\b/.test(l) && l.includes('iptables'))
  assert.ok(row?.includes('✗ filter@node-b'), wide.join('\n'))
  // In 80 columns the cells do not fit: one line per node, within the width.
  const narrow = renderHuman(r, new Chalk({level: 0}), 80).split('\n')
  assert.ok(
    narrow.some((l) => l.startsWith('node-a (iptables): ✗ pod→ClusterIP at filter@node-b,')),
    narrow.join('\n'),
  )
  assert.ok(narrow.every((l) => l.length <= 80))
  // --explain: node-a's walk is the half on node-b where it breaks (its own half forwards it), the drop marked ✗.
  const explained = renderHuman(
    buildReport(d, {meta: {toolVersion: 't', time: 't', context: null}, explain: true}),
    new Chalk({level: 0}),
    200,
  ).split('\n')
  const at = explained.findIndex((l) => l.startsWith('node-a pod→ClusterIP'))
  assert.ok(at > 0, explained.join('\n'))
  const walk = explained.slice(at, explained.indexOf('', at) === -1 ? undefined : explained.indexOf('', at))
  const half = walk.indexOf('  on node-b, arriving DNATed to 10.244.2.11:8080 (web-b2) from node-a:')
  assert.deepEqual(
    walk.slice(half + 1),
    [
      '    1   nat/PREROUTING:46 → KUBE-SERVICES',
      '    2   filter/FORWARD:15 → cali-FORWARD:25 -d 10.244.2.11/32 → DROP',
      '    ⇒   DROP ✗',
    ],
    walk.join('\n'),
  )
  assert.ok(!walk.some((l) => /KUBE-SVC-/.test(l)), "the first half (node-a's DNAT) is not walked again")
  const json = buildReport(d, {meta: {toolVersion: 't', time: 't', context: null}, explain: true}).paths.find(
    (p) => p.node === 'node-a' && p.entry === 'pod→ClusterIP',
  )!
  assert.deepEqual(
    json.remote.map((h) => [h.endpoint, h.trace?.verdict]),
    [
      ['10.244.2.10:8080', 'ACCEPT'],
      ['10.244.2.11:8080', 'DROP'],
    ],
  )
  assert.ok(
    buildReport(d, {meta: {toolVersion: 't', time: 't', context: null}}).paths.every((p) =>
      p.remote.every((h) => !('trace' in h)),
    ),
    'no walk without --explain',
  )
})

test('paths across two nodes: healthy, both halves ✓, the JSON shape exact', () => {
  const d = diagnosed({})
  const r = buildReport(d, {meta: {toolVersion: 't', time: 't', context: null}})
  assert.deepEqual(
    r.paths.find((p) => p.node === 'node-a' && p.entry === 'pod→ClusterIP'),
    {
      node: 'node-a',
      entry: 'pod→ClusterIP',
      port: 'http',
      ok: true,
      breaksAt: null,
      family: 'IPv4',
      destination: '10.96.10.10:80',
      breaksOn: null,
      detail: 'reaches 3 endpoint(s): 10.244.1.10:8080, 10.244.2.10:8080, 10.244.2.11:8080',
      remote: [healthyHalf('10.244.2.10', 'web-b1', 'node-b'), healthyHalf('10.244.2.11', 'web-b2', 'node-b')],
      ignoredBy: null,
    },
  )
  assert.ok(r.paths.every((p) => p.ok === true))
  assert.deepEqual(path(d, 'node-b', 'node→ClusterIP').remote, [healthyHalf('10.244.1.10', 'web-a1', 'node-a')])
})

test('paths across two nodes: an endpoint on a node that was not read is not followed (and not a ✓)', () => {
  const d = diagnosed({
    editObservation: {'node-b': (obs) => ({...obs, reachable: false, error: 'ssh: connection refused'})},
  })
  const notFollowed = (ip: string, pod: string) => ({
    endpoint: `${ip}:8080`,
    pod,
    node: 'node-b',
    share: 0.3333,
    followed: false,
    ok: null,
    breaksAt: null,
    detail: "not followed: node-b's rules were not read",
  })
  assert.deepEqual(path(d, 'node-a', 'pod→ClusterIP'), {
    ok: true,
    breaksAt: null,
    breaksOn: null,
    detail: 'reaches 3 endpoint(s): 10.244.1.10:8080, 10.244.2.10:8080, 10.244.2.11:8080',
    remote: [notFollowed('10.244.2.10', 'web-b1'), notFollowed('10.244.2.11', 'web-b2')],
  })
  const human = renderHuman(
    buildReport(d, {meta: {toolVersion: 't', time: 't', context: null}}),
    new Chalk({level: 0}),
    80,
  ).split('\n')
  // Four "? not followed" cells do not fit 80 columns: one line per node.
  const row = human.find((l) => l.startsWith('node-a (iptables): '))
  assert.ok(row?.includes('? pod→ClusterIP not followed') && !row.includes('✓'), human.join('\n'))
})

test('paths across two nodes: only node-a read (a node selection), the headline says which halves were not followed', () => {
  const {cluster, observations} = offlineCluster({})
  const d = diagnose(
    cluster,
    observations.filter((o) => o.name === 'node-a'),
  )
  const r = buildReport(d, {meta: {toolVersion: 't', time: 't', context: null}})
  assert.ok(r.paths.every((p) => p.ok === true && p.remote.every((h) => !h.followed && h.node === 'node-b')))
  assert.match(r.summary, /^. shop\/web: .*\(the second halves on node-b not followed: not read\)/)
})
