import assert from 'node:assert/strict'
import {execFile, spawn} from 'node:child_process'
import {promisify} from 'node:util'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {dirname, join, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'
import {after, describe, test} from 'node:test'
import {labAccess} from '../helpers/lab-cli.js'
import {labGuard} from '../helpers/lab-guard.js'
import {withLab} from '../helpers/lab-suite.js'
import {runCli, type CliResult} from '../helpers/run-cli.js'
import {labPodSandbox} from '../lab/apiserver-sandboxes.js'
import {KUBE_PROXY_DIGEST} from '../fixtures/api-objects.js'
import type {NetnsLab} from '../lab/netns-lab.js'

const why = labGuard()

const BIN = resolve(dirname(fileURLToPath(import.meta.url)), '../../../bin/run.js')
/** kube-proxy's DaemonSet's image, pinned by the digest its running Pods report (never a Pod's own choice). */
const KUBE_PROXY_IMAGE = `registry.k8s.io/kube-proxy:v1.33.0@${KUBE_PROXY_DIGEST}`
const KUBE_PROXY_ORIGIN =
  "kube-proxy's DaemonSet kube-system/kube-proxy, digest from its running Pod kube-system/kube-proxy-ax7k2"
/** The debug Pod's stand-in image lacks what kube-proxy's lacks: those programs run as the node's own (chroot /host). */
const DEBUG_IMAGE_LACKS = {'kproxy-doctor-': ['ip', 'bridge', 'ipvsadm', 'sysctl'], 'kube-proxy-': ['ipvsadm']}
const MANAGED = 'app.kubernetes.io/managed-by'

type Pod = {
  metadata?: {name?: string; namespace?: string; labels?: Record<string, string>}
  spec?: {
    nodeName?: string
    hostNetwork?: boolean
    hostPID?: boolean
    tolerations?: unknown[]
    volumes?: {name: string; hostPath?: {path?: string}}[]
    containers?: {
      image?: string
      securityContext?: unknown
      resources?: unknown
      volumeMounts?: {name: string; mountPath: string; readOnly?: boolean}[]
    }[]
  }
}

describe(
  'svc --via debug-pod: a short-lived privileged Pod on each node, read through pods/exec, always deleted',
  {skip: why},
  () => {
    let lab: NetnsLab
    const home = mkdtempSync(join(tmpdir(), 'kpd-nossh-'))
    after(() => rmSync(home, {recursive: true, force: true}))
    withLab((l) => {
      lab = l
      lab.api.opts.podSandbox = labPodSandbox(lab, DEBUG_IMAGE_LACKS)
    })

    const viaDebugPod = (...extra: string[]): Promise<CliResult> =>
      runCli(
        ['svc', 'web', '-n', 'shop', '--kubeconfig', lab.kubeconfigPath, '--via', 'debug-pod', '-o', 'json', ...extra],
        {HOME: home},
      )
    const viaSsh = (): Promise<CliResult> =>
      runCli(['svc', 'web', '-n', 'shop', ...labAccess(lab), '--via', 'ssh', '-o', 'json'], {HOME: home})
    const findings = (r: CliResult) =>
      r.json.findings.map((f: {code: string; node: string | null}) => `${f.code}@${f.node}`).sort()
    const node = (r: CliResult, name: string) => r.json.nodes.find((n: {name: string}) => n.name === name)
    /** The run id the announcement gave (the kproxy-doctor/run label of this run's Pods). */
    const runId = (r: CliResult) => /kproxy-doctor\/run=([0-9a-f]{6});/.exec(r.stderr)?.[1]
    const podsOf = (id: string | undefined) =>
      (lab.api.podsEverCreated as Pod[]).filter((p) => p.metadata?.labels?.['kproxy-doctor/run'] === id)
    const leftBehind = () =>
      (lab.api.createdPods as Pod[])
        .filter((p) => p.metadata?.labels?.[MANAGED] === 'kproxy-doctor')
        .map((p) => p.metadata?.name)
    const announcement = (nodes: string, image = `image ${KUBE_PROXY_IMAGE}, ${KUBE_PROXY_ORIGIN}`) => [
      `kproxy-doctor: --via debug-pod: creating a Pod (hostNetwork; capabilities NET_ADMIN, NET_RAW, SYS_CHROOT, not privileged; the node's / read-only at /host; at most 1 CPU and 512Mi memory; ${image}) in namespace "kube-system" on ${nodes}; each is deleted once its node is read`,
      /^kproxy-doctor: the Pods are labelled app\.kubernetes\.io\/managed-by=kproxy-doctor,kproxy-doctor\/run=[0-9a-f]{6}; leftovers, if any: kubectl delete pod -A -l app\.kubernetes\.io\/managed-by=kproxy-doctor$/,
    ]
    const assertAnnounced = (r: CliResult, nodes = 'node-a, node-b', image?: string) => {
      const [first, second] = announcement(nodes, image)
      const lines = r.stderr.split('\n')
      assert.equal(lines[0], first, r.stderr)
      assert.match(lines[1], second as RegExp, r.stderr)
    }

    test("SEP DNAT deleted on node-b: the same findings and paths on the same node as over SSH; the Pods sent are pinned, with only the capabilities the reads need, read-only on the node, kube-proxy's image; none is left", async () => {
      lab.applyRules('node-b', {dropDnatFor: '10.244.1.10'})
      try {
        const before = lab.api.requestLog.length
        const debug = await viaDebugPod()
        const ssh = await viaSsh()
        assert.equal(ssh.code, 1, ssh.stderr)
        assert.equal(debug.code, 1, debug.stderr)
        assert.ok(findings(ssh).includes('KPD-SEP-MISSING@node-b'), JSON.stringify(findings(ssh)))
        assert.deepEqual(findings(debug), findings(ssh))
        const walk = (r: CliResult) =>
          r.json.paths.map(
            (p: {node: string; entry: string; breaksAt: string | null}) => `${p.node} ${p.entry} ${p.breaksAt}`,
          )
        assert.deepEqual(walk(debug), walk(ssh))
        assertAnnounced(debug)
        assert.equal(debug.stderr.split('\n').filter(Boolean).length, 2, debug.stderr)

        const id = runId(debug)
        const pods = podsOf(id)
        assert.deepEqual(pods.map((p) => p.spec?.nodeName).sort(), ['node-a', 'node-b'])
        for (const p of pods) {
          const spec = p.spec!
          assert.equal(p.metadata?.namespace, 'kube-system')
          assert.equal(p.metadata?.name, `kproxy-doctor-${id}-${spec.nodeName}`)
          assert.equal(p.metadata?.labels?.[MANAGED], 'kproxy-doctor')
          assert.equal(spec.hostNetwork, true)
          assert.equal(spec.hostPID, undefined)
          assert.deepEqual(spec.tolerations, [{operator: 'Exists'}])
          assert.equal(spec.containers?.length, 1)
          const c = spec.containers![0]
          assert.equal(c.image, KUBE_PROXY_IMAGE)
          // What the reads need and no more: no privileged container, three capabilities, nothing written.
          assert.deepEqual(c.securityContext, {
            privileged: false,
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            capabilities: {drop: ['ALL'], add: ['NET_ADMIN', 'NET_RAW', 'SYS_CHROOT']},
          })
          assert.deepEqual(c.resources, {requests: {cpu: '50m', memory: '64Mi'}, limits: {cpu: '1', memory: '512Mi'}})
          const root = spec.volumes?.find((v) => v.hostPath?.path === '/')
          assert.deepEqual(
            c.volumeMounts?.filter((m) => m.name === root?.name),
            [{name: root?.name, mountPath: '/host', readOnly: true}],
          )
        }
        for (const name of ['node-a', 'node-b']) {
          const n = node(debug, name)
          assert.equal(n.reachable, true)
          assert.equal(n.readVia.transport, 'debug-pod')
          assert.equal(n.readVia.address, `pod kube-system/kproxy-doctor-${id}-${name}`)
          assert.equal(n.readVia.why, `--via debug-pod (image ${KUBE_PROXY_IMAGE}, ${KUBE_PROXY_ORIGIN})`)
          assert.deepEqual(n.readVia.notUsed, [
            {transport: 'ssh', reason: '--via debug-pod'},
            {transport: 'kube-proxy', reason: '--via debug-pod'},
          ])
          // ip, bridge and sysctl are not in the image: they ran as the node's own, so nothing but ipvsadm may be missing.
          assert.deepEqual(
            n.readVia.notRead.filter((l: string) => !l.startsWith('ipvsadm ')),
            [],
          )
        }
        assert.deepEqual(leftBehind(), [], 'no debug Pod is left behind')
        const log = lab.api.requestLog.slice(before)
        const onPods = (verb: string) =>
          log.filter(
            (e) =>
              e.resource === 'pods' && !e.subresource && e.verb === verb && e.name?.startsWith(`kproxy-doctor-${id}`),
          ).length
        assert.equal(
          log.filter(
            (e) => e.resource === 'pods' && e.verb === 'create' && !e.subresource && e.namespace === 'kube-system',
          ).length,
          2,
        )
        assert.equal(onPods('delete'), 2)
        const execs = log.filter((e) => e.subresource === 'exec')
        assert.ok(
          execs.length >= 12 && execs.every((e) => e.name?.startsWith(`kproxy-doctor-${id}-`)),
          "every read ran in the debug Pods, none in kube-proxy's",
        )
        const argv = execs.map((e) =>
          e.query
            .filter(([k]) => k === 'command')
            .map(([, v]) => v)
            .join(' '),
        )
        assert.ok(argv.includes('iptables-save'), 'iptables-save from the image, as one argv')
        assert.ok(
          argv.includes('chroot /host ip -o link show'),
          `the node's own ip through chroot: ${argv.join(' | ')}`,
        )
        assert.ok(!argv.some((a) => /^(sh|bash|dash) /.test(a)), 'never a shell')
      } finally {
        lab.clearFaults()
      }
    })

    test('--debug-image names the image; human output says per node it was read through the debug Pod', async () => {
      const r = await runCli(
        [
          'svc',
          'web',
          '-n',
          'shop',
          '--kubeconfig',
          lab.kubeconfigPath,
          '--via',
          'debug-pod',
          '--debug-image',
          'busybox:1.36',
        ],
        {HOME: home},
      )
      assert.equal(r.code, 0, r.stdout + r.stderr)
      assertAnnounced(r, 'node-a, node-b', 'image busybox:1.36, --debug-image')
      const id = /kproxy-doctor\/run=([0-9a-f]{6});/.exec(r.stderr)?.[1]
      assert.deepEqual(
        podsOf(id).map((p) => p.spec?.containers?.[0].image),
        ['busybox:1.36', 'busybox:1.36'],
      )
      assert.match(
        r.stdout,
        new RegExp(
          `^ {2}node-a: debug-pod \\(pod kube-system/kproxy-doctor-${id}-node-a\\): --via debug-pod \\(image busybox:1\\.36, --debug-image\\)`,
          'm',
        ),
      )
      assert.deepEqual(leftBehind(), [])
      const misuse = await runCli(
        ['svc', 'web', '-n', 'shop', '--kubeconfig', lab.kubeconfigPath, '--debug-image', 'busybox:1.36'],
        {HOME: home},
      )
      assert.equal(misuse.code, 2)
      assert.match(
        misuse.stderr,
        /--debug-image and --debug-namespace are used only with --via debug-pod \(this run: --via auto\)/,
      )
    })

    test('create refused (403) on node-b: one line naming the verb and resource, node-b API-only and listed as not checked, node-a still read', async () => {
      lab.api.opts.forbidPodsOn = new Set(['node-b'])
      try {
        const r = await viaDebugPod()
        assert.equal(r.code, 3, r.stderr)
        const warnings = r.stderr.split('\n').filter((l) => l.includes('warning'))
        assert.deepEqual(warnings, [
          'kproxy-doctor: warning: RBAC forbids create on pods in namespace "kube-system" (403): needed to create the debug Pods',
        ])
        assertAnnounced(r)
        assert.equal(node(r, 'node-a').reachable, true)
        assert.equal(node(r, 'node-a').readVia.transport, 'debug-pod')
        const b = node(r, 'node-b')
        assert.equal(b.reachable, false)
        assert.equal(b.readVia.transport, null)
        assert.equal(
          b.readVia.why,
          'API-only: debug-pod: RBAC forbids create on pods in namespace "kube-system" (403): needed to create the debug Pods',
        )
        assert.deepEqual(
          r.json.notChecked
            .filter((n: {node: string | null; required: boolean}) => n.node === 'node-b' && n.required)
            .map((n: {check: string}) => n.check),
          ['node-read'],
        )
        assert.ok(r.json.paths.some((p: {node: string}) => p.node === 'node-a'))
        assert.ok(!r.json.paths.some((p: {node: string}) => p.node === 'node-b'))
        assert.deepEqual(leftBehind(), [])
      } finally {
        lab.api.opts.forbidPodsOn = undefined
      }
      lab.api.opts.forbidden = new Set(['create pods kube-system'])
      try {
        const r = await viaDebugPod()
        assert.equal(r.code, 3, r.stderr) // no node read: the run is incomplete
        assert.deepEqual(
          r.stderr.split('\n').filter((l) => l.includes('warning')),
          [
            'kproxy-doctor: warning: RBAC forbids create on pods in namespace "kube-system" (403): needed to create the debug Pods',
          ],
          'one line for the whole run, not one per node',
        )
        assert.deepEqual(
          r.json.nodes.map(
            (n: {name: string; readVia: {transport: string | null}}) => `${n.name} ${n.readVia.transport}`,
          ),
          ['node-a null', 'node-b null'],
        )
      } finally {
        lab.api.opts.forbidden = undefined
      }
    })

    test("a hung exec in node-b's debug Pod ends at its timeout (a dump's: 4 × --timeout); node-a is diagnosed; both Pods are deleted", async () => {
      lab.api.opts.hungExecOf = (pod) =>
        (pod as Pod).metadata?.labels?.[MANAGED] === 'kproxy-doctor' && (pod as Pod).spec?.nodeName === 'node-b'
      try {
        const r = await viaDebugPod('--timeout', '3')
        assert.equal(r.code, 3, r.stderr)
        const b = node(r, 'node-b')
        assert.equal(b.reachable, false)
        assert.match(
          b.error,
          /iptables-save in the debug Pod kube-system\/kproxy-doctor-[0-9a-f]{6}-node-b did not finish within 12s/,
        )
        assert.equal(b.readVia.transport, 'debug-pod')
        assert.deepEqual(findings(r), ['KPD-NODE-UNREADABLE@node-b'])
        assert.ok(r.json.paths.some((p: {node: string; ok: boolean}) => p.node === 'node-a' && p.ok))
        assert.deepEqual(podsOf(runId(r)).length, 2)
        assert.deepEqual(leftBehind(), [], 'the hung Pod is deleted too')
      } finally {
        lab.api.opts.hungExecOf = undefined
      }
    })

    test('a Pod that never runs: the node is API-only with the reason after --timeout, and the Pod is deleted', async () => {
      lab.api.opts.podStartMs = Infinity
      try {
        const r = await viaDebugPod('--timeout', '2', '--nodes', 'node-a')
        assert.equal(r.code, 3, r.stderr) // the one node asked for was not read: the run is incomplete
        const a = node(r, 'node-a')
        assert.equal(a.readVia.transport, null)
        assert.match(
          a.readVia.why,
          /^API-only: debug-pod: the debug Pod kube-system\/kproxy-doctor-[0-9a-f]{6}-node-a was not running within 2s \(Pending\)$/,
        )
        assert.deepEqual(leftBehind(), [])
      } finally {
        lab.api.opts.podStartMs = undefined
      }
    })

    test('a Pod that cannot be deleted: one warning per Pod with the kubectl command that removes it, which does; the documented cleanup removes any', async () => {
      lab.api.opts.forbidden = new Set(['delete pods kube-system'])
      let r: CliResult
      try {
        r = await viaDebugPod('--timeout', '3')
      } finally {
        lab.api.opts.forbidden = undefined
      }
      assert.equal(r.code, 0, r.stderr)
      const id = runId(r)
      // The nodes are read at once: their lines come in the order their reads end.
      const warnings = r.stderr
        .split('\n')
        .filter((l) => l.includes('warning'))
        .sort()
      assert.deepEqual(
        warnings,
        ['node-a', 'node-b'].map(
          (n) =>
            `kproxy-doctor: warning: the debug Pod kube-system/kproxy-doctor-${id}-${n} on ${n} was not deleted (RBAC forbids delete on pods in namespace "kube-system" (403)): delete it with: kubectl --kubeconfig ${lab.kubeconfigPath} delete pod -n kube-system kproxy-doctor-${id}-${n}`,
        ),
      )
      assert.deepEqual(leftBehind().sort(), [`kproxy-doctor-${id}-node-a`, `kproxy-doctor-${id}-node-b`])
      try {
        const run = promisify(execFile)
        const printed = warnings[0].split(': delete it with: ')[1].split(' ')
        await run(printed[0], printed.slice(1))
        assert.deepEqual(leftBehind(), [`kproxy-doctor-${id}-node-b`], 'the printed command removes its Pod')
        const cleanup = 'kubectl delete pod -A -l app.kubernetes.io/managed-by=kproxy-doctor'.split(' ')
        await run(cleanup[0], ['--kubeconfig', lab.kubeconfigPath, ...cleanup.slice(1)])
        assert.deepEqual(leftBehind(), [], 'the documented cleanup removes the rest')
      } finally {
        // Whatever failed above, the next tests start without this test's Pods.
        for (let i = lab.api.createdPods.length - 1; i >= 0; i--)
          if ((lab.api.createdPods[i] as Pod).metadata?.labels?.['kproxy-doctor/run'] === id)
            lab.api.createdPods.splice(i, 1)
      }
    })

    test('SIGINT mid-run: the CLI deletes its debug Pods before it exits (130)', async () => {
      lab.api.opts.hungExecOf = (pod) => (pod as Pod).metadata?.labels?.[MANAGED] === 'kproxy-doctor'
      const before = lab.api.requestLog.length
      const child = spawn(
        process.execPath,
        [
          BIN,
          'svc',
          'web',
          '-n',
          'shop',
          '--kubeconfig',
          lab.kubeconfigPath,
          '--via',
          'debug-pod',
          '--timeout',
          '20',
          '-o',
          'json',
        ],
        {
          env: {...process.env, HOME: home, NO_COLOR: '1'},
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      )
      let stderr = ''
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
      const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)))
      try {
        // Each node's reads start together: the Pods in use are those with at least one (hung) exec.
        const hung = () =>
          new Set(
            lab.api.requestLog
              .slice(before)
              .filter((e) => e.subresource === 'exec' && e.name?.startsWith('kproxy-doctor-'))
              .map((e) => e.name),
          ).size
        const startedAt = Date.now()
        while (hung() < 2 && Date.now() - startedAt < 30_000) await new Promise((r) => setTimeout(r, 100))
        assert.equal(hung(), 2, `both Pods are in use before the signal: ${stderr}`)
        assert.equal(leftBehind().length, 2)
        child.kill('SIGINT')
        const code = await exited
        assert.equal(code, 130, stderr)
        assert.match(stderr, /^kproxy-doctor: SIGINT: deleting 2 debug Pods before exiting$/m)
        assert.deepEqual(leftBehind(), [], 'no debug Pod outlives the interrupted run')
      } finally {
        lab.api.opts.hungExecOf = undefined
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      }
    })
  },
)
