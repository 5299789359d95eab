/**
 * Issue #32 item 4: one node's broken rule, or a malformed entry in its path reads, never ends a run. Rules are
 * parsed chain by chain as the walk reaches them: the node whose rules cannot be judged is reported unreadable with
 * its file and line, and the other nodes are judged. One Service that cannot be judged never ends a scan.
 */
import assert from 'node:assert/strict'
import {cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {after, test} from 'node:test'
import {judgeService} from '../../src/diagnosis/judge-services.js'
import {offlineCluster} from '../helpers/offline-cluster.js'
import {runCli} from '../helpers/run-cli.js'

const tmp = mkdtempSync(join(tmpdir(), 'kpd-isolation-'))
after(() => rmSync(tmp, {recursive: true, force: true}))

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
