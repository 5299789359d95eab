import assert from 'node:assert/strict'
import {readFileSync} from 'node:fs'
import {test} from 'node:test'
import {
  KERNEL_TRACE_COMMANDS,
  kernelTraceLine,
  staleTables,
  traceTableName,
} from '../../src/node/kernel-trace-commands.js'
import {parseNftTrace} from '../../src/parse/nft-trace.js'
import {parseNftDump} from '../../src/parse/nft-dump.js'
import {NftTracer} from '../../src/trace/nft-tracer.js'
import type {Packet} from '../../src/trace/types.js'
import {removeTraceTables, withKernelTrace} from '../../src/node/probe/kernel-trace.js'
import type {NodeAccess, RunResult} from '../../src/node/transport/node-access.js'
import type {KernelTraceCommand, TraceTuple} from '../../src/node/kernel-trace-commands.js'
import {diagnose, type DiagnoseOptions} from '../../src/diagnosis/diagnose.js'
import {planProbes, PROBE_SETTINGS} from '../../src/diagnosis/probe-plan.js'
import {offlineCluster} from '../helpers/offline-cluster.js'
import {NODES} from '../fixtures/lab-cluster.js'
import {kernelFrom, probeLines} from '../helpers/conntrack-lines.js'
import type {KernelTraceRun} from '../../src/node/probe/kernel-trace.js'
import {LabApiServer} from '../lab/apiserver.js'
import {runCli} from '../helpers/run-cli.js'

const TABLE = traceTableName('a1b2c3', 1795000000)

test('the commands: exactly these words, quoted for a shell, sudo -n before nft (inside timeout) where the login is not root', () => {
  const setup = KERNEL_TRACE_COMMANDS.setup(TABLE, [
    {address: '10.96.10.10', port: 80, connections: 8},
    {address: '10.200.0.11', port: 30080, connections: 8},
    {address: 'fd00:10:96::a', port: 80, connections: 8},
  ])
  // One nft per part, each one transaction: the statements its script holds, `;` between them.
  assert.deepEqual(
    setup.map((c) => kernelTraceLine(c, true).split(" ';' add ")),
    [
      [
        'nft -- add table inet kpd_trace_a1b2c3_1795000000',
        "chain inet kpd_trace_a1b2c3_1795000000 prerouting '{' type filter hook prerouting priority -500 ';' policy accept ';' '}'",
        "chain inet kpd_trace_a1b2c3_1795000000 output '{' type filter hook output priority -500 ';' policy accept ';' '}'",
      ],
      [
        "nft -- add set inet kpd_trace_a1b2c3_1795000000 probes4 '{' type ipv4_addr . inet_proto . inet_service ';' flags timeout ';' timeout 30s ';' '}'",
        'rule inet kpd_trace_a1b2c3_1795000000 prerouting ip daddr . meta l4proto . th dport @probes4 tcp flags syn limit rate 20/second burst 32 packets meta nftrace set 1',
        'rule inet kpd_trace_a1b2c3_1795000000 output ip daddr . meta l4proto . th dport @probes4 tcp flags syn limit rate 20/second burst 32 packets meta nftrace set 1',
        "element inet kpd_trace_a1b2c3_1795000000 probes4 '{' 10.96.10.10 . tcp . 80 , 10.200.0.11 . tcp . 30080 '}'",
      ],
      [
        "nft -- add set inet kpd_trace_a1b2c3_1795000000 probes6 '{' type ipv6_addr . inet_proto . inet_service ';' flags timeout ';' timeout 30s ';' '}'",
        'rule inet kpd_trace_a1b2c3_1795000000 prerouting ip6 daddr . meta l4proto . th dport @probes6 tcp flags syn limit rate 20/second burst 16 packets meta nftrace set 1',
        'rule inet kpd_trace_a1b2c3_1795000000 output ip6 daddr . meta l4proto . th dport @probes6 tcp flags syn limit rate 20/second burst 16 packets meta nftrace set 1',
        "element inet kpd_trace_a1b2c3_1795000000 probes6 '{' fd00:10:96::a . tcp . 80 '}'",
      ],
    ],
  )
  assert.deepEqual(
    setup.map((c) => kernelTraceLine(c, false).slice(0, 41)),
    [
      'sudo -n nft -- add table inet kpd_trace_a',
      'sudo -n nft -- add set inet kpd_trace_a1b',
      'sudo -n nft -- add set inet kpd_trace_a1b',
    ],
  )
  // IPv4 only: no IPv6 set or rules.
  assert.equal(
    KERNEL_TRACE_COMMANDS.setup(TABLE, [{address: '10.96.10.10', port: 80, connections: 8}])
      .map((c) => kernelTraceLine(c, true))
      .join('\n')
      .includes('probes6'),
    false,
  )
  assert.equal(kernelTraceLine(KERNEL_TRACE_COMMANDS.monitor(5), false), 'timeout 5 sudo -n nft monitor trace')
  assert.equal(
    kernelTraceLine(KERNEL_TRACE_COMMANDS.deleteTable(TABLE), false),
    'sudo -n nft delete table inet kpd_trace_a1b2c3_1795000000',
  )
})

