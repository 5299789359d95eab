import assert from 'node:assert/strict'
import {spawnSync} from 'node:child_process'
import {test} from 'node:test'
import {buildCommandLine, NODE_COMMANDS} from '../../src/node/node-commands.js'
import type {NodeCommand} from '../../src/node/read/node-reads.js'
import {readFileSync} from 'node:fs'
import {basename} from 'node:path'
import {KERNEL_TRACE_COMMANDS, kernelTraceLine, traceTableName} from '../../src/node/kernel-trace-commands.js'
import {isRegex, sudoAllows, SUDOERS, sudoersSpecs} from '../helpers/sudoers-specs.js'

/** What the doctor runs under `sudo -n` when it logs in as a user that is not root, as sudo sees it (shell quotes removed). */
function sudoCommands(): string[] {
  const lines = (Object.keys(NODE_COMMANDS) as NodeCommand[]).map((key) => buildCommandLine(key, false) as string)
  for (const protocol of ['tcp', 'udp', 'sctp'] as const)
    for (const address of ['10.96.0.10', 'fd00:10:96::a'])
      lines.push(buildCommandLine('conntrackList', false, {protocol, address}))
  for (const address of ['10.96.0.10', 'fd00:10:96::a'])
    lines.push(buildCommandLine('conntrackProbe', false, {address, port: 443}))
  for (const family of ['ip', 'ip6'] as const)
    for (const json of [true, false]) lines.push(buildCommandLine('nftKubeProxyTable', false, {family, json}))
  for (const family of [4, 6] as const)
    for (const [table, chain] of [
      ['nat', 'KUBE-SVC-ABCDEFGHIJKLMNOP'],
      ['filter', 'KUBE-SERVICES'],
    ] as const)
      lines.push(buildCommandLine('ruleCounters', false, {family, table, chain}))
  for (const family of [4, 6] as const)
    for (const table of ['nat', 'filter'] as const)
      lines.push(buildCommandLine('tableCounters', false, {family, table}))
  return lines
    .filter((line) => line.startsWith('sudo -n '))
    .map((line) => line.slice('sudo -n '.length).replace(/'/g, ''))
}

test('the sudoers snippet allows exactly the commands the doctor runs with sudo -n, with exactly their arguments', () => {
  const specs = sudoersSpecs()
  const commands = sudoCommands()
  assert.deepEqual(
    commands.filter((c) => !specs.some((s) => sudoAllows(s, c))),
    [],
    'run with sudo but not allowed',
  )
  assert.deepEqual(
    specs.filter((s) => !commands.some((c) => sudoAllows(s, c))),
    [],
    'allowed but never run',
  )
})

test('each allowed form is exact: no glob, and a regular expression admits no extra word (sudoers * matches across words)', () => {
  const specs = sudoersSpecs()
  assert.deepEqual(
    specs.filter((s) => {
      const args = s.split(' ').slice(1).join(' ')
      return !isRegex(args) && /[*?[\]]/.test(args)
    }),
    [],
    'a glob in an allowed command',
  )
  // What a glob such as `conntrack -L -p tcp -d *` let through: deleting entries, other outputs, other filters.
  const hostile = [
    'conntrack -L -p tcp -d 10.96.0.10 -D',
    'conntrack -L -p tcp -d 10.96.0.10 -o xml',
    'conntrack -L -p tcp -d 10.96.0.10 --orig-dst 10.0.0.1',
    'conntrack -L -p tcp -d -D',
    'conntrack -L -p tcp -d',
    'conntrack -D -p tcp -d 10.96.0.10',
    'conntrack -L -p tcp --orig-dst 10.96.0.10 --orig-port-dst 443 -D',
    'conntrack -L -p tcp --orig-dst 10.96.0.10 -D --orig-port-dst 443',
    'conntrack -L -p icmp -d 10.96.0.10',
    'conntrack -F',
    // The rule counters' read: listing only, never zeroing (-Z), flushing or listing another way.
    'iptables --modprobe=/bin/false -w 5 -t nat -v -S KUBE-SERVICES -Z',
    'iptables --modprobe=/bin/false -w 5 -t nat -v -S -Z KUBE-SERVICES',
    'iptables --modprobe=/bin/false -w 5 -t nat -Z',
    'iptables --modprobe=/bin/false -w 5 -t nat -v -S KUBE-SERVICES -F',
    'iptables --modprobe=/bin/evil -w 5 -t nat -v -S KUBE-SERVICES',
    'iptables --modprobe=/bin/false -w 5 -t security -v -S INPUT',
    'ip6tables --modprobe=/bin/false -w 5 -t nat -v -S',
  ]
  assert.deepEqual(
    hostile.filter((c) => specs.some((s) => sudoAllows(s, c))),
    [],
    'allowed beyond the form the doctor runs',
  )
  assert.deepEqual(
    [
      'conntrack -L -p udp -d fd00:10:96::a',
      'conntrack -L -p tcp --orig-dst ::ffff:10.0.0.1 --orig-port-dst 65535',
      'iptables --modprobe=/bin/false -w 5 -t nat -v -S KUBE-SEP-ABCDEFGHIJKLMNOP',
      'ip6tables --modprobe=/bin/false -w 5 -t filter -v -S KUBE-PROXY-FIREWALL',
    ].filter((c) => !specs.some((s) => sudoAllows(s, c))),
    [],
    'a form the doctor runs refused',
  )
})

test(
  'visudo accepts the sudoers snippet',
  {skip: !process.env.CI && spawnSync('visudo', ['--version']).error ? 'visudo is not installed' : false},
  () => {
    const r = spawnSync('visudo', ['-c', '-f', SUDOERS], {encoding: 'utf8'})
    assert.equal(r.status, 0, r.stdout + r.stderr)
  },
)

/** KPD_KERNEL_TRACE's specs: [program, args] where args is a regular expression (^…$, sudoers' \, a comma) or exact. */
function kernelTraceSpecs(text: string): Array<{program: string; args: RegExp}> {
  const joined = text.replace(/\\\n/g, ' ')
  const alias = /^Cmnd_Alias\s+KPD_KERNEL_TRACE\s*=\s*(.+)$/m.exec(joined)
  assert.ok(alias, 'the snippet defines Cmnd_Alias KPD_KERNEL_TRACE')
  return alias[1].split(/(?<!\\),/).map((spec) => {
    const [program, ...rest] = spec.trim().split(/\s+/)
    const args = rest.join(' ').replace(/\\,/g, ',')
    return {
      program: basename(program),
      args: args.startsWith('^') ? new RegExp(args) : new RegExp(`^${args.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`),
    }
  })
}

test("the sudoers snippet allows exactly the kernel trace's commands, as regular expressions no appended command passes", () => {
  const specs = kernelTraceSpecs(readFileSync(SUDOERS, 'utf8'))
  const table = traceTableName('a1b2c3', 1795000000)
  const commands = [
    KERNEL_TRACE_COMMANDS.listTables(),
    ...KERNEL_TRACE_COMMANDS.setup(table, [
      {address: '10.96.10.10', port: 80, connections: 8},
      {address: '10.200.0.11', port: 30080, connections: 8},
      {address: 'fd00:10:96::a', port: 443, connections: 8},
    ]),
    ...KERNEL_TRACE_COMMANDS.setup(table, [{address: '10.96.10.10', port: 80, connections: 8}]),
    ...KERNEL_TRACE_COMMANDS.setup(table, [{address: 'fd00:10:96::a', port: 443, connections: 8}]),
    // The largest burst (999), and the smallest (one connection: 2).
    ...KERNEL_TRACE_COMMANDS.setup(
      table,
      Array.from({length: 70}, (_, i) => ({address: '10.96.10.10', port: 1000 + i, connections: 8})),
    ),
    ...KERNEL_TRACE_COMMANDS.setup(table, [{address: '10.96.10.10', port: 80, connections: 1}]),
    KERNEL_TRACE_COMMANDS.monitor(5),
    KERNEL_TRACE_COMMANDS.deleteTable(table),
  ].map((c) => {
    const line = kernelTraceLine(c, false)
    // What sudo is asked to run: the words after `sudo -n`, shell quotes removed.
    return line.slice(line.indexOf('sudo -n ') + 'sudo -n '.length).replace(/'/g, '')
  })
  const allows = (c: string) =>
    specs.some((s) => {
      const [program, ...args] = c.split(' ')
      return s.program === program && s.args.test(args.join(' '))
    })
  assert.deepEqual(
    commands.filter((c) => !allows(c)),
    [],
    'run with sudo but not allowed',
  )
  assert.deepEqual(
    specs.filter((s) => !commands.some((c) => s.args.test(c.split(' ').slice(1).join(' ')))).map((s) => s.args.source),
    [],
    'allowed but never run',
  )
  // The one-tuple setup as sudo sees it, widened: a four-digit burst, or every packet of the tuple marked.
  const oneTuple = commands.find((c) => c.includes('burst 16 packets') && !c.includes('probes6'))!
  for (const widened of [
    oneTuple.replace('burst 16 packets', 'burst 1000 packets'),
    oneTuple.replace('burst 16 packets', 'burst 0 packets'),
    oneTuple.replace('tcp flags syn ', ''),
  ])
    assert.equal(allows(widened), false, widened)
  for (const appended of [
    `nft add table inet ${table} ; flush ruleset`,
    `nft delete table ip kube-proxy`,
    `nft add table inet ${table}x`,
    `nft add element inet ${table} probes4 { 10.96.10.10 . tcp . 80 } ; flush ruleset`,
    'nft monitor trace ; flush ruleset',
    // The one-nft setup: nothing after its last statement, nothing between them but its own.
    `nft -- add table inet ${table} ; flush ruleset`,
    `nft -- add table inet ${table} ; add chain inet ${table} prerouting { type filter hook prerouting priority -500 ; policy accept ; } ; add chain inet ${table} output { type filter hook output priority -500 ; policy accept ; } ; flush ruleset`,
    `nft -- add table inet ${table} ; add chain inet ${table} prerouting { type filter hook prerouting priority -500 ; policy accept ; } ; add chain inet ${table} output { type filter hook output priority -500 ; policy accept ; } ; delete table ip kube-proxy`,
    `nft -- add table inet ${table} ; add chain inet ${table} prerouting { type filter hook prerouting priority -500 ; policy accept ; } ; add chain inet ${table} output { type nat hook output priority -500 ; policy drop ; }`,
  ])
    assert.equal(allows(appended), false, appended)
})

test('every regular expression in the sudoers snippet is at most 1,024 characters: sudo never matches a longer one', () => {
  // sudo's regex compile (lib/util/regex.c) refuses a pattern past 1,024 characters ("regular expression too large"),
  // and the rule then matches no command; `visudo -c` still says "parsed OK". Measured with sudo 1.9.13p3: 1,024
  // allowed, 1,025 refused.
  const joined = readFileSync(SUDOERS, 'utf8').replace(/\\\n/g, ' ')
  const patterns = [...joined.matchAll(/ (\^.*?\$)(?=,|\s*$)/gm)].map((m) => m[1].replace(/\\([,:=\\ ])/g, '$1'))
  assert.ok(patterns.length >= 6, `${patterns.length} regular expressions found`)
  assert.deepEqual(
    patterns.filter((p) => p.length > 1024).map((p) => `${p.length} characters: ${p.slice(0, 60)}…`),
    [],
  )
})
