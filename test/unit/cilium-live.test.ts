/**
 * Issue #29 item 3: on a node whose Services Cilium implements, `svc`, `scan` and `collect` read Cilium's Service list
 * live, in Cilium's agent Pod on that node (pods/exec: `cilium-dbg service list -o json`, `cilium` on agents that lack
 * cilium-dbg), and judge it with the KPD-CILIUM-* checks; where the agent cannot be read, what was not checked says
 * why and what to run by hand. The test API server (real HTTPS on loopback) answers the agents' exec with recorded
 * Service lists and the debug Pod's with a recorded Cilium node (no Cilium in this lab).
 */
import assert from 'node:assert/strict'
import {mkdtempSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {after, before, beforeEach, test} from 'node:test'
import {LabApiServer} from '../lab/apiserver.js'
import type {RecordedExec} from '../lab/apiserver-streams.js'
import {runCli, type CliResult} from '../helpers/run-cli.js'
import {endpointSliceObject, nodeObject, podObject, serviceObject} from '../fixtures/api-objects.js'
import {DNS, labPods, NODES, SERVICES, WEB} from '../fixtures/lab-cluster.js'
import {ciliumServiceList, type CiliumFaults} from '../fixtures/cilium-services.js'
import {agentDaemonSet, ciliumAgentPod, ciliumConfigMap, ciliumNodeDump} from '../fixtures/implementers.js'

const TOKEN = 'kpd-cilium-live'
const api = new LabApiServer({token: TOKEN, podStartMs: 10})
const home = mkdtempSync(join(tmpdir(), 'kpd-cilium-home-'))
const out = mkdtempSync(join(tmpdir(), 'kpd-cilium-bundle-'))
before(() => api.start())
after(async () => {
  await api.stop()
  rmSync(home, {recursive: true, force: true})
  rmSync(out, {recursive: true, force: true})
})

/** What each node's agent answers: its Service list with these faults, under the program names it has. */
interface Agent {
  faults?: CiliumFaults
  /** The agent's programs (default: cilium-dbg). */
  programs?: string[]
}
let agents: Record<string, Agent> = {}

const SERVICE_LIST = ['service', 'list', '-o', 'json']

function answer(pod: {metadata?: {name?: string}; spec?: unknown}, argv: string[]): RecordedExec | 'missing' {
  const node = (pod.spec as {nodeName?: string}).nodeName ?? ''
  const name = pod.metadata?.name ?? ''
  if (name.startsWith('cilium-')) {
    const agent = agents[node] ?? {}
    if (!(agent.programs ?? ['cilium-dbg']).includes(argv[0])) return 'missing'
    if (argv.slice(1).join(' ') !== SERVICE_LIST.join(' ')) return {stdout: '', stderr: 'unknown command', exitCode: 1}
    return {stdout: ciliumServiceList(node, agent.faults)}
  }
  // The debug Pod on a Cilium node: its rules are Cilium's chains; every other read answers with nothing.
  if (argv[0] === 'iptables-save') return {stdout: ciliumNodeDump()}
  if (argv[0] === 'dig')
    return {stdout: `${argv.some((a) => a.startsWith('kube-dns.')) ? DNS.clusterIP : WEB.clusterIP}\n`}
  if (argv[0] === 'ip' && argv.includes('get')) return {stdout: `${argv.at(-1)} dev cilium_host src 10.244.0.1 uid 0\n`}
  return {stdout: ''}
}

beforeEach(() => {
  agents = {}
  api.opts.forbidden = undefined
  api.opts.execAnswer = answer
  const pods = labPods()
  api.set('nodes', NODES.map(nodeObject))
  api.set('pods', [...pods.map(podObject), ...NODES.map((n) => ciliumAgentPod(n.name))])
  api.set('services', SERVICES.map(serviceObject))
  api.set(
    'endpointslices',
    SERVICES.map((s) => endpointSliceObject(s, pods)),
  )
  api.set('configmaps', [ciliumConfigMap('true')])
  api.set('daemonsets', [agentDaemonSet('kube-system', 'cilium')])
  api.set(
    'namespaces',
    ['default', 'shop', 'kube-system'].map((name) => ({metadata: {name}})),
  )
})

/** A stale backend in node-b's agent: one finding per frontend of shop/web (its ClusterIP and its NodePort). */
const STALE_ON_B = [
  'KPD-CILIUM-BACKEND-STALE@node-b',
  'KPD-CILIUM-BACKEND-STALE@node-b',
  'KPD-CILIUM-NODE-DIVERGES@node-b',
  'KPD-CILIUM-NODE-DIVERGES@node-b',
]

const LIVE = ['--via', 'debug-pod', '--debug-image', 'busybox:1.36']

function svc(...extra: string[]): Promise<CliResult> {
  return runCli(['svc', 'web', '-n', 'shop', '--kubeconfig', api.writeKubeconfig(), ...LIVE, '-o', 'json', ...extra], {
    HOME: home,
  })
}

const findings = (r: CliResult) =>
  r.json.findings.map((f: {code: string; node: string | null}) => `${f.code}@${f.node}`).sort()
const agentExecs = () =>
  api.requestLog
    .filter((e) => e.subresource === 'exec' && e.name?.startsWith('cilium-'))
    .map(
      (e) =>
        `${e.name} ${e.query
          .filter(([k]) => k === 'command')
          .map(([, v]) => v)
          .join(' ')}`,
    )
const proxyRulesGaps = (r: CliResult) =>
  r.json.notChecked.filter((n: {check: string}) => n.check === 'proxy-rules').map((n: {node: string}) => n.node)

test("healthy Cilium nodes: each agent's Service list read in its Pod and judged, no finding, Cilium named, exit 0", async () => {
  const before = api.requestLog.length
  const r = await svc()
  assert.deepEqual(findings(r), [])
  assert.deepEqual(proxyRulesGaps(r), [])
  // What was judged, in Cilium's terms: no path of kube-proxy's was traced on these nodes.
  assert.equal(r.json.summary, "✓ shop/web: Cilium's Service state agrees with the EndpointSlices on 2 node(s)")
  assert.equal(r.code, 0, r.stderr + JSON.stringify(r.json?.notChecked))
  assert.deepEqual(
    r.json.nodes.map((n: {name: string; implementer: {name: string}}) => `${n.name} ${n.implementer.name}`),
    ['node-a cilium', 'node-b cilium'],
  )
  const execs = api.requestLog
    .slice(before)
    .filter((e) => e.subresource === 'exec' && e.name?.startsWith('cilium-'))
    .map((e) => `${e.namespace}/${e.name} ${e.query.find(([k]) => k === 'container')?.[1]}`)
    .sort()
  assert.deepEqual(execs, ['kube-system/cilium-aq4zt cilium-agent', 'kube-system/cilium-bq4zt cilium-agent'])
})

test("node-b's agent keeps a backend no EndpointSlice has: KPD-CILIUM-BACKEND-STALE on node-b, exit 1", async () => {
  agents['node-b'] = {faults: {extraBackends: [{ip: '10.244.2.99', port: 8080, nodeName: 'node-b'}]}}
  const r = await svc()
  assert.equal(r.code, 1, r.stderr)
  assert.deepEqual(findings(r), STALE_ON_B)
})

test('an agent without cilium-dbg (before 1.15): its list is read with cilium instead, and judged the same', async () => {
  agents['node-a'] = {programs: ['cilium'], faults: {dropBackends: ['10.244.1.10']}}
  api.requestLog.length = 0
  const r = await svc()
  assert.deepEqual(
    agentExecs().filter((e) => e.startsWith('cilium-aq4zt')),
    ['cilium-aq4zt cilium-dbg service list -o json', 'cilium-aq4zt cilium service list -o json'],
  )
  // One finding per frontend of shop/web (its ClusterIP and its NodePort).
  assert.deepEqual(findings(r), [
    'KPD-CILIUM-BACKEND-MISSING@node-a',
    'KPD-CILIUM-BACKEND-MISSING@node-a',
    'KPD-CILIUM-NODE-DIVERGES@node-a',
    'KPD-CILIUM-NODE-DIVERGES@node-a',
  ])
})

test("exec into Cilium's agent refused (403): not checked, with why and the command to run by hand; exit 3", async () => {
  api.opts.forbidden = new Set(['create pods/exec kube-system'])
  // The debug Pod's reads need exec too: refused only in the agents' namespace, so the debug Pod lives elsewhere.
  const r = await svc('--debug-namespace', 'default')
  assert.deepEqual(findings(r), [])
  assert.equal(r.code, 3, r.stderr)
  const gap = r.json.notChecked.find(
    (n: {check: string; node: string}) => n.check === 'proxy-rules' && n.node === 'node-a',
  )
  assert.ok(gap, JSON.stringify(r.json.notChecked))
  assert.match(
    gap.reason,
    /Cilium's Service state was not read \(RBAC forbids create on pods\/exec in namespace "kube-system" \(403\): needed to read Cilium's agent's Pod kube-system\/cilium-aq4zt\); look with: kubectl -n kube-system exec cilium-aq4zt -- cilium-dbg service list$/,
  )
})

test("no agent Pod on node-b (its DaemonSet's Pod is not running): node-b's state not checked, node-a's judged", async () => {
  const pods = labPods()
  const stopped = {...ciliumAgentPod('node-b'), status: {phase: 'Pending'}}
  api.set('pods', [...pods.map(podObject), ciliumAgentPod('node-a'), stopped])
  const r = await svc()
  assert.deepEqual(proxyRulesGaps(r), ['node-b'])
  const gap = r.json.notChecked.find((n: {check: string}) => n.check === 'proxy-rules')
  assert.match(gap.reason, /was not read \(the Pod kube-system\/cilium-bq4zt on node-b is Pending\)/)
})

test("collect records each agent's list in the bundle; svc --snapshot judges the replay alike", async () => {
  agents['node-b'] = {faults: {extraBackends: [{ip: '10.244.2.99', port: 8080, nodeName: 'node-b'}]}}
  const dir = join(out, 'bundle')
  const c = await runCli(
    ['collect', 'svc', 'web', '-n', 'shop', '--kubeconfig', api.writeKubeconfig(), ...LIVE, '--out', dir],
    {HOME: home},
  )
  assert.equal(c.code, 0, c.stderr)
  assert.equal(
    readFileSync(join(dir, 'nodes', 'node-b', 'cilium-services.json'), 'utf8'),
    ciliumServiceList('node-b', agents['node-b'].faults),
  )
  const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', dir, '-o', 'json'], {HOME: home})
  assert.equal(r.code, 1, r.stderr)
  assert.deepEqual(findings(r), STALE_ON_B)
})

/** A scan's Services as "namespace/name ok|broken" with their findings, code@node, sorted. */
const scanned = (r: CliResult) =>
  r.json.services.map(
    (s: {service: {namespace: string; name: string}; ok: boolean; findings: Array<{code: string; node: string}>}) =>
      `${s.service.namespace}/${s.service.name} ${s.ok ? 'ok' : 'broken'}: ${s.findings
        .map((f) => `${f.code}@${f.node}`)
        .sort()
        .join(' ')}`,
  )

test('scan -A over Cilium nodes: each agent read once for all Services; shop/web broken on node-b only, kube-dns healthy', async () => {
  agents['node-b'] = {faults: {extraBackends: [{ip: '10.244.2.99', port: 8080, nodeName: 'node-b'}]}}
  for (const threads of ['1', '2']) {
    api.requestLog.length = 0
    const r = await runCli(
      ['scan', '-A', '--kubeconfig', api.writeKubeconfig(), ...LIVE, '--threads', threads, '-o', 'json'],
      {HOME: home},
    )
    assert.equal(r.code, 1, r.stderr)
    assert.equal(
      r.json.summary,
      '✗ all namespaces: 1 of 2 diagnosed Services are broken (0 skipped; 2 of 2 nodes read)',
    )
    assert.deepEqual(scanned(r), ['kube-system/kube-dns ok: ', `shop/web broken: ${STALE_ON_B.join(' ')}`], threads)
    assert.equal(
      r.json.services[0].summary,
      "✓ kube-system/kube-dns: Cilium's Service state agrees with the EndpointSlices on 2 node(s)",
    )
    for (const s of r.json.services)
      assert.deepEqual(
        s.nodes.map((n: {name: string; implementer: {name: string}}) => `${n.name} ${n.implementer.name}`),
        ['node-a cilium', 'node-b cilium'],
      )
    // Cilium's state is judged: kube-proxy's rules are not asked for on these nodes, nothing required is left unchecked.
    assert.deepEqual(
      r.json.services.flatMap((s: {notChecked: Array<{check: string; required: boolean}>}) =>
        s.notChecked.filter((n) => n.required).map((n) => n.check),
      ),
      [],
    )
    assert.deepEqual(agentExecs().sort(), [
      'cilium-aq4zt cilium-dbg service list -o json',
      'cilium-bq4zt cilium-dbg service list -o json',
    ])
  }
})