test("the trace rules mark each probe connection's opening SYN, the burst two per connection of the family, 999 at most", () => {
  const bursts = (tuples: TraceTuple[]) =>
    KERNEL_TRACE_COMMANDS.setup(TABLE, tuples)
      .flatMap((c) => kernelTraceLine(c, true).split(" ';' "))
      .filter((s) => s.startsWith('add rule '))
      .map((s) =>
        /@(probes[46]) tcp flags syn limit rate 20\/second burst (\d+) packets meta nftrace set 1$/.exec(s)!.slice(1),
      )
  // Each family's rules (one per hook) count that family's connections only: a SYN and its retransmission each.
  assert.deepEqual(
    bursts([
      {address: '10.96.10.10', port: 80, connections: 8},
      {address: '10.200.0.11', port: 30080, connections: 8},
      {address: '10.96.10.10', port: 443, connections: 3},
      {address: 'fd00:10:96::a', port: 80, connections: 1},
    ]),
    [
      ['probes4', '38'],
      ['probes4', '38'],
      ['probes6', '2'],
      ['probes6', '2'],
    ],
  )
  const many = Array.from({length: 70}, (_, i) => ({address: '10.96.10.10', port: 1000 + i, connections: 8}))
  assert.deepEqual(bursts(many), [
    ['probes4', '999'],
    ['probes4', '999'],
  ])
})

