import assert from 'node:assert/strict'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {describe, test} from 'node:test'
import {labGuard} from '../helpers/lab-guard.js'
import {withLab} from '../helpers/lab-suite.js'
import {allowingRule, grants, grantUsed, readRoleRules} from '../helpers/rbac.js'
import {runCli} from '../helpers/run-cli.js'
import {calicoNodePod, felixConfiguration} from '../fixtures/implementers.js'
import {labPodSandbox} from '../lab/apiserver-sandboxes.js'
import type {NetnsLab} from '../lab/netns-lab.js'

const why = labGuard()

const ROLE = 'deploy/rbac/kproxy-doctor-read.yaml'
const DEBUG_POD_ROLE = 'deploy/rbac/kproxy-doctor-debug-pod.yaml'

type Slice = {
  metadata?: {namespace?: string; labels?: Record<string, string>}
  endpoints?: Array<{addresses: string[]; conditions?: {ready?: boolean}; nodeName?: string; targetRef?: unknown}>
  ports?: Array<{name?: string; port?: number; protocol?: string}>
}

/** The Endpoints objects an older cluster would serve for the lab's EndpointSlices (the endpoints controller's shape). */
function endpointsFromSlices(slices: Slice[]) {
  return slices.map((s) => {
    const address = (ready: boolean) =>
      (s.endpoints ?? [])
        .filter((e) => (e.conditions?.ready ?? false) === ready)
        .map((e) => ({ip: e.addresses[0], nodeName: e.nodeName, targetRef: e.targetRef}))
    return {
      metadata: {name: s.metadata?.labels?.['kubernetes.io/service-name'], namespace: s.metadata?.namespace},
      subsets: [{addresses: address(true), notReadyAddresses: address(false), ports: s.ports}],
    }
  })
}

/**
 * The ClusterRole in the repository is exactly what the tool needs: every request the commands make against the
 * test API server (which logs each one as the audit log would) is allowed by it, and every grant in it is used.
 */
describe('the documented ClusterRole', {skip: why}, () => {
  let lab: NetnsLab
  withLab((l) => (lab = l))

  test('allows every request of svc, scan, collect and trace --node, and holds nothing unused', async () => {
    const rules = readRoleRules(ROLE)
    const cluster = ['--kubeconfig', lab.kubeconfigPath]
    const nodes = ['--ssh-config', lab.sshConfigPath]
    const out = mkdtempSync(join(tmpdir(), 'kpd-rbac-'))
    const runs: Array<{args: string[]; code: number}> = []
    const run = async (args: string[], code: number) => {
      const r = await runCli(args)
      assert.equal(r.code, code, `${args.join(' ')}\n${r.stdout}${r.stderr}`)
      runs.push({args, code})
    }
    // A policy that allows everything and selects by namespace: the Namespaces are read too.
    lab.api.set('networkpolicies', [
      {
        metadata: {namespace: 'shop', name: 'allow-all'},
        spec: {podSelector: {}, ingress: [{from: [{namespaceSelector: {}}, {ipBlock: {cidr: '0.0.0.0/0'}}]}]},
      },
    ])
    try {
      lab.api.requestLog.length = 0
      await run(['svc', 'web', '-n', 'shop', ...cluster, ...nodes], 0)
      // calico-node on node-a (FELIX_BPFENABLED unset): its FelixConfigurations are read, under each group in turn.
      const pods = lab.api.objects.get('pods') ?? []
      lab.api.set('pods', [...pods, calicoNodePod('node-a', undefined)])
      lab.api.set('felixconfigurations', [felixConfiguration('default', false)])
      try {
        for (const served of ['crd.projectcalico.org/v1', 'projectcalico.org/v3']) {
          lab.api.opts.calicoCrds = served
          await run(['svc', 'web', '-n', 'shop', ...cluster, ...nodes], 0)
        }
      } finally {
        lab.api.opts.calicoCrds = undefined
        lab.api.set('pods', pods)
        lab.api.set('felixconfigurations', [])
      }
      await run(['svc', 'wbe', '-n', 'shop', ...cluster, ...nodes], 2)
      await run(['scan', '-n', 'shop', ...cluster, ...nodes], 0)
      await run(['scan', '-A', ...cluster, ...nodes], 0)
      await run(['collect', 'svc', 'web', '-n', 'shop', ...cluster, ...nodes, '--out', join(out, 'bundle')], 0)
      await run(
        [
          'trace',
          '--node',
          'node-a',
          '--src',
          '10.244.1.20',
          '--dst',
          '10.96.10.10',
          '--dport',
          '80',
          ...cluster,
          ...nodes,
        ],
        0,
      )
      lab.api.set('endpoints', endpointsFromSlices(lab.api.objects.get('endpointslices') ?? []))
      lab.api.opts.withoutEndpointSlices = true
      try {
        await run(['svc', 'web', '-n', 'shop', ...cluster, ...nodes], 0)
      } finally {
        lab.api.opts.withoutEndpointSlices = false
      }
    } finally {
      lab.api.set('networkpolicies', [])
      rmSync(out, {recursive: true, force: true})
    }
    const log = lab.api.requestLog
    assert.ok(log.length > 0)
    const denied = log.filter((r) => allowingRule(rules, r) === undefined).map((r) => `${r.verb} ${r.path}`)
    assert.deepEqual([...new Set(denied)], [], 'requests the ClusterRole does not allow')
    const used = new Set(
      log.flatMap((r) => {
        const rule = allowingRule(rules, r)
        return rule && rule !== 'discovery' ? [grantUsed(rule, r)] : []
      }),
    )
    assert.deepEqual(
      grants(rules).filter((g) => !used.has(g)),
      [],
      'grants no command used',
    )
  })

  test('--via debug-pod: the ClusterRole plus the debug-pod Role allow every request, each Role grant is used, all in kube-system', async () => {
    const read = readRoleRules(ROLE)
    const debug = readRoleRules(DEBUG_POD_ROLE)
    lab.api.opts.podSandbox = labPodSandbox(lab)
    try {
      lab.api.requestLog.length = 0
      const r = await runCli(['svc', 'web', '-n', 'shop', '--kubeconfig', lab.kubeconfigPath, '--via', 'debug-pod'])
      assert.equal(r.code, 0, r.stdout + r.stderr)
    } finally {
      lab.api.opts.podSandbox = undefined
    }
    const log = lab.api.requestLog
    const denied = log
      .filter(
        (r) =>
          allowingRule(read, r) === undefined &&
          (r.namespace !== 'kube-system' || allowingRule(debug, r) === undefined),
      )
      .map((r) => `${r.verb} ${r.path}`)
    assert.deepEqual([...new Set(denied)], [], 'requests the two roles do not allow')
    const used = new Set(
      log.flatMap((r) =>
        allowingRule(read, r) === undefined && r.namespace === 'kube-system'
          ? [
              grantUsed(
                debug.find((rule) => allowingRule([rule], r))!,
                r,
              ),
            ]
          : [],
      ),
    )
    // create on pods/exec and pods/portforward is for 1.35's WebSocket check: the lab, as older servers, authorises get.
    assert.deepEqual(
      grants(debug).filter((g) => !used.has(g) && !/^create pods\/(exec|portforward) /.test(g)),
      [],
      'grants no debug-pod run used',
    )
  })
})
