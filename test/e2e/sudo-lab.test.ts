import assert from 'node:assert/strict'
import {execFileSync} from 'node:child_process'
import {createHash, randomBytes} from 'node:crypto'
import {readdirSync, readFileSync} from 'node:fs'
import {join} from 'node:path'
import {after, describe, test} from 'node:test'
import {labGuard} from '../helpers/lab-guard.js'
import {withLab} from '../helpers/lab-suite.js'
import {runCli, type CliResult} from '../helpers/run-cli.js'
import type {NetnsLab} from '../lab/netns-lab.js'
import {sleep, tryRun} from '../lab/sh.js'
import {SUDO_USER, SudoSshd} from '../lab/sudo-sshd.js'

/**
 * The non-root way in: every lab node's sshd also lets `kpd` (uid 4242) log in, and the node's real sudo reads the
 * shipped deploy/sudoers/kproxy-doctor (it names `kpd` already). The user and the sudoers folder exist only in the
 * mount namespace of that sshd (test/lab/sudo-sshd.ts): the last test proves the host untouched.
 */
const why = labGuard()
const NODE_NAMES = ['node-a', 'node-b']
const SUDOERS = readFileSync(new URL('../../../deploy/sudoers/kproxy-doctor', import.meta.url), 'utf8')
/** The PATH Ubuntu's /etc/environment gives every login (through PAM): the sbin folders too. */
const LOGIN_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'

interface Finding {
  code: string
  node: string | null
  severity: string
}

/** What the host has of the files the lab shadows on its nodes, to prove them untouched. */
function hostState(): string {
  const hash = (f: string) => createHash('sha256').update(readFileSync(f)).digest('hex')
  const sudoersD = readdirSync('/etc/sudoers.d')
    .sort()
    .map((f) => `${f} ${hash(join('/etc/sudoers.d', f))}`)
  return [...['/etc/passwd', '/etc/group', '/etc/shadow'].map((f) => `${f} ${hash(f)}`), ...sudoersD].join('\n')
}

