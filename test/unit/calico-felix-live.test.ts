/**
 * Issue #29 item 1: Calico's eBPF dataplane is recognised from its FelixConfigurations (crd.projectcalico.org/v1, or
 * projectcalico.org/v3 on Calico's native v3 CRDs) as Felix reads them, read live through the test API server (real
 * HTTPS on loopback) only where calico-node runs; a cluster without Calico's CRDs is silent, a refusal (403) is said;
 * `collect` records them and a replay judges the same, an older bundle without them says they were not recorded.
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
import {labPods, NODES, SERVICES, WEB} from '../fixtures/lab-cluster.js'
import {agentDaemonSet, calicoNodePod, cniOnlyDump, felixConfiguration} from '../fixtures/implementers.js'

const TOKEN = 'kpd-calico-live'
const api = new LabApiServer({token: TOKEN, podStartMs: 10})
const home = mkdtempSync(join(tmpdir(), 'kpd-calico-home-'))
const out = mkdtempSync(join(tmpdir(), 'kpd-calico-bundle-'))
before(() => api.start())
after(async () => {
  await api.stop()
  rmSync(home, {recursive: true, force: true})
  rmSync(out, {recursive: true, force: true})
})

/** The debug Pod on a node: no kube-proxy rules and no Calico chains (the eBPF dataplane programs none of them). */
function answer(_pod: unknown, argv: string[]): RecordedExec {
  if (argv[0] === 'iptables-save') return {stdout: cniOnlyDump('LOCAL-FIREWALL')}
  if (argv[0] === 'dig') return {stdout: `${WEB.clusterIP}\n`}
  return {stdout: ''}
}

const DEFAULT_ON = felixConfiguration('default', true)
const B_OFF = felixConfiguration('node.node-b', false)

beforeEach(() => {
  api.opts.forbidden = undefined
  api.opts.calicoCrds = 'crd.projectcalico.org/v1'
  api.opts.execAnswer = answer
  const pods = labPods()
  api.set('nodes', NODES.map(nodeObject))
  api.set('pods', [...pods.map(podObject), ...NODES.map((n) => calicoNodePod(n.name, undefined))])
  api.set('services', SERVICES.map(serviceObject))
  api.set(
    'endpointslices',
    SERVICES.map((s) => endpointSliceObject(s, pods)),
  )
  api.set('configmaps', [])
  api.set('daemonsets', [agentDaemonSet('calico-system', 'calico-node')])
  api.set('felixconfigurations', [DEFAULT_ON, B_OFF])
  api.set(
    'namespaces',
    ['default', 'shop', 'kube-system', 'calico-system'].map((name) => ({metadata: {name}})),
  )
})

const LIVE = ['--via', 'debug-pod', '--debug-image', 'busybox:1.36']

const svc = (...extra: string[]): Promise<CliResult> =>
  runCli(['svc', 'web', '-n', 'shop', '--kubeconfig', api.writeKubeconfig(), ...LIVE, '-o', 'json', ...extra], {
    HOME: home,
  })

type Node = {name: string; implementer: {name: string; source: string; evidence: string[]}}
const implementers = (r: CliResult) =>
  r.json.nodes.map(
    (n: Node) => `${n.name} ${n.implementer.name} (${n.implementer.source}): ${n.implementer.evidence.join(' | ')}`,
  )
const findings = (r: CliResult) =>
  r.json.findings.map((f: {code: string; node: string | null}) => `${f.code}@${f.node}`).sort()
const felixRequests = (from: number) =>
  api.requestLog
    .slice(from)
    .filter((e) => e.resource === 'felixconfigurations')
    .map((e) => `${e.verb} ${e.path}`)

const A_FROM_DEFAULT =
  'node-a calico-ebpf (api): calico-node calico-system/calico-node-aq4zt runs on node-a and FelixConfiguration default (crd.projectcalico.org/v1) has bpfEnabled: true'
const B_NOTHING = 'node-b none (none): '

test('FelixConfiguration default turns eBPF on, node.node-b turns it off: node-a Calico eBPF, node-b nothing, one list', async () => {
  const from = api.requestLog.length
  const r = await svc()
  assert.deepEqual(implementers(r), [A_FROM_DEFAULT, B_NOTHING], r.stderr)
  assert.deepEqual(findings(r), ['KPD-NO-IMPLEMENTER@node-b'])
  assert.deepEqual(felixRequests(from), ['list /apis/crd.projectcalico.org/v1/felixconfigurations'])
})