test('the commands refuse what is not a validated value: a bad address, port, table, tuple list or monitor time', () => {
  const refuses = (f: () => unknown, what: RegExp) => assert.throws(f, what)
  const setup = (tuples: TraceTuple[], table = TABLE) => KERNEL_TRACE_COMMANDS.setup(table, tuples)
  refuses(() => setup([{address: '10.96.10.10; nft flush ruleset', port: 80, connections: 8}]), /not an IP address/)
  refuses(() => setup([{address: '10.96.0.0/16', port: 80, connections: 8}]), /not an IP address/)
  refuses(() => setup([{address: '10.96.10.10', port: 0, connections: 8}]), /not a port number/)
  refuses(() => setup([{address: '10.96.10.10', port: 80.5, connections: 8}]), /not a port number/)
  refuses(() => setup([]), /no tuple/)
  refuses(() => setup([{address: '10.96.10.10', port: 80, connections: 0}]), /0 connections/)
  refuses(() => setup([{address: '10.96.10.10', port: 80, connections: 1.5}]), /1\.5 connections/)
  refuses(
    () => setup([{address: '10.96.10.10', port: 80, connections: 8}], 'kube-proxy'),
    /not a table of the doctor's/,
  )
  refuses(() => KERNEL_TRACE_COMMANDS.deleteTable('kube-proxy'), /not a table of the doctor's/)
  refuses(() => KERNEL_TRACE_COMMANDS.deleteTable('kpd_trace_a1b2c3_1795000000 ; flush ruleset'), /not a table/)
  refuses(() => KERNEL_TRACE_COMMANDS.monitor(0), /monitor for 0s/)
  refuses(() => KERNEL_TRACE_COMMANDS.monitor(21), /monitor for 21s/)
  refuses(() => traceTableName('A1B2C3', 1795000000), /bad table name/)
})

test("stale tables: only the doctor's own, older than 50 s (another run's young table is left alone)", () => {
  const listing = [
    'table ip filter',
    'table ip kube-proxy',
    'table inet kpd_trace_a1b2c3_1795000000',
    'table inet kpd_trace_ffffff_1795000040',
    'table inet kpd_trace_other',
    'table ip kpd_trace_0a0b0c_1700000000',
  ].join('\n')
  assert.deepEqual(staleTables(listing, 1795000060_000), ['kpd_trace_a1b2c3_1795000000'])
  assert.deepEqual(staleTables(listing, 1795000100_000), ['kpd_trace_a1b2c3_1795000000', 'kpd_trace_ffffff_1795000040'])
})

/** As `nft -a monitor trace` prints it (nft 1.0.6): two probes' packets interleaved, another tracer's packet, a cut line. */
const RECORDED = [
  'trace id 44a578a4 inet kpd_trace_a1b2c3_1795000000 output packet: oif "eth0" ip saddr 10.200.0.11 ip daddr 10.96.10.10 ip dscp cs0 ip ecn not-ect ip ttl 64 ip id 35439 ip protocol tcp ip length 60 tcp sport 41508 tcp dport 80 tcp flags == syn tcp window 64240 ',
  'trace id 44a578a4 inet kpd_trace_a1b2c3_1795000000 output rule ip daddr . meta l4proto . th dport @probes4 tcp flags syn limit rate 20/second burst 32 packets meta nftrace set 1 # handle 5 (verdict continue)',
  'trace id 9000aaaa inet kpd_trace_a1b2c3_1795000000 output packet: oif "eth0" ip saddr 10.200.0.11 ip daddr 10.200.0.11 ip protocol tcp tcp sport 50000 tcp dport 30080 tcp flags == syn ',
  'trace id 44a578a4 inet kpd_trace_a1b2c3_1795000000 output policy accept ',
  'trace id 44a578a4 ip nat OUTPUT packet: oif "eth0" ip saddr 10.200.0.11 ip daddr 10.96.10.10 tcp sport 41508 tcp dport 80 tcp flags == syn ',
  'trace id 44a578a4 ip nat OUTPUT rule  counter packets 0 bytes 0 jump KUBE-SERVICES # handle 12 (verdict jump KUBE-SERVICES)',
  'trace id 44a578a4 ip nat KUBE-SERVICES rule ip daddr 10.96.10.10  tcp dport 80 counter packets 0 bytes 0 jump KUBE-SVC-ABC # handle 40 (verdict jump KUBE-SVC-ABC)',
  'trace id 9000aaaa ip nat OUTPUT rule  counter packets 0 bytes 0 jump KUBE-SERVICES # handle 12 (verdict jump KUBE-SERVICES)',
  'trace id 77777777 ip filter INPUT packet: iif "eth0" ip saddr 192.0.2.9 ip daddr 10.200.0.11 tcp sport 1 tcp dport 22 ',
  'trace id 44a578a4 ip nat KUBE-SVC-ABC verdict continue ',
  'trace id 44a578a4 ip nat KUBE-SEP-XYZ rule ip protocol tcp  counter packets 0 bytes 0 dnat to 10.244.1.10:8080 # handle 51 (verdict accept)',
  'trace id 9000aaaa ip nat KUBE-SERVICES rule fib daddr type local counter packets 0 bytes 0 jump KUBE-NODEPORTS # hand',
].join('\n')

test('the trace parser: events by packet id in order, each kind, the first packet line read for its destination', () => {
  const packets = parseNftTrace(RECORDED)
  assert.deepEqual(
    packets.map((p) => [p.id, p.daddr, p.dport, p.sport, p.events.length]),
    [
      ['44a578a4', '10.96.10.10', 80, 41508, 8],
      ['9000aaaa', '10.200.0.11', 30080, 50000, 3],
      ['77777777', '10.200.0.11', 22, 1, 1],
    ],
  )
  const first = packets[0].events
  assert.deepEqual(
    first.map((e) => [e.table, e.chain, e.kind, e.verdict ?? null, e.handle ?? null]),
    [
      ['kpd_trace_a1b2c3_1795000000', 'output', 'packet', null, null],
      ['kpd_trace_a1b2c3_1795000000', 'output', 'rule', 'continue', 5],
      ['kpd_trace_a1b2c3_1795000000', 'output', 'policy', 'accept', null],
      ['nat', 'OUTPUT', 'packet', null, null],
      ['nat', 'OUTPUT', 'rule', 'jump KUBE-SERVICES', 12],
      ['nat', 'KUBE-SERVICES', 'rule', 'jump KUBE-SVC-ABC', 40],
      ['nat', 'KUBE-SVC-ABC', 'return', 'continue', null],
      ['nat', 'KUBE-SEP-XYZ', 'rule', 'accept', 51],
    ],
  )
  assert.equal(first[5].rule, 'ip daddr 10.96.10.10  tcp dport 80 counter packets 0 bytes 0 jump KUBE-SVC-ABC')
  // The line the monitor's timeout cut short keeps its text, with no verdict.
  assert.equal(packets[1].events[2].verdict, undefined)
})

/** A stand-in node: answers each kernel trace command from `answer`, records every line it was asked to run. */
function fakeNode(answer: (cmd: KernelTraceCommand) => Partial<RunResult & {kind: 'ran'}> | undefined = () => ({})) {
  const ran: string[] = []
  const access: NodeAccess = {
    run: () => Promise.reject(new Error('no read expected')),
    openTcp: () => Promise.reject(new Error('no tcp expected')),
    readFile: () => Promise.reject(new Error('no file expected')),
    describe: () => ({transport: 'ssh', address: 'kpd@node-a:22', tcpVia: 'an SSH port forward'}),
    close: () => undefined,
    usesSudo: () => Promise.resolve(false),
    runKernelTrace: (cmd) => {
      ran.push(kernelTraceLine(cmd, true))
      return Promise.resolve({kind: 'ran', code: 0, stdout: Buffer.alloc(0), stderr: '', ...answer(cmd)} as RunResult)
    },
  }
  return {access, ran}
}

const LISTING = 'table ip filter\ntable ip nat\ntable inet kpd_trace_0a0b0c_1795000000\n'
const NOW = () => 1795000100_000

test('--dry-run prints the commands, announced before anything, and runs none of them', async () => {
  const {access, ran} = fakeNode()
  const said: string[] = []
  let probed = 0
  const r = await withKernelTrace(
    access,
    'node-a',
    [{address: '10.96.10.10', port: 80, connections: 8}],
    {announce: (l) => said.push(l), dryRun: true, monitorSeconds: 4, now: NOW},
    async () => ++probed,
  )
  assert.deepEqual(ran, [])
  assert.equal(probed, 1)
  assert.deepEqual(r.trace, {
    traced: false,
    reason: 'kernel trace not run: --dry-run (the commands were printed, nothing was changed)',
  })
  assert.equal(
    said[0],
    "--kernel-trace on node-a (dry run: nothing is run): delete the doctor's own tables (kpd_trace_*) older than 50s, then run (nothing outside its own table is changed):",
  )
  assert.equal(said.length, 1 + 4)
  // In the order they run: the monitor (it only watches) first, then the nft that makes the table, the one that marks
  // the IPv4 probes, and the deletion.
  assert.equal(said[1], '  timeout 4 nft monitor trace')
  assert.match(said[2], /^ {2}nft -- add table inet kpd_trace_[0-9a-f]{6}_1795000100 ';' add chain .* output .*'\}'$/)
  assert.match(
    said[3],
    /^ {2}nft -- add set inet kpd_trace_[0-9a-f]{6}_1795000100 probes4 .* '\{' 10\.96\.10\.10 \. tcp \. 80 '\}'$/,
  )
  assert.match(said[4], /^ {2}nft delete table inet kpd_trace_[0-9a-f]{6}_1795000100$/)
})

test('a run: the stale table removed, the table made, the monitor around the probes, the table deleted; the trace kept', async () => {
  let probedWhileWatching = false
  const {access, ran} = fakeNode((cmd) =>
    cmd.argv.join(' ') === 'nft list tables' ? {stdout: Buffer.from(LISTING)} : undefined,
  )
  const table = () => /kpd_trace_[0-9a-f]{6}_1795000100/.exec(ran.join('\n'))![0]
  // The monitor prints what netfilter traced until its timeout ends it (exit 124), here once the probes are over.
  const answer = access.runKernelTrace!
  access.runKernelTrace = (cmd, timeoutMs, stop) => {
    if (cmd.argv[0] !== 'timeout') return answer(cmd, timeoutMs, stop)
    ran.push(kernelTraceLine(cmd, true))
    return new Promise((resolve) =>
      stop!.addEventListener('abort', () =>
        resolve({
          kind: 'ran',
          code: 124,
          stdout: Buffer.from(RECORDED.replaceAll('kpd_trace_a1b2c3_1795000000', table())),
          stderr: '',
        }),
      ),
    )
  }
  const r = await withKernelTrace(
    access,
    'node-a',
    [
      {address: '10.96.10.10', port: 80, connections: 8},
      {address: '10.200.0.11', port: 30080, connections: 8},
    ],
    {announce: () => undefined, dryRun: false, monitorSeconds: 4, now: NOW, settleMs: 1},
    async () => {
      probedWhileWatching = ran.some((l) => l.startsWith('timeout 4 nft monitor trace'))
      return 'tallies'
    },
  )
  assert.equal(r.result, 'tallies')
  assert.ok(probedWhileWatching, 'the monitor was started before the probes')
  assert.deepEqual(
    ran.map((l) => l.replaceAll(table(), 'T').replace(/ ';' add .*/, ' ; …')),
    [
      // The monitor first: it watches while the tables are listed and the doctor's is made.
      'timeout 4 nft monitor trace',
      'nft list tables',
      'nft delete table inet kpd_trace_0a0b0c_1795000000',
      'nft -- add table inet T ; …',
      "nft -- add set inet T probes4 '{' type ipv4_addr . inet_proto . inet_service ';' flags timeout ';' timeout 30s ';' '}' ; …",
      'nft delete table inet T',
    ],
  )
  assert.ok(r.trace.traced)
  assert.deepEqual(
    r.trace.traced && r.trace.packets.map((p) => p.id),
    ['44a578a4', '9000aaaa'],
    "another tracer's packet (77777777) is not the probes'",
  )
  assert.deepEqual(r.trace.traced && r.trace.removedStale, ['kpd_trace_0a0b0c_1795000000'])
})

test('a failing step deletes the table; no root says so; iptables-legacy changes nothing; the probes run all the same', async () => {
  const failing = fakeNode((cmd) => {
    if (cmd.argv.join(' ') === 'nft list tables') return {stdout: Buffer.from('table ip nat\n')}
    if (cmd.argv.includes('add')) return {code: 1, stderr: 'Error: Could not process rule: No such file or directory\n'}
    return undefined
  })
  const opts = {announce: () => undefined, dryRun: false, monitorSeconds: 2, now: NOW, settleMs: 1}
  const oneTuple = [{address: '10.96.10.10', port: 80, connections: 8}]
  const r = await withKernelTrace(failing.access, 'node-a', oneTuple, opts, async () => 1)
  assert.equal(r.result, 1)
  assert.equal(
    !r.trace.traced && r.trace.reason,
    'kernel trace not run: making its table (nft) failed: Error: Could not process rule: No such file or directory (exit 1)',
  )
  // nft's script is one transaction: a setup that failed made nothing, so nothing is deleted; the monitor is stopped.
  assert.deepEqual(
    failing.ran.map((l) => l.replace(/ kpd_trace_.*/, '')),
    ['timeout 2 nft monitor trace', 'nft list tables', 'nft -- add table inet'],
  )

  // The table made, marking the probes refused (sudo allows the first part, not the second): the table is deleted.
  const secondFails = fakeNode((cmd) => {
    if (cmd.argv.join(' ') === 'nft list tables') return {stdout: Buffer.from('table ip nat\n')}
    if (cmd.argv.includes('set')) return {code: 1, stderr: 'sudo: a password is required\n'}
    return undefined
  })
  const half = await withKernelTrace(secondFails.access, 'node-a', oneTuple, opts, async () => 2)
  assert.equal(half.result, 2)
  assert.equal(
    !half.trace.traced && half.trace.reason,
    'kernel trace not run: no root for nft (sudo: a password is required (exit 1))',
  )
  assert.deepEqual(
    secondFails.ran.map((l) => l.replace(/ kpd_trace_.*/, '')),
    [
      'timeout 2 nft monitor trace',
      'nft list tables',
      'nft -- add table inet',
      'nft -- add set inet',
      'nft delete table inet',
    ],
  )

  const noRoot = fakeNode(() => ({code: 1, stderr: 'Error: Operation not permitted\n'}))
  const n = await withKernelTrace(noRoot.access, 'node-a', oneTuple, opts, async () => 1)
  assert.equal(
    !n.trace.traced && n.trace.reason,
    'kernel trace not run: no root for nft (Error: Operation not permitted (exit 1))',
  )
  assert.deepEqual(noRoot.ran, ['timeout 2 nft monitor trace', 'nft list tables'])

  const legacy = fakeNode(() => ({stdout: Buffer.from('')}))
  const l = await withKernelTrace(legacy.access, 'node-a', oneTuple, opts, async () => 1)
  assert.equal(!l.trace.traced && l.trace.reason, 'kernel trace not available on iptables-legacy (no change made)')
  // Nothing that changes the node: the monitor (stopped at once) and the listing only.
  assert.deepEqual(legacy.ran, ['timeout 2 nft monitor trace', 'nft list tables'])
})

test("cleanup deletes every table of the doctor's, whatever its age, and nothing else", async () => {
  const {access, ran} = fakeNode((cmd) =>
    cmd.argv.join(' ') === 'nft list tables'
      ? {stdout: Buffer.from(`${LISTING}table inet kpd_trace_ffffff_1795000099\ntable inet kpd_trace_x\n`)}
      : undefined,
  )
  const said: string[] = []
  assert.deepEqual(await removeTraceTables(access, (l) => said.push(l)), {
    removed: ['kpd_trace_0a0b0c_1795000000', 'kpd_trace_ffffff_1795000099'],
    failed: [],
  })
  assert.deepEqual(ran.slice(1), said)
})

/**
 * node-a's ClusterIP probes as netfilter would trace them, written from a walk's way: the nat chains of kube-proxy's the
 * SYN matched, as `nft monitor trace` prints iptables-nft's rules (their text is not compared, only where they are).
 */
function traceOf(table: string, steps: Array<{table: string; chain: string}>): string {
  const head = (chain: string, t = 'nat') => `trace id 0badcafe ip ${t} ${chain}`
  return [
    `trace id 0badcafe inet ${table} output packet: oif "eth0" ip saddr 10.200.0.11 ip daddr 10.96.10.10 ip protocol tcp tcp sport 40000 tcp dport 80 tcp flags == syn `,
    `trace id 0badcafe inet ${table} output rule ip daddr . meta l4proto . th dport @probes4 meta nftrace set 1 (verdict continue)`,
    ...steps.map((s) => `${head(s.chain, s.table)} rule counter packets 0 bytes 0 (verdict continue)`),
  ].join('\n')
}

const WEB = [
  ['10.244.1.10:8080', 'replied'],
  ['10.244.2.10:8080', 'replied'],
  ['10.244.2.11:8080', 'replied'],
] as const satisfies Array<[string, 'replied']>

function withTrace(trace: (walked: Array<{table: string; chain: string}>) => string): DiagnoseOptions {
  const {cluster, observations} = offlineCluster({})
  const plain = diagnose(cluster, observations, {})
  const path = plain.paths.find((p) => p.node === 'node-a' && p.entry === 'node→ClusterIP' && p.port === 'http')!
  const walked = path.trace.outcomes.find((o) => o.destination === '10.244.1.10:8080')!.steps
  const nodes = NODES.map((n) => ({
    node: n.name,
    via: 'an SSH port forward',
    tallies: planProbes(cluster, n.name).targets.map((target) => {
      const attempts = target.attempts ?? PROBE_SETTINGS.vipAttempts
      return {target, attempts, connected: attempts, refused: 0, timedOut: 0, unreachable: 0}
    }),
    kernel: kernelFrom({
      '10.96.10.10:80': probeLines(n.name === 'node-a' ? '10.200.0.11' : '10.200.0.12', '10.96.10.10', 80, [...WEB]),
    }),
    ...(n.name === 'node-a'
      ? {
          kernelTrace: {
            traced: true,
            table: TABLE,
            packets: parseNftTrace(trace(walked)),
            removedStale: [],
          } satisfies KernelTraceRun,
        }
      : {}),
  }))
  return {probes: {ran: true, settings: PROBE_SETTINGS, nodes, notes: []}}
}

test("KPD-KERNEL-DISAGREES: the kernel's chains equal the walk's: agrees, no finding; a wrong walk's SEP chain: caught", () => {
  const {cluster, observations} = offlineCluster({})
  const agree = diagnose(
    cluster,
    observations,
    withTrace((walked) => traceOf(TABLE, walked)),
  )
  assert.deepEqual(
    agree.findings.map((f) => f.code),
    [],
  )
  const v = agree.kernel.find((k) => k.node === 'node-a' && k.target.kind === 'ClusterIP')!
  assert.equal(v.agreesWithWalk, true)
  assert.match(
    v.detail,
    /; netfilter's trace agrees: 6 chains of kube-proxy's, as walked \(KUBE-SERVICES → (KUBE-SVC-\w+) → KUBE-MARK-MASQ → \1 → KUBE-SEP-\w+ → KUBE-POSTROUTING\)$/,
  )
  assert.ok(v.rules.length > 0 && v.rules.every((r) => r.table !== `inet ${TABLE}`))

  // The kernel went to another SEP chain than any the walk can take: the model is wrong on this path.
  const wrong = diagnose(
    cluster,
    observations,
    withTrace((walked) =>
      traceOf(
        TABLE,
        walked.map((s) => (s.chain.startsWith('KUBE-SEP-') ? {...s, chain: 'KUBE-SEP-NOTWALKED'} : s)),
      ),
    ),
  )
  assert.deepEqual(
    wrong.findings.map((f) => [f.code, f.node]),
    [['KPD-KERNEL-DISAGREES', 'node-a']],
  )
  const svc = /KUBE-SVC-\w+/.exec(v.detail)![0]
  const sep = /KUBE-SEP-\w+/.exec(v.detail)![0]
  assert.equal(
    wrong.findings[0].message,
    `node-a: ClusterIP 10.96.10.10:80 (http, node→ClusterIP): the kernel sent 10.244.1.10:8080 ×3 (replied), 10.244.2.10:8080 ×3 (replied), 10.244.2.11:8080 ×2 (replied); the walk DNATs to 10.244.1.10:8080, 10.244.2.10:8080, 10.244.2.11:8080; netfilter's trace parts from the walk after nat/${svc}: the kernel went to nat/KUBE-SEP-NOTWALKED, the walk to nat/${sep}`,
  )
})

test('the monitor is ended once the probes are over (a moment for their last events), not left to its timeout', async () => {
  const {access, ran} = fakeNode((cmd) =>
    cmd.argv.join(' ') === 'nft list tables' ? {stdout: Buffer.from(LISTING)} : undefined,
  )
  let stopped: AbortSignal | undefined
  const monitorAt = ran.length
  const watch = access.runKernelTrace!
  // The monitor prints the probes' events, then would watch until its timeout (20 s): only the stop ends it sooner.
  access.runKernelTrace = (cmd, timeoutMs, stop) => {
    if (cmd.argv[0] !== 'timeout') return watch(cmd, timeoutMs, stop)
    ran.push(kernelTraceLine(cmd, true))
    stopped = stop
    return new Promise((resolve) =>
      stop!.addEventListener('abort', () =>
        resolve({
          kind: 'ran',
          code: null,
          stdout: Buffer.from(RECORDED.replaceAll('kpd_trace_a1b2c3_1795000000', table())),
          stderr: '',
        }),
      ),
    )
  }
  const table = () => /kpd_trace_[0-9a-f]{6}_1795000100/.exec(ran.join('\n'))![0]
  const started = Date.now()
  const r = await withKernelTrace(
    access,
    'node-a',
    [{address: '10.96.10.10', port: 80, connections: 8}],
    {announce: () => undefined, dryRun: false, monitorSeconds: 20, now: NOW, settleMs: 1, drainMs: 5},
    () => Promise.resolve('tallies'),
  )
  assert.ok(Date.now() - started < 5000, 'not the monitor’s 20 s')
  assert.equal(stopped?.aborted, true)
  assert.ok(r.trace.traced, JSON.stringify(r.trace))
  // Ended by the doctor: no exit status, and no warning for it.
  assert.equal(r.trace.traced && r.trace.warning, undefined)
  assert.ok(r.trace.traced && r.trace.packets.length > 0)
  assert.equal(ran.at(-1), `nft delete table inet ${table()}`)
  assert.ok(ran.length > monitorAt)
})

test("the walk leaves out the doctor's own trace table (made while the node's rules may still be read): same verdict, same way", () => {
  const kubeProxy = readFileSync('test/fixtures/nft/kube-proxy-comments.list.txt', 'utf8')
  // As `nft list ruleset` prints the table --kernel-trace makes, for the Service the walk goes to.
  const withTraceTable = `${kubeProxy}
table inet ${TABLE} {
\tset probes4 {
\t\ttype ipv4_addr . inet_proto . inet_service
\t\ttimeout 30s
\t\telements = { 10.96.7.20 . tcp . 80 expires 29s }
\t}

\tchain prerouting {
\t\ttype filter hook prerouting priority -500; policy accept;
\t\tip daddr . meta l4proto . th dport @probes4 tcp flags syn limit rate 20/second burst 32 packets meta nftrace set 1
\t}

\tchain output {
\t\ttype filter hook output priority -500; policy accept;
\t\tip daddr . meta l4proto . th dport @probes4 tcp flags syn limit rate 20/second burst 32 packets meta nftrace set 1
\t}
}
`
  const packet: Packet = {
    src: '10.244.1.5',
    dst: '10.96.7.20',
    proto: 'tcp',
    dport: 80,
    sport: 40000,
    inIface: 'cni0',
    outIface: 'eth0',
  }
  const walk = (text: string) => new NftTracer(parseNftDump(text), {localAddresses: ['192.168.1.10']}).trace(packet)
  const plain = walk(kubeProxy)
  const traced = walk(withTraceTable)
  assert.equal(plain.verdict, 'DNAT')
  assert.equal(traced.verdict, plain.verdict)
  assert.deepEqual(traced.destinations, plain.destinations)
  assert.deepEqual(
    traced.outcomes.map((o) => o.steps.map((s) => `${s.table} ${s.chain}`)),
    plain.outcomes.map((o) => o.steps.map((s) => `${s.table} ${s.chain}`)),
  )
})

test('svc --watch --kernel-trace is refused before anything is read: one line, exit 2, no request to the cluster', async () => {
  const api = new LabApiServer({token: 'kpd-kernel-trace-watch'})
  await api.start()
  try {
    const live = ['svc', 'web', '-n', 'shop', '--kubeconfig', api.writeKubeconfig(), '--via', 'ssh']
    const refusal =
      "--kernel-trace makes a trace table on each node for one run's probes: it cannot be combined with --watch (each round would change the nodes again); run it once, without --watch"
    for (const extra of [
      ['--watch', '--kernel-trace'],
      ['--watch', '--kernel-trace', '--dry-run'],
    ]) {
      const r = await runCli([...live, ...extra])
      assert.deepEqual([r.code, r.stderr, r.stdout], [2, `kproxy-doctor: ${refusal}\n`, ''], extra.join(' '))
    }
    const json = await runCli([...live, '--kernel-trace', '--watch', '-o', 'json'])
    assert.deepEqual(
      [json.code, json.stderr, json.json?.kind, json.json?.error],
      [2, `kproxy-doctor: ${refusal}\n`, 'Error', refusal],
    )
    assert.deepEqual(api.requests, [], 'no API request: no node listed, no transport opened')
    // The same run without --watch goes to the cluster (the lab API serves no Service web: exit 2 after asking).
    await runCli([...live, '--kernel-trace', '--dry-run'])
    assert.ok(api.requests.length > 0, 'without --watch the run reads the cluster')
  } finally {
    await api.stop()
  }
})
