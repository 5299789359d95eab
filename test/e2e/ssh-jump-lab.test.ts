import assert from 'node:assert/strict'
import {execFile, type ChildProcess} from 'node:child_process'
import {copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {dirname, join, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'
import {after, before, describe, test} from 'node:test'
import {labGuard} from '../helpers/lab-guard.js'
import {withLab} from '../helpers/lab-suite.js'
import {runCli, type CliResult} from '../helpers/run-cli.js'
import {schemaErrors} from '../helpers/report-schema.js'
import {NODES} from '../fixtures/lab-cluster.js'
import {labHostKey, startSshdInNs, writeSshdConfig} from '../lab/lab-sshd.js'
import type {NetnsLab} from '../lab/netns-lab.js'
import {run, sleep, startDaemon, tryRun} from '../lab/sh.js'

/**
 * Nodes behind bastions, read end to end and judged exactly as the direct-SSH lab judges them. The doctor runs in an
 * "operator" namespace of its own that reaches only the jump hosts: node-a behind one jump host (ProxyJump, its Host
 * block in an Included file), node-b behind two (ProxyJump outer,inner, set by a `Match host` block on its address),
 * or both through a ProxyCommand that enters another namespace. Every address is inside namespaces the test created;
 * the operator namespace has no route to the nodes, which is proven before anything is read through the hops.
 */

const why = labGuard()
const BIN = resolve(dirname(fileURLToPath(import.meta.url)), '../../../bin/run.js')

/** The hops' networks: operator ↔ jump, operator ↔ outer, outer ↔ inner; jump and inner also sit on the nodes' bridge. */
const JUMP = {op: '10.210.1.2', jump: '10.210.1.1', onNodes: '10.200.0.61'}
const OUTER = {op: '10.210.2.2', outer: '10.210.2.1', toInner: '10.210.3.1'}
const INNER = {fromOuter: '10.210.3.2', onNodes: '10.200.0.62'}

interface Finding {
  code: string
  node?: string
  severity: string
  argv?: string[][]
}

describe('svc through jump hosts and a ProxyCommand, judged as direct SSH', {skip: why}, () => {
  let lab: NetnsLab
  withLab((l) => {
    lab = l
  })
  const dir = mkdtempSync(join(tmpdir(), 'kpd-jump-'))
  const namespaces: string[] = []
  const procs: ChildProcess[] = []
  const logs: string[] = []
  let op = ''
  let knownHosts = ''
  let identity = ''
  const hostKeys = new Map<string, string>()

  const addNs = (name: string) => {
    const ns = `${lab.id}-${name}`
    run('ip', ['netns', 'add', ns])
    namespaces.push(ns)
    run('ip', ['-n', ns, 'link', 'set', 'lo', 'up'])
    return ns
  }
  const link = (a: string, aIf: string, aIp: string, b: string, bIf: string, bIp: string) => {
    run('ip', ['-n', a, 'link', 'add', aIf, 'type', 'veth', 'peer', 'name', bIf, 'netns', b])
    run('ip', ['-n', a, 'addr', 'add', `${aIp}/24`, 'dev', aIf])
    run('ip', ['-n', b, 'addr', 'add', `${bIp}/24`, 'dev', bIf])
    run('ip', ['-n', a, 'link', 'set', aIf, 'up'])
    run('ip', ['-n', b, 'link', 'set', bIf, 'up'])
  }
  /** A port on the nodes' bridge (in the lab's "net" namespace) for `ns`, with `ip` on it. */
  const onNodes = (ns: string, port: string, ip: string) => {
    const net = lab.ns('net')
    run('ip', ['-n', ns, 'link', 'add', 'eth1', 'type', 'veth', 'peer', 'name', port, 'netns', net])
    run('ip', ['-n', net, 'link', 'set', port, 'master', 'br0', 'up'])
    run('ip', ['-n', ns, 'addr', 'add', `${ip}/24`, 'dev', 'eth1'])
    run('ip', ['-n', ns, 'link', 'set', 'eth1', 'up'])
  }
  /** A jump host: a real sshd in `ns` on `ip`, forwarding allowed, its own host key. */
  const startJumpSshd = (ns: string, key: string, ip: string) => {
    hostKeys.set(key, labHostKey(dir, key))
    const cfg = writeSshdConfig(dir, key, {forwarding: true})
    writeFileSync(cfg, readFileSync(cfg, 'utf8').replace('ListenAddress 127.0.0.1', `ListenAddress ${ip}`))
    procs.push(startSshdInNs(ns, cfg, logs))
  }

  before(async () => {
    identity = join(lab.dir, 'id_ed25519')
    copyFileSync(join(lab.dir, 'authorized_keys'), join(dir, 'authorized_keys'))
    op = addNs('op')
    const jump = addNs('jump')
    const outer = addNs('outer')
    const inner = addNs('inner')
    link(op, 'eth0', JUMP.op, jump, 'eth0', JUMP.jump)
    link(op, 'eth1', OUTER.op, outer, 'eth0', OUTER.outer)
    link(outer, 'eth1', OUTER.toInner, inner, 'eth0', INNER.fromOuter)
    onNodes(jump, 'kjump', JUMP.onNodes)
    onNodes(inner, 'kinner', INNER.onNodes)
    startJumpSshd(jump, 'jump', JUMP.jump)
    startJumpSshd(outer, 'outer', OUTER.outer)
    startJumpSshd(inner, 'inner', INNER.fromOuter)
    // Each node's sshd listens on its loopback; on its own address a relay inside the node's namespace leads to it.
    for (const node of NODES)
      procs.push(
        startDaemon(
          'ip',
          [
            'netns',
            'exec',
            lab.nodeNs(node),
            'socat',
            `TCP-LISTEN:22,bind=${node.ip},reuseaddr,fork`,
            'TCP:127.0.0.1:22',
          ],
          logs,
        ),
      )
    // The test API server listens on the host's loopback: a relay gives the operator namespace the same address.
    const sock = join(dir, 'api.sock')
    procs.push(startDaemon('socat', [`UNIX-LISTEN:${sock},fork`, `TCP:127.0.0.1:${lab.api.port}`], logs))
    procs.push(
      startDaemon(
        'ip',
        [
          'netns',
          'exec',
          op,
          'socat',
          `TCP-LISTEN:${lab.api.port},bind=127.0.0.1,reuseaddr,fork`,
          `UNIX-CONNECT:${sock}`,
        ],
        logs,
      ),
    )
    knownHosts = join(dir, 'known_hosts')
    const nodeKey = (key: string) =>
      readFileSync(join(lab.dir, `hostkey-${key}.pub`), 'utf8')
        .split(' ')
        .slice(0, 2)
        .join(' ')
    writeFileSync(
      knownHosts,
      [
        `${JUMP.jump} ${hostKeys.get('jump')}`,
        `${OUTER.outer} ${hostKeys.get('outer')}`,
        `${INNER.fromOuter} ${hostKeys.get('inner')}`,
        ...NODES.map((n) => `${n.ip} ${nodeKey(n.key)}`),
        '',
      ].join('\n'),
    )
    // Bounded wait until OpenSSH's own client reaches both nodes through the hops.
    for (let i = 0; ; i++) {
      const ok = NODES.every((n) => sshFromOp(jumpConfig(), [n.name, 'true']).code === 0)
      if (ok) break
      if (i >= 50) throw new Error(`jump hosts did not come up: ${logs.slice(-5).join(' | ')}`)
      await sleep(200)
    }
  })

  after(() => {
    for (const p of procs) p.kill('SIGKILL')
    for (const ns of namespaces) {
      for (const pid of tryRun('ip', ['netns', 'pids', ns]).stdout.split('\n').filter(Boolean))
        tryRun('kill', ['-9', pid])
      tryRun('ip', ['netns', 'del', ns])
    }
    rmSync(dir, {recursive: true, force: true})
  })

  /** What every hop shares: the lab's client key and this test's known_hosts. */
  const common = (known = knownHosts) => [
    '  User root',
    `  IdentityFile ${identity}`,
    `  UserKnownHostsFile ${known}`,
    '  IdentitiesOnly yes',
    '  ConnectTimeout 5',
  ]

  /** node-a behind `jump` (its block in an Included file), node-b behind outer then inner (a Match host block). */
  function jumpConfig(known = knownHosts, name = 'ssh_config_jump'): string {
    const included = join(dir, `${name}-nodes.conf`)
    writeFileSync(
      included,
      [
        'Host node-a',
        `  HostName ${NODES[0].ip}`,
        '  ProxyJump jump',
        '  Compression yes',
        'Host node-b',
        `  HostName ${NODES[1].ip}`,
        '',
      ].join('\n'),
    )
    const path = join(dir, name)
    writeFileSync(
      path,
      [
        `Include ${included}`,
        'Host jump',
        `  HostName ${JUMP.jump}`,
        'Host outer',
        `  HostName ${OUTER.outer}`,
        'Host inner',
        `  HostName ${INNER.fromOuter}`,
        `Match host ${NODES[1].ip}`,
        '  ProxyJump outer,inner',
        'Host *',
        ...common(known),
        '',
      ].join('\n'),
    )
    return path
  }

  /** Both nodes through a ProxyCommand that enters the lab's outside namespace (on the nodes' bridge). */
  function proxyCommandConfig(): string {
    const path = join(dir, 'ssh_config_proxycommand')
    writeFileSync(
      path,
      [
        'Host node-*',
        `  ProxyCommand ip netns exec ${lab.ns('outside')} socat STDIO TCP:%h:%p,connect-timeout=5`,
        ...NODES.map((n) => `Host ${n.name}\n  HostName ${n.ip}`),
        'Host *',
        ...common(),
        '',
      ].join('\n'),
    )
    return path
  }

  function sshFromOp(config: string, args: string[]): {code: number; stdout: string; stderr: string} {
    return tryRun('ip', ['netns', 'exec', op, 'ssh', '-F', config, '-o', 'BatchMode=yes', ...args], undefined, 20_000)
  }

  /** The doctor run as a user in the operator namespace would run it. */
  function doctorFromOp(args: string[]): Promise<CliResult> {
    return new Promise((resolvePromise, reject) => {
      execFile(
        'ip',
        ['netns', 'exec', op, process.execPath, BIN, ...args],
        {encoding: 'utf8', timeout: 120_000, env: {...process.env, NO_COLOR: '1', COLUMNS: ''}, maxBuffer: 64 << 20},
        (err, stdout, stderr) => {
          const code = err
            ? typeof (err as {code?: unknown}).code === 'number'
              ? (err as {code: number}).code
              : -1
            : 0
          let json
          try {
            json = JSON.parse(stdout)
          } catch {
            json = undefined
          }
          const invalid = json && code !== 2 ? schemaErrors(json, 'svc') : null
          if (invalid) reject(new Error(`output does not match the schema:\n${invalid}`))
          else resolvePromise({code, stdout, stderr, json})
        },
      )
    })
  }

  const svcArgs = (config: string, ...extra: string[]) => [
    'svc',
    'web',
    '-n',
    'shop',
    '--kubeconfig',
    lab.kubeconfigPath,
    '--ssh-config',
    config,
    '-o',
    'json',
    ...extra,
  ]
  const direct = () => runCli(svcArgs(lab.sshConfigPath))

  /** What the judgement is: every finding (code, node, severity), every path's verdict, every check not made. */
  const judgement = (r: CliResult) => ({
    findings: (r.json?.findings ?? []).map((f: Finding) => `${f.severity} ${f.code} ${f.node ?? '-'}`).sort(),
    paths: (r.json?.paths ?? [])
      .map((p: {node: string; entry: string; ok: boolean | null}) => `${p.node} ${p.entry} ${p.ok}`)
      .sort(),
    notChecked: (r.json?.notChecked ?? [])
      .map((n: {node?: string; check: string}) => `${n.node ?? '-'} ${n.check}`)
      .sort(),
    summary: r.json?.summary,
    code: r.code,
  })
  const reachable = (r: CliResult) =>
    (r.json?.nodes ?? []).map((n: {name: string; reachable: boolean}) => `${n.name} ${n.reachable}`)

  test('the operator namespace cannot reach a node directly: only through the hops', () => {
    for (const node of NODES) {
      const directly = sshFromOp(jumpConfig(), ['-o', 'ProxyJump=none', '-o', 'ConnectTimeout=2', node.name, 'true'])
      assert.notEqual(directly.code, 0, `${node.name} must not be reachable without the jump hosts`)
      assert.match(directly.stderr, /Network is unreachable|No route to host|timed out/)
      assert.equal(sshFromOp(jumpConfig(), [node.name, 'true']).code, 0, `${node.name} through the hops`)
    }
  })

  test('healthy lab: read through one and two jump hosts, judged exactly as direct SSH; -v shows each hop', async () => {
    const base = await direct()
    assert.equal(base.code, 0, base.stderr)
    const r = await doctorFromOp(svcArgs(jumpConfig(), '-v'))
    assert.deepEqual(reachable(r), ['node-a true', 'node-b true'], r.stderr)
    assert.deepEqual(judgement(r), judgement(base))
    const hops = r.stderr
      .split('\n')
      .filter((l) => / \[ssh\] hop /.test(l))
      .map((l) => l.replace(/^.*?(node-[ab] \[ssh\] hop)/, '$1'))
      .sort()
    assert.deepEqual(
      [...new Set(hops)],
      [
        `node-a [ssh] hop 1/2 jump: root@${JUMP.jump}:22 directly; host key matched ${knownHosts}`,
        `node-a [ssh] hop 2/2 node-a: root@${NODES[0].ip}:22 through jump; host key matched ${knownHosts}`,
        `node-b [ssh] hop 1/3 outer: root@${OUTER.outer}:22 directly; host key matched ${knownHosts}`,
        `node-b [ssh] hop 2/3 inner: root@${INNER.fromOuter}:22 through outer; host key matched ${knownHosts}`,
        `node-b [ssh] hop 3/3 node-b: root@${NODES[1].ip}:22 through inner; host key matched ${knownHosts}`,
      ],
    )
  })

  test('ip_forward off on node-a: the same findings through the hops as directly, and the printed fix runs through them', async () => {
    const old = lab.setSysctl('node-a', 'net.ipv4.ip_forward', '0')
    try {
      const base = await direct()
      const config = jumpConfig()
      const r = await doctorFromOp(svcArgs(config))
      assert.deepEqual(judgement(r), judgement(base))
      assert.ok(judgement(r).findings.includes('error KPD-NODE-FORWARDING-OFF node-a'), JSON.stringify(judgement(r)))
      const fix = r.json.findings.find((f: Finding) => f.code === 'KPD-NODE-FORWARDING-OFF').fix.argv as string[][]
      assert.deepEqual(fix, [['ssh', '-F', config, '--', 'node-a', 'sudo', 'sysctl', '-w', 'net.ipv4.ip_forward=1']])
      // Pasted in the operator's shell, it goes through the same jump host and repairs the node (root needs no sudo).
      const ran = sshFromOp(config, ['node-a', 'sysctl', '-w', 'net.ipv4.ip_forward=1'])
      assert.equal(ran.code, 0, ran.stderr)
      assert.equal(
        run('ip', ['netns', 'exec', lab.nodeNs('node-a'), 'sysctl', '-n', 'net.ipv4.ip_forward']).trim(),
        '1',
      )
    } finally {
      lab.setSysctl('node-a', 'net.ipv4.ip_forward', old)
    }
  })

  test('a node reachable only through a ProxyCommand: read and judged as direct SSH, the command ended afterwards', async () => {
    const base = await direct()
    const r = await doctorFromOp(svcArgs(proxyCommandConfig(), '-v'))
    assert.deepEqual(reachable(r), ['node-a true', 'node-b true'], r.stderr)
    assert.deepEqual(judgement(r), judgement(base))
    assert.match(
      r.stderr,
      new RegExp(
        `node-a \\[ssh\\] hop 1/1 node-a: root@${NODES[0].ip.replaceAll('.', '\\.')}:22 through ProxyCommand "ip netns exec ${lab.ns('outside')} socat STDIO TCP:${NODES[0].ip.replaceAll('.', '\\.')}:22,connect-timeout=5"; host key matched`,
      ),
    )
    // No socat the doctor started is left in the outside namespace.
    const left = tryRun('ip', ['netns', 'pids', lab.ns('outside')])
      .stdout.split('\n')
      .filter(Boolean)
      .filter((pid) => /socat.*STDIO/.test(tryRun('cat', [`/proc/${pid}/cmdline`]).stdout.replaceAll('\0', ' ')))
    assert.deepEqual(left, [])
  })

  test("a jump host whose key does not match known_hosts is refused; the other node's route still reads", async () => {
    const wrong = join(dir, 'known_hosts_wrong_jump')
    writeFileSync(
      wrong,
      readFileSync(knownHosts, 'utf8').replace(
        `${JUMP.jump} ${hostKeys.get('jump')}`,
        `${JUMP.jump} ${hostKeys.get('outer')}`,
      ),
    )
    const r = await doctorFromOp(svcArgs(jumpConfig(wrong, 'ssh_config_wrong_jump')))
    assert.deepEqual(reachable(r), ['node-a false', 'node-b true'])
    const a = r.json.nodes.find((n: {name: string}) => n.name === 'node-a')
    assert.equal(
      a.error,
      `jump host jump: host key of ${JUMP.jump} does not match ${wrong}: refusing to connect (possible man-in-the-middle)`,
    )
  })
})
