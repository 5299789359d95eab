import assert from 'node:assert/strict'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {after, describe, test} from 'node:test'
import {labAccess} from '../helpers/lab-cli.js'
import {labGuard} from '../helpers/lab-guard.js'
import {withLab} from '../helpers/lab-suite.js'
import {runCli, type CliResult} from '../helpers/run-cli.js'
import {labPodSandbox} from '../lab/apiserver-sandboxes.js'
import type {NetnsLab} from '../lab/netns-lab.js'

const why = labGuard()

const KUBE_PROXY_POD = {'node-a': 'pod kube-system/kube-proxy-ax7k2', 'node-b': 'pod kube-system/kube-proxy-bx7k2'}
/** What kube-proxy's images (distroless-iptables) lack of the programs the doctor reads with. */
const NOT_IN_KUBE_PROXY_IMAGE = ['ip', 'bridge', 'ipvsadm', 'sysctl']
/** The lab's stand-in image: the host's programs, never ipvsadm (whether the host has one or not). */
const LAB_IMAGE = {'kube-proxy-': ['ipvsadm']}
const IPVS_FROM_PROC = 'ipvsadm not in the kube-proxy image: IPVS state read from /proc/net/ip_vs instead'
const NO_CNI_CACHE =
  "/var/lib/cni/results (the CNI result cache) is not mounted in kube-proxy's Pod: pods mapped to bridge ports through fdb and neighbour entries only (they expire on idle Pods)"

