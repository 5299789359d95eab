/**
 * Issue #32 item 4: one node's broken rule, or a malformed entry in its path reads, never ends a run. Rules are
 * parsed chain by chain as the walk reaches them: the node whose rules cannot be judged is reported unreadable with
 * its file and line, and the other nodes are judged. One Service that cannot be judged never ends a scan.
 */
import assert from 'node:assert/strict'
import {cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {after, before, test} from 'node:test'
import {judgeService} from '../../src/diagnosis/judge-services.js'
import {generateBundle} from '../../bench/generate.js'
import {offlineCluster} from '../helpers/offline-cluster.js'
import {runCli} from '../helpers/run-cli.js'
import {LabApiServer} from '../lab/apiserver.js'
import type {RecordedExec} from '../lab/apiserver-streams.js'
import {serveLabClusterViaDebugPods} from '../helpers/debug-pod-cluster.js'
import {kubeProxyRules} from '../fixtures/kube-proxy-rules.js'
import {DNS, labPods, NODES, SERVICES, WEB} from '../fixtures/lab-cluster.js'

const tmp = mkdtempSync(join(tmpdir(), 'kpd-isolation-'))
const api = new LabApiServer({token: 'kpd-isolation', podStartMs: 10})
before(() => api.start())
after(async () => {
  await api.stop()
  rmSync(tmp, {recursive: true, force: true})
})

/** The healthy example with node-b's KUBE-SERVICES rule for shop/web (line 66) losing its closing quote. */
function brokenRuleBundle(): string {
  const dir = join(tmp, 'broken-rule')
  cpSync('examples/healthy-cluster', dir, {recursive: true})
  const file = join(dir, 'nodes/node-b/iptables-save.txt')
  const lines = readFileSync(file, 'utf8').split('\n')
  assert.match(lines[65], /--comment "shop\/web:http cluster IP"/)
  lines[65] = lines[65].replace('cluster IP"', 'cluster IP')
  writeFileSync(file, lines.join('\n'))
  return dir
}

const WHY = 'its rules could not be judged: iptables-save.txt line 66: unterminated quote'

test("svc: a node's broken rule makes that node unreadable, naming the file and line; the other node is judged", async () => {
  const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', brokenRuleBundle(), '-o', 'json'])
  assert.notEqual(r.code, 2, r.stderr)
  assert.deepEqual(
    r.json.nodes.map((n: {name: string; reachable: boolean; error: string | null}) => [n.name, n.reachable, n.error]),
    [
      ['node-a', true, null],
      ['node-b', false, WHY],
    ],
  )
  assert.deepEqual(
    r.json.findings.map((f: {code: string; node: string; message: string}) => [f.code, f.node, f.message]),
    [['KPD-NODE-UNREADABLE', 'node-b', `node-b could not be read: ${WHY}`]],
  )
  assert.ok(r.json.paths.some((p: {node: string}) => p.node === 'node-a'))
})

test("scan: a node's broken rule is that node's, and every Service is still judged", async () => {
  const r = await runCli(['scan', '-A', '--snapshot', brokenRuleBundle()])
  assert.notEqual(r.code, 2, r.stderr)
  assert.equal(r.stderr.includes('unterminated quote'), false, r.stderr)
  assert.match(
    r.stdout,
    /KPD-NODE-UNREADABLE \[node-b\] node-b could not be read: its rules could not be judged: iptables-save\.txt line 66: unterminated quote/,
  )
  assert.match(r.stdout, /shop\/web/)
})

/**
 * A scan bundle of six Services over three nodes (kube-proxy's rules for all of them on each node), with the DNAT rule
 * of one endpoint of bench/svc-2 on bench-node-1 losing its closing quote: a chain only svc-2's walks reach there.
 */
function scanBundleWithBrokenRule(): {bundle: string; line: number} {
  const {bundle} = generateBundle(join(tmp, 'scan'), 6, {nodes: 3})
  const file = join(bundle, 'nodes', 'bench-node-1', 'iptables-save.txt')
  const lines = readFileSync(file, 'utf8').split('\n')
  const at = lines.findIndex((l) => /^-A KUBE-SEP-\S+ .*--comment "bench\/svc-2:http" .*-j DNAT /.test(l))
  assert.ok(at > 0)
  lines[at] = lines[at].replace('svc-2:http"', 'svc-2:http')
  // The nodes' dumps are one file linked thrice: node-1's is replaced, not written through.
  rmSync(file)
  writeFileSync(file, lines.join('\n'))
  return {bundle, line: at + 1}
}

test("scan: one node's broken rule makes that node unreadable for the one Service whose walk reaches it (node, file, line); every other node and Service is judged", async () => {
  const {bundle, line} = scanBundleWithBrokenRule()
  const why = `its rules could not be judged: iptables-save.txt line ${line}: unterminated quote`
  const nodes = ['bench-node', 'bench-node-1', 'bench-node-2']
  for (const threads of ['1', '2']) {
    const r = await runCli(['scan', '-n', 'bench', '--snapshot', bundle, '--threads', threads, '-o', 'json'])
    assert.equal(r.code, 3, `--threads ${threads}: ${r.stderr}`)
    assert.equal(r.stderr, '')
    assert.deepEqual(r.json.counts, {
      services: 6,
      diagnosed: 6,
      skipped: 0,
      withErrors: 0,
      withWarnings: 1,
      withChecksNotRun: 1,
    })
    type Report = {
      service: {name: string}
      findings: Array<{code: string; node: string; message: string}>
      nodes: Array<{name: string; reachable: boolean; error: string | null}>
      paths: Array<{node: string; ok: boolean | null}>
      notChecked: Array<{node: string | null; check: string; required: boolean}>
    }
    const services = r.json.services as Report[]
    assert.deepEqual(
      services.flatMap((s) => s.findings.map((f) => [s.service.name, f.code, f.node, f.message])),
      [['svc-2', 'KPD-NODE-UNREADABLE', 'bench-node-1', `bench-node-1 could not be read: ${why}`]],
    )
    for (const s of services) {
      const broken = s.service.name === 'svc-2'
      assert.deepEqual(
        s.nodes.map((n) => [n.name, n.reachable, n.error]),
        nodes.map((n) => (broken && n === 'bench-node-1' ? [n, false, why] : [n, true, null])),
        s.service.name,
      )
      // Every path of every node read for the Service is walked and works.
      assert.deepEqual(
        [...new Set(s.paths.map((p) => `${p.node} ${p.ok}`))].sort(),
        nodes.filter((n) => !broken || n !== 'bench-node-1').map((n) => `${n} true`),
        s.service.name,
      )
      assert.deepEqual(
        s.notChecked.filter((n) => n.required).map((n) => `${n.check} ${n.node}`),
        broken ? ['node-read bench-node-1'] : [],
        s.service.name,
      )
    }
    // The node itself was read: its one broken rule is svc-2's alone.
    assert.deepEqual(
      r.json.nodes.map((n: {name: string; reachable: boolean}) => [n.name, n.reachable]),
      nodes.map((n) => [n, true]),
    )
  }
})

/** The debug Pod's reads: kube-proxy's rules on each node, node-b's with one endpoint of shop/web's DNAT rule broken. */
function liveAnswer(pod: {metadata?: unknown; spec?: unknown}, argv: string[]): RecordedExec {
  const node = NODES.find((n) => n.name === (pod.spec as {nodeName?: string}).nodeName)
  if (argv[0] === 'iptables-save' && node) {
    const rules = kubeProxyRules(node, SERVICES, labPods())
    if (node.name !== 'node-b') return {stdout: rules}
    const lines = rules.split('\n')
    const at = lines.findIndex((l) => /^-A KUBE-SEP-\S+ .*--comment "shop\/web:http" .*-j DNAT /.test(l))
    lines[at] = lines[at].replace('web:http"', 'web:http')
    liveBrokenLine = at + 1
    return {stdout: lines.join('\n')}
  }
  // A scan asks cluster DNS for its own name; svc for the Service's.
  if (argv[0] === 'dig')
    return {stdout: `${argv.some((a) => a.startsWith('kube-dns.')) ? DNS.clusterIP : WEB.clusterIP}\n`}
  return {stdout: ''}
}
let liveBrokenLine = 0

test("live scan (debug Pods): node-b's broken rule is shop/web's alone; kube-dns and node-a are judged", async () => {
  const live = serveLabClusterViaDebugPods(api, liveAnswer)
  const r = await runCli(['scan', '-A', ...live, '-o', 'json'], {HOME: join(tmp, 'home')})
  assert.equal(r.code, 3, r.stderr)
  assert.ok(liveBrokenLine > 0)
  const why = `its rules could not be judged: iptables-save.txt line ${liveBrokenLine}: unterminated quote`
  type Report = {
    service: {namespace: string; name: string}
    findings: Array<{code: string; node: string; message: string}>
    nodes: Array<{name: string; reachable: boolean; error: string | null}>
  }
  const services = r.json.services as Report[]
  assert.deepEqual(
    services.flatMap((s) => s.findings.map((f) => [s.service.name, f.code, f.node, f.message])),
    [['web', 'KPD-NODE-UNREADABLE', 'node-b', `node-b could not be read: ${why}`]],
  )
  assert.deepEqual(
    services.map((s) => [
      `${s.service.namespace}/${s.service.name}`,
      s.nodes.map((n) => [n.name, n.reachable, n.error]),
    ]),
    [
      [
        'kube-system/kube-dns',
        [
          ['node-a', true, null],
          ['node-b', true, null],
        ],
      ],
      [
        'shop/web',
        [
          ['node-a', true, null],
          ['node-b', false, why],
        ],
      ],
    ],
  )
})

test("a null or a wrong-typed entry in a node's path reads is said as left out; the run goes on", async () => {
  const dir = join(tmp, 'null-path-reads')
  cpSync('examples/healthy-cluster', dir, {recursive: true})
  writeFileSync(
    join(dir, 'nodes/node-a/path-reads.json'),
    JSON.stringify({sysctls: null, routeGet: [null, {address: 7}], conntrack: [null], skipped: [3]}),
  )
  const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', dir, '-o', 'json'])
  assert.notEqual(r.code, 2, r.stderr)
  assert.equal(r.json.nodes.find((n: {name: string}) => n.name === 'node-a').reachable, true)
})

test('scan: a Service whose objects no check expects is "not judged" with the reason; it ends nothing', () => {
  const {cluster, observations} = offlineCluster({
    editCluster: (c) => {
      c.service.spec!.ports = [null as never]
    },
  })
  const outcome = judgeService({service: cluster.service, state: cluster}, observations, {}, () => 'judged')
  assert.deepEqual(outcome, {
    namespace: 'shop',
    name: 'web',
    type: 'NodePort',
    skipped: "not judged: Cannot read properties of null (reading 'nodePort')",
  })
})