describe('svc as a non-root SSH user through the real sudo and the shipped sudoers file', {skip: why}, () => {
  let lab: NetnsLab
  let sudo: SudoSshd
  let hostBefore = ''
  withLab((l) => {
    lab = l
    hostBefore = hostState()
    sudo = new SudoSshd(lab)
  })
  // Whatever a failed test left: this file's sshds (by their ids) and folder. The lab's own go with the lab.
  after(() => sudo?.down())

  const svc = (sshConfig: string, ...extra: string[]): Promise<CliResult> =>
    runCli(['svc', 'web', '-n', 'shop', '--kubeconfig', lab.kubeconfigPath, '--ssh-config', sshConfig, ...extra])
  const asRoot = (...extra: string[]) => svc(lab.sshConfigPath, ...extra)
  const asKpd = (...extra: string[]) => svc(sudo.sshConfigPath, ...extra)
  const findings = (r: CliResult) =>
    (r.json.findings as Finding[]).map((f) => `${f.severity} ${f.code} ${f.node ?? '-'}`).sort()
  const verdicts = (r: CliResult) =>
    r.json.paths.map((p: {node: string; entry: string; ok: boolean}) => `${p.node} ${p.entry} ${p.ok}`).sort()
  const probes = (r: CliResult) =>
    r.json.probes.nodes.flatMap((n: {node: string; targets: Array<{address: string; kind: string; ok?: boolean}>}) =>
      n.targets.map((t) => `${n.node} ${t.kind} ${t.address}`),
    )
  const notChecked = (r: CliResult) =>
    r.json.notChecked.map((n: {check: string; reason: string}) => `${n.check}: ${n.reason}`)
  /** The kernel's evidence of the probes: conntrack's endpoint and the rule counters the probes moved. */
  const evidence = (r: CliResult) =>
    r.json.kernelTrace.map(
      (k: {node: string; target: string; agreesWithWalk: boolean; counters?: {moved: unknown[]}}) =>
        `${k.node} ${k.target} ${k.agreesWithWalk} ${(k.counters?.moved.length ?? 0) > 0}`,
    )
  const tables = (node: string) => tryRun('ip', ['netns', 'exec', lab.nodeNs(node), 'nft', 'list', 'tables']).stdout

  test('kpd logs in as itself (not root) on every node; the host knows no kpd', async () => {
    sudo.setSudoers(SUDOERS)
    await sudo.start({path: LOGIN_PATH})
    assert.match(SUDOERS, /^kpd ALL=\(root\) NOPASSWD: KPD_READS$/m)
    for (const node of NODE_NAMES) {
      const r = tryRun(
        'ssh',
        ['-F', sudo.sshConfigPath, '-o', 'BatchMode=yes', node, 'id -u; id -un'],
        undefined,
        10_000,
      )
      assert.equal(r.stdout, `${SUDO_USER.uid}\n${SUDO_USER.name}\n`, r.stderr)
    }
    assert.notEqual(tryRun('getent', ['passwd', SUDO_USER.name]).code, 0, 'kpd exists on the host')
  })

  test('svc as kpd: the same findings, verdicts and probes as root; every read went through sudo -n, whole dumps', async () => {
    const root = await asRoot('-o', 'json')
    assert.equal(root.code, 0, root.stdout + root.stderr)
    sudo.clearCommandLogs()
    const kpd = await asKpd('-o', 'json')
    assert.equal(kpd.code, root.code, kpd.stdout + kpd.stderr)
    assert.deepEqual(findings(kpd), findings(root))
    assert.deepEqual(verdicts(kpd), verdicts(root))
    assert.deepEqual(probes(kpd), probes(root))
    assert.equal(kpd.json.ok, true)
    assert.deepEqual(notChecked(kpd), notChecked(root))
    // The kernel's evidence read through sudo (conntrack, the rule counters before and after the probes) as root's.
    assert.deepEqual(evidence(kpd), evidence(root))
    assert.equal(evidence(kpd).length, 4)
    assert.ok(
      evidence(kpd).every((e: string) => e.endsWith(' true true')),
      JSON.stringify(evidence(kpd)),
    )
    // Root reads its rules chain by chain; kpd's sudo allows whole dumps only.
    assert.deepEqual(root.json.notes.filter((n: string) => /chain by chain on node-a, node-b/.test(n)).length, 1)
    assert.deepEqual(
      kpd.json.notes.filter((n: string) => /chain by chain/.test(n)),
      [],
    )
    for (const node of NODE_NAMES) {
      const sent = sudo.commandLog(node).join('\n')
      for (const read of [
        'iptables-save',
        'ip6tables-save',
        "conntrack -L -p 'tcp' -d '10.96.10.10'",
        "conntrack -L -p 'udp' -d '10.96.0.10'",
        "conntrack -L -p tcp --orig-dst '10.96.10.10' --orig-port-dst '80'",
        'grep -r -H -s . /var/lib/cni/results',
        "iptables --modprobe=/bin/false -w 5 -t nat -v -S 'KUBE-SERVICES'",
      ])
        assert.ok(sent.includes(`{ { sudo -n ${read};`), `${node}: sudo -n ${read} in\n${sent}`)
      // No privileged read went without sudo -n.
      assert.doesNotMatch(
        sent,
        /\{ \{ (?:ip6?tables(?:-nft|-legacy)?-save|conntrack|nft|ipvsadm|ipset|grep -r|ip6?tables --modprobe)[ ;]/,
      )
    }
    // --verbose names the login the node was read with.
    const verbose = await asKpd('--verbose')
    assert.equal(verbose.code, 0, verbose.stdout + verbose.stderr)
    assert.match(verbose.stdout, /^ {2}node-a: ssh \(kpd@127\.0\.0\.1:\d+\)/m)
    assert.match(verbose.stderr, /node-a \[ssh kpd@127\.0\.0\.1:\d+\] run iptablesSave → exit 0/)
  })

  test('one line taken out of the sudoers file (conntrack -L -p tcp -d): that read alone fails, saying so; the rest is there', async () => {
    const without = SUDOERS.replace(/^ *\/usr\/sbin\/conntrack \^-L -p tcp -d .*\n/m, '')
    assert.notEqual(without, SUDOERS)
    sudo.setSudoers(without)
    try {
      const r = await asKpd('-o', 'json')
      // Exit 3: a required check could not run; nothing else is lost.
      assert.equal(r.code, 3, r.stdout + r.stderr)
      assert.deepEqual(findings(r), [])
      assert.deepEqual(notChecked(r), [
        'conntrack: conntrack -L -p tcp -d 10.96.10.10: exited 1: sudo: a password is required',
        'conntrack: conntrack -L -p tcp -d 10.96.10.10: exited 1: sudo: a password is required',
      ])
      assert.ok(
        verdicts(r).every((v: string) => v.endsWith(' true')),
        JSON.stringify(verdicts(r)),
      )
      assert.equal(probes(r).length, 10)
      const human = await asKpd()
      assert.equal(human.code, 3)
      assert.match(
        human.stdout,
        /^ {2}\? conntrack \(KPD-CONNTRACK-STALE, KPD-CONNTRACK-FULL\) on node-a, node-b: conntrack -L -p tcp -d 10\.96\.10\.10: exited 1: sudo: a password is required$/m,
      )
      assert.match(human.stdout, /^Kernel evidence \(conntrack, read right after the probes/m)
    } finally {
      sudo.setSudoers(SUDOERS)
    }
  })

  test('kpd with no sudoers entry: each node says sudo wants a password, at once (sudo -n), exit 3', async () => {
    sudo.setSudoers(undefined)
    try {
      const started = Date.now()
      const r = await asKpd()
      assert.ok(Date.now() - started < 30_000, `took ${Date.now() - started} ms`)
      assert.equal(r.code, 3, r.stdout + r.stderr)
      const line =
        'sudo on the node wants a password: allow "sudo -n iptables-save" for the SSH user, or log in as root'
      for (const node of NODE_NAMES) assert.ok(r.stdout.includes(`│ ${node} │ not read: ${line} │`), r.stdout)
      assert.match(
        r.stdout,
        /^! KPD-NODE-UNREADABLE \[node-a, node-b\] each node could not be read: sudo on the node wants a password/m,
      )
      assert.equal(r.stderr, `kproxy-doctor: warning: no node could be read: node-a: ${line}; node-b: ${line}\n`)
    } finally {
      sudo.setSudoers(SUDOERS)
    }
  })

  test("--kernel-trace as kpd: through sudo (the KPD_KERNEL_TRACE lines), netfilter's trace as evidence, nothing left", async () => {
    const before = NODE_NAMES.map(tables)
    sudo.clearCommandLogs()
    const r = await asKpd('--kernel-trace', '-o', 'json')
    assert.deepEqual(NODE_NAMES.map(tables), before)
    assert.deepEqual(
      r.json.notChecked
        .filter((n: {check: string}) => n.check === 'kernel-trace')
        .map((n: {reason: string}) => n.reason),
      [],
    )
    assert.equal(r.code, 0, r.stdout + r.stderr)
    const traced = r.json.kernelTrace as Array<{
      node: string
      target: string
      agreesWithWalk: boolean
      detail: string
      rules: unknown[]
    }>
    assert.equal(traced.length, 4)
    for (const k of traced) {
      assert.equal(k.agreesWithWalk, true, `${k.node} ${k.target}: ${k.detail}`)
      assert.match(k.detail, /; netfilter's trace agrees: \d+ chains of kube-proxy's, as walked \(/)
      assert.ok(k.rules.length > 0, `${k.node} ${k.target}: no traced rule`)
    }
    for (const node of NODE_NAMES) {
      const sent = sudo.commandLog(node).join('\n')
      assert.match(sent, /timeout \d+ sudo -n nft monitor trace/)
      assert.match(sent, /sudo -n nft -- add table inet kpd_trace_[0-9a-f]{6}_\d{10} ';' add chain/)
      assert.match(sent, /sudo -n nft delete table inet kpd_trace_[0-9a-f]{6}_\d{10}/)
    }
  })

  test("a Debian node: sshd's own PATH for a user other than root (no sbin folder); root's findings, verdicts and evidence, every read made", async () => {
    await sudo.start()
    try {
      for (const node of NODE_NAMES) {
        const path = tryRun(
          'ssh',
          ['-F', sudo.sshConfigPath, '-o', 'BatchMode=yes', node, 'echo "$PATH"; command -v sysctl bridge'],
          undefined,
          10_000,
        )
        // The login's PATH has no sbin folder: the login's shell alone finds neither program.
        assert.equal(path.stdout, '/usr/local/bin:/usr/bin:/bin:/usr/games\n', path.stderr)
      }
      // The bridge FDB (`bridge` is in /usr/sbin on Debian): recorded as root's is, its entries there.
      const fdb = async (sshConfig: string) => {
        const out = join(sudo.dir, `bundle-${randomBytes(4).toString('hex')}`)
        const c = await runCli([
          'collect',
          'svc',
          'web',
          '-n',
          'shop',
          '--kubeconfig',
          lab.kubeconfigPath,
          '--ssh-config',
          sshConfig,
          '--out',
          out,
        ])
        assert.equal(c.code, 0, c.stdout + c.stderr)
        const network = execFileSync('find', [out, '-path', '*node-a*', '-name', 'network.txt'], {
          encoding: 'utf8',
        }).trim()
        assert.ok(network, `no network.txt of node-a in ${out}`)
        return readFileSync(network, 'utf8').split('## fdb\n')[1].trim()
      }
      // Each port's entries (learned ones age out between two reads: the ports they are on, not the entries).
      const fdbPorts = (text: string) => [
        ...new Set(text.split('\n').flatMap((l) => /^[0-9a-f:]{17} dev (\S+)/.exec(l)?.[1] ?? [])),
      ]
      const rootPorts = fdbPorts(await fdb(lab.sshConfigPath))
      assert.notDeepEqual(rootPorts, [], "root's FDB")
      assert.deepEqual(fdbPorts(await fdb(sudo.sshConfigPath)).sort(), rootPorts.sort(), "kpd's FDB")
      const root = await asRoot('-o', 'json')
      const kpd = await asKpd('-o', 'json')
      assert.deepEqual(notChecked(kpd), [])
      assert.deepEqual(notChecked(kpd), notChecked(root))
      assert.equal(kpd.code, 0, kpd.stdout + kpd.stderr)
      assert.deepEqual(findings(kpd), findings(root))
      assert.deepEqual(verdicts(kpd), verdicts(root))
      assert.deepEqual(probes(kpd), probes(root))
      assert.deepEqual(evidence(kpd), evidence(root))
    } finally {
      await sudo.start({path: LOGIN_PATH})
    }
  })

  test('the host is untouched: its passwd, group, shadow and sudoers.d as before; no kpd process left', async () => {
    await sudo.restore()
    assert.equal(hostState(), hostBefore)
    assert.notEqual(tryRun('getent', ['passwd', SUDO_USER.name]).code, 0)
    // A process that has ended but is not yet reaped by its parent (sshd's session, under load) runs nothing: only
    // the living count.
    let left: string[] = []
    for (let i = 0; i < 100; i++) {
      left = tryRun('ps', ['-o', 'pid=,stat=,args=', '-u', String(SUDO_USER.uid)])
        .stdout.split('\n')
        .filter((l) => l.trim() && !/^\s*\d+\s+Z/.test(l))
      if (left.length === 0) break
      await sleep(100)
    }
    assert.deepEqual(left, [])
    for (const node of NODE_NAMES) assert.doesNotMatch(tables(node), /kpd_trace_/)
    sudo.down()
  })
})