describe(
  "svc reads nodes through kube-proxy's Pods (pods/exec, pods/portforward), with no SSH configuration",
  {skip: why},
  () => {
    let lab: NetnsLab
    // No ~/.ssh/config: HOME is an empty folder, and no --ssh-config is given.
    const home = mkdtempSync(join(tmpdir(), 'kpd-nossh-'))
    after(() => rmSync(home, {recursive: true, force: true}))
    withLab((l) => {
      lab = l
      lab.api.opts.podSandbox = labPodSandbox(lab, LAB_IMAGE)
    })

    const viaApi = (...extra: string[]): Promise<CliResult> =>
      runCli(['svc', 'web', '-n', 'shop', '--kubeconfig', lab.kubeconfigPath, '-o', 'json', ...extra], {HOME: home})
    const viaSsh = (): Promise<CliResult> =>
      runCli(['svc', 'web', '-n', 'shop', ...labAccess(lab), '--via', 'ssh', '-o', 'json'], {HOME: home})
    const findings = (r: CliResult) =>
      r.json.findings.map((f: {code: string; node: string | null}) => `${f.code}@${f.node}`).sort()
    const node = (r: CliResult, name: string) => r.json.nodes.find((n: {name: string}) => n.name === name)
    const execs = () => lab.api.requestLog.filter((e) => e.subresource === 'exec').length

    test("healthy lab: both nodes read through kube-proxy's Pods, /proxyMode through a port-forward, no finding, every path ✓, exit 0 (no /proc/net/ip_vs is an IPVS state read, not a gap)", async () => {
      const before = execs()
      const r = await viaApi()
      assert.equal(r.code, 0, r.stderr + JSON.stringify(r.json?.findings))
      assert.ok(!r.json.notChecked.some((n: {required: boolean}) => n.required), JSON.stringify(r.json.notChecked))
      assert.deepEqual(findings(r), [])
      for (const name of ['node-a', 'node-b'] as const) {
        const n = node(r, name)
        assert.equal(n.reachable, true)
        assert.equal(n.modeSource, "kube-proxy's /proxyMode on the node")
        assert.deepEqual(n.readVia, {
          transport: 'kube-proxy',
          address: KUBE_PROXY_POD[name],
          why: `kube-proxy's Pod runs on ${name} and exec into it is allowed`,
          notUsed: [{transport: 'ssh', reason: `no Host entry for ${name} in ~/.ssh/config`}],
          // Where the kernel has an IPVS table (the ip_vs module loaded by anyone), it is read from /proc instead.
          notRead: [...(n.readVia.notRead.includes(IPVS_FROM_PROC) ? [IPVS_FROM_PROC] : []), NO_CNI_CACHE],
        })
      }
      assert.ok(
        r.json.paths.length >= 8 && r.json.paths.every((p: {ok: boolean}) => p.ok === true),
        JSON.stringify(r.json.paths),
      )
      assert.ok(execs() - before >= 2 * 6, 'the allow-listed reads ran as pods/exec')
      const commands = lab.api.requestLog
        .filter((e) => e.subresource === 'exec')
        .map((e) => e.query.filter(([k]) => k === 'command').map(([, v]) => v))
      assert.ok(
        commands.some((argv) => argv.join(' ') === 'iptables-save'),
        'iptables-save is one argv, no shell',
      )
      assert.ok(!commands.some((argv) => ['sh', 'bash', 'dash'].includes(argv[0])), 'never a shell')
      assert.ok(lab.api.requestLog.some((e) => e.subresource === 'portforward' && e.name === 'kube-proxy-ax7k2'))
    })

    for (const [title, target, faults, code] of [
      ['SEP DNAT deleted on node-b', 'node-b', {dropDnatFor: '10.244.1.10'}, 'KPD-SEP-MISSING'],
      ['NodePort missing on node-b', 'node-b', {omitNodePorts: true}, 'KPD-NODEPORT-MISSING'],
    ] as const) {
      test(`${title}: the same findings on the same nodes as over SSH (${code})`, async () => {
        lab.applyRules(target, faults)
        try {
          const kube = await viaApi()
          const ssh = await viaSsh()
          assert.equal(ssh.code, 1, ssh.stderr)
          assert.equal(kube.code, 1, kube.stderr)
          assert.ok(findings(ssh).includes(`${code}@${target}`), JSON.stringify(findings(ssh)))
          assert.deepEqual(findings(kube), findings(ssh))
          assert.deepEqual(
            kube.json.paths.map(
              (p: {node: string; entry: string; breaksAt: string | null}) => `${p.node} ${p.entry} ${p.breaksAt}`,
            ),
            ssh.json.paths.map(
              (p: {node: string; entry: string; breaksAt: string | null}) => `${p.node} ${p.entry} ${p.breaksAt}`,
            ),
          )
          assert.equal(node(kube, target).readVia.transport, 'kube-proxy')
          assert.equal(node(ssh, target).readVia.transport, 'ssh')
        } finally {
          lab.clearFaults()
        }
      })
    }

    test("trace --node reads its node the way svc does: through kube-proxy's Pod without SSH, and says why not with --via none", async () => {
      const trace = (...extra: string[]) =>
        runCli(
          [
            'trace',
            '--node',
            'node-b',
            '--kubeconfig',
            lab.kubeconfigPath,
            '--src',
            '10.244.1.20',
            '--dst',
            '10.96.10.10',
            '--dport',
            '80',
            '-o',
            'json',
            ...extra,
          ],
          {HOME: home},
        )
      const before = execs()
      const r = await trace()
      assert.equal(r.code, 0, r.stderr)
      assert.equal(r.json.verdict, 'DNAT')
      assert.deepEqual(r.json.destinations, ['10.244.1.10:8080', '10.244.2.10:8080', '10.244.2.11:8080'])
      assert.ok(
        lab.api.requestLog.slice(before).some((e) => e.subresource === 'exec' && e.name === 'kube-proxy-bx7k2'),
        "read through node-b's kube-proxy Pod",
      )
      const none = await trace('--via', 'none')
      assert.equal(none.code, 2)
      assert.equal(none.stderr.trim(), 'kproxy-doctor: node-b: not read: API-only (--via none)')
    })

    test("kube-proxy's real image (no ip, bridge, ipvsadm, sysctl): the rules are still read and judged, what was not read is listed per node", async () => {
      lab.api.opts.podSandbox = labPodSandbox(lab, {'kube-proxy-': NOT_IN_KUBE_PROXY_IMAGE})
      lab.applyRules('node-b', {dropDnatFor: '10.244.1.10'})
      try {
        const r = await viaApi()
        assert.equal(r.code, 1, r.stderr)
        assert.ok(findings(r).includes('KPD-SEP-MISSING@node-b'), JSON.stringify(findings(r)))
        assert.ok(
          !findings(r).some((f: string) => f.endsWith('@node-a') && !f.startsWith('KPD-NODE-DIVERGES')),
          JSON.stringify(findings(r)),
        )
        const notRead = node(r, 'node-a').readVia.notRead
        assert.deepEqual(notRead.map((l: string) => l.split(' ')[0]).sort(), [
          '/var/lib/cni/results',
          'bridge',
          'ip',
          ...(notRead.includes(IPVS_FROM_PROC) ? ['ipvsadm'] : []),
          'sysctl',
        ])
        assert.ok(
          notRead.includes('sysctl not in the kube-proxy image: sysctls read from /proc/sys instead'),
          notRead.join('\n'),
        )
        assert.ok(
          notRead.includes(
            "ip not in the kube-proxy image: kube-ipvs0 addresses, links, neighbours and routes not read (the hairpin check's pod-to-bridge-port mapping, the route checks)",
          ),
        )
        assert.equal(node(r, 'node-a').reachable, true)
      } finally {
        lab.api.opts.podSandbox = labPodSandbox(lab, LAB_IMAGE)
        lab.clearFaults()
      }
    })

    test('exec refused by RBAC: one clear line naming the verb and resource, then API-only; exit code from the findings', async () => {
      lab.api.opts.forbidden = new Set(['create pods/exec kube-system'])
      try {
        const r = await viaApi()
        assert.equal(r.code, 3, r.stderr)
        const lines = r.stderr.trim().split('\n')
        assert.deepEqual(lines, [
          'kproxy-doctor: warning: RBAC forbids create on pods/exec in namespace "kube-system" (403): needed to read nodes through kube-proxy\'s Pods',
        ])
        assert.deepEqual(findings(r), [])
        for (const name of ['node-a', 'node-b']) {
          const n = node(r, name)
          assert.equal(n.reachable, false)
          assert.equal(n.readVia.transport, null)
          assert.deepEqual(
            n.readVia.notUsed.map((u: {transport: string}) => u.transport),
            ['ssh', 'kube-proxy'],
          )
        }
        assert.deepEqual(r.json.paths, [])
        assert.match(
          r.json.notes.join('\n'),
          /node checks not done \(rules, packet paths.*\) on node-a, node-b: API-only: ssh: no Host entry/,
        )
        const human = await runCli(['svc', 'web', '-n', 'shop', '--kubeconfig', lab.kubeconfigPath], {HOME: home})
        assert.equal(human.code, 3)
        assert.match(
          human.stdout,
          /^ {2}node-a: not read \(API-only\): API-only: ssh: no Host entry for node-a in ~\/\.ssh\/config; kube-proxy: RBAC forbids create on pods\/exec in namespace "kube-system" \(403\)/m,
        )
      } finally {
        lab.api.opts.forbidden = undefined
      }
    })

    test('--via none: API-side findings, node checks listed as not done, exit 1 on an API-side error, no exec', async () => {
      for (const p of ['web-a1', 'web-b1', 'web-b2']) lab.setPodReady(p, false)
      const before = execs()
      try {
        const r = await viaApi('--via', 'none')
        assert.equal(r.code, 1, r.stderr)
        assert.deepEqual(findings(r), ['KPD-NO-READY-ENDPOINTS@null'])
        assert.deepEqual(
          r.json.nodes.map(
            (n: {name: string; reachable: boolean; error: string}) => `${n.name} ${n.reachable} ${n.error}`,
          ),
          ['node-a false API-only (--via none)', 'node-b false API-only (--via none)'],
        )
        assert.match(
          r.json.notes.join('\n'),
          /node checks not done .* on node-a, node-b: API-only \(--via none\); the API-side checks ran/,
        )
        assert.equal(execs(), before, 'nothing runs on a node')
      } finally {
        for (const p of ['web-a1', 'web-b1', 'web-b2']) lab.setPodReady(p, true)
      }
      // No finding, but no node read: incomplete, exit 3 (issue #26), unless --fail-on leaves incomplete out.
      const healthy = await viaApi('--via', 'none')
      assert.equal(healthy.code, 3, healthy.stderr)
      assert.deepEqual(findings(healthy), [])
      assert.match(healthy.json.summary, /^\? shop\/web: no node could be read/)
      assert.equal((await viaApi('--via', 'none', '--fail-on', 'error')).code, 0)
    })

    test('a hung exec on node-b ends at its timeout (a dump: 4 × --timeout); node-a is still diagnosed', async () => {
      // The machine may be loaded: the bound is a run that hangs nowhere, plus node-b's deadline (3 × --timeout) and slack.
      const baselineStarted = Date.now()
      await viaApi('--timeout', '3')
      const baseline = Date.now() - baselineStarted
      lab.api.opts.hungExec = new Set(['kube-system/kube-proxy-bx7k2'])
      try {
        const started = Date.now()
        const r = await viaApi('--timeout', '3')
        // A dump may take 4 × --timeout, the node 6 ×: bounded by the node's deadline (18 s), with room for a loaded machine.
        assert.ok(
          Date.now() - started < baseline + 18_000 + 10_000,
          `bounded: ${Date.now() - started} ms (a run without the hung exec: ${baseline} ms)`,
        )
        assert.equal(r.code, 3, r.stderr)
        const b = node(r, 'node-b')
        assert.equal(b.reachable, false)
        assert.match(
          b.error,
          /iptables-save in kube-proxy's Pod kube-system\/kube-proxy-bx7k2 did not finish within 12s/,
        )
        assert.equal(b.readVia.transport, 'kube-proxy')
        assert.deepEqual(findings(r), ['KPD-NODE-UNREADABLE@node-b'])
        assert.ok(r.json.paths.some((p: {node: string; ok: boolean}) => p.node === 'node-a' && p.ok))
      } finally {
        lab.api.opts.hungExec = undefined
      }
    })
  },
)