test('Calico on native v3 CRDs (crd.projectcalico.org not served): projectcalico.org/v3 is read instead', async () => {
  api.opts.calicoCrds = 'projectcalico.org/v3'
  const v3 = 'projectcalico.org/v3'
  api.set('felixconfigurations', [
    felixConfiguration('default', true, v3),
    felixConfiguration('node.node-b', false, v3),
  ])
  const from = api.requestLog.length
  const r = await svc()
  assert.deepEqual(implementers(r), [
    A_FROM_DEFAULT.replace('crd.projectcalico.org/v1', 'projectcalico.org/v3'),
    B_NOTHING,
  ])
  assert.deepEqual(felixRequests(from), [
    'list /apis/crd.projectcalico.org/v1/felixconfigurations',
    'list /apis/projectcalico.org/v3/felixconfigurations',
  ])
})

test('no Calico CRDs (404 on both groups): nothing said of them, calico-node alone is no implementer', async () => {
  api.opts.calicoCrds = undefined
  const r = await svc()
  assert.deepEqual(implementers(r), ['node-a none (none): ', B_NOTHING])
  assert.deepEqual(findings(r), ['KPD-NO-IMPLEMENTER@node-a', 'KPD-NO-IMPLEMENTER@node-b'])
  assert.doesNotMatch(JSON.stringify(r.json) + r.stderr, /FelixConfiguration/i)
})

test('FelixConfigurations forbidden (403): detection says what it could not read, FELIX_BPFENABLED still decides', async () => {
  api.opts.forbidden = new Set(['list felixconfigurations '])
  api.set('pods', [...labPods().map(podObject), calicoNodePod('node-a', 'true'), calicoNodePod('node-b', undefined)])
  const from = api.requestLog.length
  const r = await svc()
  assert.deepEqual(implementers(r), [
    'node-a calico-ebpf (api): calico-node calico-system/calico-node-aq4zt runs on node-a with FELIX_BPFENABLED=true',
    'node-b kube-proxy (assumed): no other implementer was found, but the API could not tell all: FelixConfigurations (crd.projectcalico.org/v1, projectcalico.org/v3) not read',
  ])
  // The refused group is asked once, then the other (a user may be granted it); both refusals end the read.
  assert.deepEqual(felixRequests(from), [
    'list /apis/crd.projectcalico.org/v1/felixconfigurations',
    'list /apis/projectcalico.org/v3/felixconfigurations',
  ])
})

test('no calico-node Pod: FelixConfigurations are not asked for', async () => {
  api.set('pods', labPods().map(podObject))
  const from = api.requestLog.length
  const r = await svc()
  assert.equal(r.json.nodes.length, 2, r.stderr)
  assert.deepEqual(felixRequests(from), [])
})

test("collect keeps each FelixConfiguration's name and bpfEnabled only; the replay names Calico eBPF from it; a bundle without them says so", async () => {
  const dir = join(out, 'bundle')
  const c = await runCli(
    ['collect', 'svc', 'web', '-n', 'shop', '--kubeconfig', api.writeKubeconfig(), ...LIVE, '--out', dir],
    {HOME: home},
  )
  assert.equal(c.code, 0, c.stderr)
  assert.deepEqual(JSON.parse(readFileSync(join(dir, 'felixconfigurations.json'), 'utf8')), {
    apiVersion: 'v1',
    kind: 'List',
    items: [
      {
        apiVersion: 'crd.projectcalico.org/v1',
        kind: 'FelixConfiguration',
        metadata: {name: 'default'},
        spec: {bpfEnabled: true},
      },
      {
        apiVersion: 'crd.projectcalico.org/v1',
        kind: 'FelixConfiguration',
        metadata: {name: 'node.node-b'},
        spec: {bpfEnabled: false},
      },
    ],
  })
  const replay = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', dir, '-o', 'json'], {HOME: home})
  assert.deepEqual(implementers(replay), [A_FROM_DEFAULT, B_NOTHING], replay.stderr)
  assert.deepEqual(findings(replay), ['KPD-NO-IMPLEMENTER@node-b'])

  rmSync(join(dir, 'felixconfigurations.json'))
  const older = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', dir, '-o', 'json'], {HOME: home})
  const notRecorded =
    'kube-proxy (assumed): no other implementer was found, but the API could not tell all: FelixConfigurations (crd.projectcalico.org/v1, projectcalico.org/v3) not read'
  assert.deepEqual(implementers(older), [`node-a ${notRecorded}`, `node-b ${notRecorded}`], older.stderr)
})

test('a FelixConfiguration whose bpfEnabled is no boolean is left out with one warning, the others read', async () => {
  api.set('felixconfigurations', [{...DEFAULT_ON, spec: {bpfEnabled: 'true'}}, felixConfiguration('node.node-a', true)])
  const r = await svc()
  assert.deepEqual(implementers(r), [
    'node-a calico-ebpf (api): calico-node calico-system/calico-node-aq4zt runs on node-a and FelixConfiguration node.node-a (crd.projectcalico.org/v1) has bpfEnabled: true',
    B_NOTHING,
  ])
  assert.match(r.stderr, /FelixConfiguration default skipped: spec\.bpfEnabled should be true or false, is a string/)
})
