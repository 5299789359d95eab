/**
 * A cluster whose Services Cilium implements without kube-proxy, read from a bundle: the report names Cilium per node
 * (header and JSON), gives no kube-proxy finding, lists kube-proxy's rules as not checked (?, exit 3), and a bundle
 * written from it keeps what names Cilium and nothing else of its agents.
 */
import assert from 'node:assert/strict'
import {cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {after, describe, test} from 'node:test'
import {gatherSnapshot} from '../../src/diagnosis/gather.js'
import {readClusterState} from '../../src/cluster/read-cluster.js'
import {SnapshotClusterSource} from '../../src/cluster/snapshot-source.js'
import {IMPLEMENTER_READS} from '../../src/model/implementers/index.js'
import {writeBundle} from '../../src/diagnosis/write-bundle.js'
import {
  calicoNodePod,
  ciliumAgentPod,
  ciliumConfigMap,
  ciliumNodeDump,
  kubeRouterPod,
} from '../fixtures/implementers.js'
import {ciliumServiceList} from '../fixtures/cilium-services.js'
import {nodeImplementers} from '../helpers/node-implementers.js'
import {runCli} from '../helpers/run-cli.js'

const scratch = mkdtempSync(join(tmpdir(), 'kpd-implementers-'))
after(() => rmSync(scratch, {recursive: true, force: true}))

type Items = {items: Array<{metadata: {namespace: string; name: string; labels?: Record<string, string>}}>}
const readList = (file: string) => JSON.parse(readFileSync(file, 'utf8')) as Items
const writeList = (file: string, items: unknown[]) =>
  writeFileSync(file, JSON.stringify({apiVersion: 'v1', kind: 'List', items}, null, 2))

/**
 * The healthy example cluster as it would be recorded with Cilium's kube-proxy replacement instead of kube-proxy:
 * no kube-proxy Pods, ConfigMap or rules; Cilium's agents, cilium-config and Cilium's chains on each node.
 */
function ciliumBundle(name: string, extraAgents: unknown[] = [], lists: Record<string, string> = {}): string {
  const dir = join(scratch, name)
  cpSync('examples/healthy-cluster', dir, {recursive: true})
  const pods = readList(join(dir, 'pods.json')).items.filter((p) => p.metadata.labels?.['k8s-app'] !== 'kube-proxy')
  writeList(join(dir, 'pods.json'), [...pods, ciliumAgentPod('node-a'), ciliumAgentPod('node-b'), ...extraAgents])
  writeList(join(dir, 'configmaps.json'), [ciliumConfigMap('true')])
  for (const node of ['node-a', 'node-b']) {
    const folder = join(dir, 'nodes', node)
    for (const f of ['kube-proxy.json', 'nft-ruleset.txt', 'iptables-nft-save.txt'])
      rmSync(join(folder, f), {force: true})
    writeFileSync(join(folder, 'iptables-save.txt'), ciliumNodeDump())
    if (lists[node]) writeFileSync(join(folder, 'cilium-services.json'), lists[node])
  }
  return dir
}

describe('a Cilium cluster without kube-proxy', () => {
  test('svc -o json: no finding, each node names Cilium with its evidence, kube-proxy rules not checked, exit 3', async () => {
    const dir = ciliumBundle('json')
    const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', dir, '-o', 'json'])
    assert.deepEqual(r.json.findings, [])
    assert.deepEqual(nodeImplementers(r.json), [
      ['node-a', 'cilium', 'api+node'],
      ['node-b', 'cilium', 'api+node'],
    ])
    assert.deepEqual(r.json.nodes[0].implementer.evidence, [
      "Cilium's agent kube-system/cilium-aq4zt runs on node-a and kube-system/cilium-config has kube-proxy-replacement: true",
      "Cilium's iptables chains (CILIUM_FORWARD, CILIUM_INPUT, CILIUM_OUTPUT, …)",
    ])
    assert.equal(
      r.json.nodes[0].implementer.look,
      'kubectl -n kube-system exec cilium-aq4zt -- cilium-dbg service list',
    )
    const skipped = r.json.notChecked.filter((n: {check: string}) => n.check === 'proxy-rules')
    assert.deepEqual(
      skipped.map((n: {node: string; required: boolean}) => [n.node, n.required]),
      [
        ['node-a', true],
        ['node-b', true],
      ],
    )
    assert.match(
      skipped[0].reason,
      /^Services here are implemented by Cilium, not kube-proxy \(.*\): kube-proxy's rules were not judged/,
    )
    assert.ok(!r.json.findings.some((f: {code: string}) => f.code === 'KPD-HOOK-MISSING'))
    assert.match(r.json.summary, /^\? shop\/web: no fault found in what was checked/)
    assert.equal(r.code, 3)
  })

  test("agents' Service lists recorded: judged, kube-proxy's rules no longer listed as not checked, exit 0", async () => {
    const dir = ciliumBundle('judged', [], {
      'node-a': ciliumServiceList('node-a'),
      'node-b': ciliumServiceList('node-b'),
    })
    const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', dir, '-o', 'json'])
    assert.deepEqual(r.json.findings, [])
    assert.deepEqual(
      r.json.notChecked.filter((n: {check: string}) => n.check === 'proxy-rules'),
      [],
    )
    assert.equal(r.code, 0)
  })

  test("node-b's agent keeps a backend the slices dropped: KPD-CILIUM-BACKEND-STALE on node-b, exit 1", async () => {
    const stale = {extraBackends: [{ip: '10.244.2.99', port: 8080}]}
    const dir = ciliumBundle('stale', [], {
      'node-a': ciliumServiceList('node-a'),
      'node-b': ciliumServiceList('node-b', stale),
    })
    const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', dir, '-o', 'json'])
    assert.deepEqual(
      r.json.findings.map((f: {code: string; node: string}) => [f.code, f.node]),
      [
        ['KPD-CILIUM-BACKEND-STALE', 'node-b'],
        ['KPD-CILIUM-BACKEND-STALE', 'node-b'],
        ['KPD-CILIUM-NODE-DIVERGES', 'node-b'],
        ['KPD-CILIUM-NODE-DIVERGES', 'node-b'],
      ],
    )
    assert.equal(r.code, 1)
  })

  test("a damaged Service list: that node's error, the other node judged", async () => {
    const dir = ciliumBundle('damaged', [], {
      'node-a': ciliumServiceList('node-a'),
      'node-b': 'Error: agent not ready\n',
    })
    const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', dir, '-o', 'json'])
    assert.deepEqual(
      r.json.notChecked
        .filter((n: {check: string}) => n.check === 'node-read')
        .map((n: {node: string; reason: string}) => [n.node, n.reason]),
      [['node-b', 'not read: cilium-services.json unreadable: cilium-dbg service list -o json not JSON']],
    )
  })

  test('svc (human): the header says Cilium implements Services on each node; no ✗', async () => {
    const dir = ciliumBundle('human')
    const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', dir])
    assert.match(r.stdout, /Services implemented by: node-a Cilium, node-b Cilium/)
    assert.doesNotMatch(r.stdout, /✗|KPD-HOOK-MISSING/)
    // kube-proxy serves no node: the header names no kube-proxy mode.
    assert.doesNotMatch(r.stdout, /kube-proxy iptables/)
    assert.match(r.stdout, /^Endpoints 3 ready, 0 not ready \(from EndpointSlice\)$/m)
    assert.equal(r.code, 3)
  })

  test('svc (human) where kube-proxy serves the nodes: the header names its mode, and no implementers line', async () => {
    const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', 'examples/healthy-cluster'])
    assert.match(r.stdout, /kube-proxy iptables, mark 0x4000/)
    assert.doesNotMatch(r.stdout, /Services implemented by/)
  })

  test("scan: a Service Cilium serves is ? (not judged) where the agents' lists were not read, ✓ where they were", async () => {
    const row = (stdout: string) => stdout.split('\n').find((l) => l.includes(' shop/web ')) ?? stdout
    const unread = await runCli(['scan', '-n', 'shop', '--snapshot', ciliumBundle('scan-unread')])
    assert.match(row(unread.stdout), /^│ shop\/web │ NodePort │ 3 ready +│ \? not judged +│ 2 of 2 │$/)
    assert.doesNotMatch(unread.stdout, /✓ /)
    assert.equal(unread.code, 3)
    const lists = {'node-a': ciliumServiceList('node-a'), 'node-b': ciliumServiceList('node-b')}
    const judged = await runCli(['scan', '-n', 'shop', '--snapshot', ciliumBundle('scan-judged', [], lists)])
    assert.match(row(judged.stdout), /^│ shop\/web │ NodePort │ 3 ready +│ ✓ +│ +│$/)
  })

  test('a bundle written from it keeps the agents, their Service settings, and none of their other settings', async () => {
    const secret = 'pa55-w0rd-4d1b'
    const calico = calicoNodePod('node-a', true)
    calico.spec.containers[0].env!.push({name: 'CALICO_API_TOKEN', value: secret})
    const router = kubeRouterPod('node-b', ['--run-service-proxy=false', `--token=${secret}`])
    const g = await gatherSnapshot(ciliumBundle('source', [calico, router]), 'shop', 'web')
    const out = join(scratch, 'written')
    writeBundle(out, g.cluster, new Map(), {namespace: 'shop', name: 'web', observations: []})
    const pods = readFileSync(join(out, 'pods.json'), 'utf8')
    assert.ok(!pods.includes(secret), 'no other setting of an agent is kept')
    const again = {
      cluster: await readClusterState(new SnapshotClusterSource(out), 'shop', 'web', {implementers: IMPLEMENTER_READS}),
    }
    const agents = again.cluster.implementerObjects!.pods.map((p) => [
      p.metadata?.name,
      p.spec?.containers.map((c) => ({env: c.env, args: c.args})),
    ])
    assert.deepEqual(agents, [
      ['cilium-aq4zt', [{env: undefined, args: undefined}]],
      ['cilium-bq4zt', [{env: undefined, args: undefined}]],
      ['kube-router-bq4zt', [{env: undefined, args: ['--run-service-proxy=false']}]],
      ['calico-node-aq4zt', [{env: [{name: 'FELIX_BPFENABLED', value: 'true'}], args: undefined}]],
    ])
    assert.deepEqual(
      again.cluster.implementerObjects!.configMaps.map((c) => c.data),
      [{'kube-proxy-replacement': 'true'}],
    )
  })
})
