import assert from 'node:assert/strict'
import {execFileSync, spawn, type ChildProcess} from 'node:child_process'
import {dirname, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'
import {describe, test} from 'node:test'
import {labGuard} from '../helpers/lab-guard.js'
import {withLab} from '../helpers/lab-suite.js'
import {runCli, type CliResult} from '../helpers/run-cli.js'
import type {NetnsLab} from '../lab/netns-lab.js'
import {labAccess} from '../helpers/lab-cli.js'

/**
 * --kernel-trace against the netns lab: the doctor makes its private nft table on each node (over the real sshd),
 * netfilter traces the real probes' packets, and the doctor sets the kernel's rule-by-rule way against its walk. Every
 * test checks the residue: `nft list tables` in each node's namespace is the same before and after.
 */
const why = labGuard()
const BIN = resolve(dirname(fileURLToPath(import.meta.url)), '../../../bin/run.js')
const NODE_NAMES = ['node-a', 'node-b']

interface KernelItem {
  node: string
  target: string
  rules: Array<{table: string; chain: string; rule: string; verdict: string}>
  agreesWithWalk: boolean | null
  detail: string
}

describe('--kernel-trace against the netns lab (iptables-nft and nftables mode, real sshd)', {skip: why}, () => {
  let lab: NetnsLab
  withLab((l) => (lab = l))

  const args = (...extra: string[]) => ['svc', 'web', '-n', 'shop', ...labAccess(lab), '--kernel-trace', ...extra]
  const doctor = (...extra: string[]): Promise<CliResult> => runCli(args(...extra))
  const tables = (node: string) =>
    execFileSync('ip', ['netns', 'exec', lab.nodeNs(node), 'nft', 'list', 'tables'], {encoding: 'utf8'})
  const allTables = () => NODE_NAMES.map(tables)
  const kernel = (r: CliResult): KernelItem[] => r.json.kernelTrace
  const traceGaps = (r: CliResult) =>
    r.json.notChecked.filter((n: {check: string}) => n.check === 'kernel-trace').map((n: {reason: string}) => n.reason)

  /** Every probed address traced, its kernel way equal to the walk's, the doctor's table never among the rules. */
  const assertAgrees = (r: CliResult) => {
    assert.deepEqual(traceGaps(r), [])
    assert.equal(kernel(r).length, 4, JSON.stringify(kernel(r)))
    for (const k of kernel(r)) {
      assert.equal(k.agreesWithWalk, true, `${k.node} ${k.target}: ${k.detail}`)
      assert.match(k.detail, /; netfilter's trace agrees: \d+ chains of kube-proxy's, as walked \(/)
      assert.ok(k.rules.length > 0, `${k.node} ${k.target}: rules`)
      assert.ok(
        k.rules.every((x) => !x.table.includes('kpd_trace_')),
        JSON.stringify(k.rules),
      )
    }
  }

  test('healthy (iptables mode, nft backend): every probed path traced, the kernel agreeing with the walk; nothing left', async () => {
    const before = allTables()
    const r = await doctor('-o', 'json')
    assert.equal(r.code, 0, r.stdout + r.stderr)
    assertAgrees(r)
    assert.deepEqual(allTables(), before)
    // Announced before anything was changed: the node, then each command.
    for (const node of NODE_NAMES) {
      const at = r.stderr.indexOf(`kproxy-doctor: --kernel-trace on ${node}: delete the doctor's own tables`)
      assert.ok(at >= 0, r.stderr)
      // The monitor first (it only watches), then the nft that makes the table, the one that marks the IPv4 probes,
      // then its deletion.
      assert.match(
        r.stderr.slice(at),
        /^[^\n]*\nkproxy-doctor: {3}timeout \d+ nft monitor trace\nkproxy-doctor: {3}nft -- add table inet (kpd_trace_[0-9a-f]{6}_\d{10}) ';' add chain inet \1 prerouting [^\n]* add chain inet \1 output [^\n]*'\}'\nkproxy-doctor: {3}nft -- add set inet \1 probes4 [^\n]* add element inet \1 probes4 '\{' [^\n]* '\}'\nkproxy-doctor: {3}nft delete table inet \1\n/,
      )
    }
  })

  test('a stale endpoint on node-a (faulty Service): the kernel still takes the walked way; nothing left', async () => {
    lab.applyRules('node-a', {staleEndpoint: {ip: '10.244.2.99', port: 8080}})
    try {
      const before = allTables()
      const r = await doctor('-o', 'json')
      assert.equal(r.code, 1, r.stdout + r.stderr)
      assertAgrees(r)
      assert.ok(!r.json.findings.some((f: {code: string}) => f.code === 'KPD-KERNEL-DISAGREES'))
      assert.deepEqual(allTables(), before)
    } finally {
      lab.clearFaults()
    }
  })

  test('nftables mode: the kernel trace of kube-proxy’s own table agrees with the walk; nothing left', async () => {
    for (const n of NODE_NAMES) lab.setMode(n, 'nftables')
    try {
      const before = allTables()
      const r = await doctor('--proxy-mode', 'nftables', '-o', 'json')
      assert.equal(r.code, 0, r.stdout + r.stderr)
      assertAgrees(r)
      assert.ok(kernel(r).every((k) => k.rules.some((x) => x.table === 'ip kube-proxy')))
      assert.deepEqual(allTables(), before)
    } finally {
      for (const n of NODE_NAMES) lab.setMode(n, 'iptables')
    }
  })

  test('--dry-run prints the commands and changes nothing; coverage says so', async () => {
    const before = allTables()
    const r = await doctor('--dry-run', '-o', 'json')
    assert.equal(r.code, 0, r.stdout + r.stderr)
    assert.deepEqual(allTables(), before)
    assert.match(r.stderr, /--kernel-trace on node-a \(dry run: nothing is run\)/)
    assert.deepEqual(traceGaps(r), [
      'kernel trace not run: --dry-run (the commands were printed, nothing was changed)',
      'kernel trace not run: --dry-run (the commands were printed, nothing was changed)',
    ])
  })

  test('only the probes’ tuples are traced: a second flow from node-a during the run leaves no trace', async () => {
    const ns = lab.nodeNs('node-a')
    const monitor = spawn('ip', ['netns', 'exec', ns, 'timeout', '25', 'nft', 'monitor', 'trace'], {
      stdio: ['ignore', 'pipe', 'ignore'],
    })
    let seen = ''
    monitor.stdout!.on('data', (d: Buffer) => (seen += d.toString()))
    const ended = new Promise((done) => monitor.on('exit', done))
    try {
      const run = doctor('-o', 'json')
      // Another tuple, during the run: node-a straight to an endpoint's other port and to the ClusterIP's port 81.
      const deadline = Date.now() + 20_000
      let flows = 0
      while (!/kpd_trace_/.test(tables('node-a')) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
      for (let i = 0; i < 3; i++) {
        lab.connect(ns, '10.244.1.10', 8080, 1)
        lab.connect(ns, '10.96.10.10', 81, 1)
        flows++
      }
      const r = await run
      assert.equal(r.code, 0, r.stdout + r.stderr)
      assert.equal(flows, 3)
    } finally {
      monitor.kill('SIGTERM')
      await ended
    }
    const firstPackets = new Map<string, string>()
    // Whole lines only: the monitor is stopped mid-print at times, and its last line is then cut after "packet: ".
    for (const line of seen.split('\n').slice(0, -1)) {
      const m = /^trace id (\w+) \S+ (\S+) \S+ packet: (.*)$/.exec(line)
      if (m && !firstPackets.has(m[1])) firstPackets.set(m[1], `${m[2]} ${m[3]}`)
    }
    assert.ok(firstPackets.size > 0, 'the probes were traced')
    for (const [id, first] of firstPackets) {
      assert.match(first, /^kpd_trace_/, `${id}: first seen by the doctor's table`)
      assert.match(
        first,
        /ip daddr (10\.96\.10\.10 .*tcp dport 80|10\.200\.0\.11 .*tcp dport 30080) /,
        `${id}: ${first}`,
      )
    }
  })

  test("every probe connection of a round is traced, by its opening SYN only (each node's own monitor counts them); nothing left", async () => {
    const before = allTables()
    const monitors = NODE_NAMES.map((node) => {
      const child = spawn('ip', ['netns', 'exec', lab.nodeNs(node), 'timeout', '30', 'nft', 'monitor', 'trace'], {
        stdio: ['ignore', 'pipe', 'ignore'],
      })
      const watched = {node, child, seen: '', ended: new Promise((done) => child.on('exit', done))}
      child.stdout!.on('data', (d: Buffer) => (watched.seen += d.toString()))
      return watched
    })
    let r: CliResult
    try {
      // `nft monitor` says nothing when it is subscribed: a moment for it (the doctor's own waits so too).
      await new Promise((done) => setTimeout(done, 500))
      r = await doctor('-o', 'json')
    } finally {
      for (const m of monitors) m.child.kill('SIGTERM')
      await Promise.all(monitors.map((m) => m.ended))
    }
    assert.equal(r.code, 0, r.stdout + r.stderr)
    assertAgrees(r)
    for (const m of monitors) {
      // Each traced packet's first line: the doctor's table marked it. Whole lines only (the last may be cut).
      const first = new Map<string, string>()
      for (const line of m.seen.split('\n').slice(0, -1)) {
        const p = /^trace id (\w+) inet (kpd_trace_\S+) \S+ packet: (.*)$/.exec(line)
        if (p && !first.has(p[1])) first.set(p[1], p[3])
      }
      const connections = new Map<string, Set<number>>()
      for (const [id, packet] of first) {
        assert.match(packet, /tcp flags == syn /, `${m.node} ${id}: only a connection's opening packet is marked`)
        const t = /ip daddr (\S+) .*tcp sport (\d+) tcp dport (\d+) /.exec(packet)
        assert.ok(t, packet)
        const target = `${t[1]}:${t[3]}`
        connections.set(target, (connections.get(target) ?? new Set()).add(Number(t[2])))
      }
      const probed = r.json.probes.nodes
        .find((n: {node: string}) => n.node === m.node)
        .targets.filter((t: {kind: string}) => t.kind !== 'endpoint')
        .map((t: {address: string; attempts: number}) => [t.address, t.attempts])
        .sort()
      assert.equal(probed.length, 2, JSON.stringify(probed))
      // The connections the probes opened, each source port once: as many as the probes made, every one traced.
      assert.deepEqual(
        [...connections].map(([target, ports]) => [target, ports.size]).sort(),
        probed,
        `${m.node}: ${JSON.stringify([...connections].map(([t, p]) => [t, [...p]]))}`,
      )
    }
    assert.deepEqual(allTables(), before)
  })

  test('a table killed runs left: an old one is removed by the next run; a SIGKILLed run’s by cleanup --node', async () => {
    const before = allTables()
    const ns = lab.nodeNs('node-b')
    execFileSync('ip', ['netns', 'exec', ns, 'nft', 'add', 'table', 'inet', 'kpd_trace_0a0b0c_1700000000'])
    const r = await doctor('-o', 'json')
    assert.equal(r.code, 0, r.stdout + r.stderr)
    assert.match(
      r.stderr,
      /removing a table a killed run left on node-b: nft delete table inet kpd_trace_0a0b0c_1700000000/,
    )
    assert.deepEqual(allTables(), before)

    const child = spawn(process.execPath, [BIN, ...args('-o', 'json')], {stdio: ['ignore', 'ignore', 'pipe']})
    await untilTableOnBoth(child)
    child.kill('SIGKILL')
    await new Promise((done) => child.on('exit', done))
    assert.ok(
      NODE_NAMES.some((n) => /kpd_trace_/.test(tables(n))),
      'the killed run left its table',
    )
    for (const node of NODE_NAMES) {
      const c = await runCli(['cleanup', '--node', node, ...labAccess(lab)])
      assert.equal(c.code, 0, c.stdout + c.stderr)
      assert.match(
        c.stdout,
        new RegExp(
          `^${node}: (deleted table inet kpd_trace_[0-9a-f]{6}_\\d{10}|no table of kproxy-doctor's \\(kpd_trace_\\*\\) to delete)$`,
          'm',
        ),
      )
    }
    assert.deepEqual(allTables(), before)
  })

  test('SIGINT mid-run: the tables are deleted before the process exits (130)', async () => {
    const before = allTables()
    const child = spawn(process.execPath, [BIN, ...args('-o', 'json')], {stdio: ['ignore', 'ignore', 'pipe']})
    let stderr = ''
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()))
    await untilTableOnBoth(child)
    const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)))
    child.kill('SIGINT')
    assert.equal(await exited, 130, stderr)
    assert.match(stderr, /^kproxy-doctor: SIGINT: deleting [12] kernel trace tables? before exiting$/m)
    assert.deepEqual(allTables(), before)
  })

  /** Waits (bounded) until a doctor's table exists on every node, or on one when the other's is already gone. */
  async function untilTableOnBoth(child: ChildProcess): Promise<void> {
    const deadline = Date.now() + 30_000
    while (Date.now() < deadline && child.exitCode === null) {
      if (NODE_NAMES.every((n) => /kpd_trace_/.test(tables(n)))) return
      await new Promise((r) => setTimeout(r, 50))
    }
    assert.fail('no table of the doctor’s appeared on both nodes within 30 s')
  }
})
