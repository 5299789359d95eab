import assert from 'node:assert/strict'
import {test} from 'node:test'
import {BufferSource} from '../../src/parse/dump-source.js'
import {IptablesSave} from '../../src/parse/iptables-save.js'
import {IptablesTracer} from '../../src/trace/iptables-tracer.js'
import type {Packet} from '../../src/trace/types.js'
import {runCli} from '../helpers/run-cli.js'

const NODE = '192.168.1.10'
const pkt = (over: Partial<Packet> = {}): Packet => ({
  src: '10.244.1.5',
  dst: '10.96.10.10',
  proto: 'tcp',
  dport: 80,
  sport: 40000,
  inIface: 'cni0',
  outIface: 'eth0',
  ...over,
})
const parse = (text: string) => IptablesSave.parse(new BufferSource(Buffer.from(text)), {requireTables: true})
const nat = (...rules: string[]) =>
  [
    '*nat',
    ':PREROUTING ACCEPT [0:0]',
    ':INPUT ACCEPT [0:0]',
    ':OUTPUT ACCEPT [0:0]',
    ':POSTROUTING ACCEPT [0:0]',
    ':KUBE-SERVICES - [0:0]',
    '-A PREROUTING -j KUBE-SERVICES',
    ...rules,
    'COMMIT',
    '',
  ].join('\n')
const trace = (text: string, p: Partial<Packet> = {}) =>
  new IptablesTracer(parse(text), {localAddresses: [NODE]}).trace(pkt(p))

test('iptables-save: empty input, a table without COMMIT, and run-together rules are refused naming the line', () => {
  assert.throws(() => parse(''), /the input is empty/)
  assert.throws(
    () => parse('*nat\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -j ACCEPT\n'),
    /line 3: table nat \(line 1\) never ends with COMMIT: the dump is cut off/,
  )
  assert.throws(
    () => parse('*nat\n:PREROUTING ACCEPT [0:0]\n*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n'),
    /line 3: table nat \(line 1\) has no COMMIT/,
  )
  assert.throws(
    () => parse(nat('-A KUBE-SERVICES -d 10.96.10.10/32 -j ACCEPT -A KUBE-SERVICES -j DROP')),
    /line 8: two rules run together on one line/,
  )
  assert.doesNotThrow(
    () => parse(nat('-A KUBE-SERVICES -m comment --comment "a -A b" -j ACCEPT')),
    'an -A inside a quoted comment is not a second rule',
  )
})

test('iptables tracer: unparsable values make that branch UNKNOWN, never a silent zero or a silent miss', () => {
  const cases: Array<[string, RegExp]> = [
    ['-A KUBE-SERVICES -m mark --mark 0xZZ -j DROP', /mark 0xZZ is not VALUE\[\/MASK\]/],
    ['-A KUBE-SERVICES -d 10.96.10.300/32 -j DROP', /-d 10\.96\.10\.300\/32 is not an address or CIDR/],
    ['-A KUBE-SERVICES -p tcp -m tcp --dport 8o -j DROP', /port 8o is not a port/],
    ['-A KUBE-SERVICES -p tcp -m tcp --dport 99999 -j DROP', /port 99999 is not a port/],
    ['-A KUBE-SERVICES -p tcp -m tcp --dport 80 81 -j DROP', /--dport needs exactly one value/],
    ['-A KUBE-SERVICES -m statistic --mode random --probability -j DROP', /probability/],
    ['-A KUBE-SERVICES -j MARK --or-mark 0x4000zz', /MARK options not understood/],
    [
      '-A KUBE-SERVICES -m comment --comment "kube" -m foo [unsupported revision] -j DROP',
      /rule not understood \(iptables-nft printed it as \[unsupported revision\]\)/,
    ],
  ]
  for (const [rule, reason] of cases) {
    const r = trace(nat(rule))
    assert.equal(r.verdict, 'UNKNOWN', rule)
    assert.match(r.outcomes[0].reason ?? '', reason, rule)
    assert.equal(r.outcomes[0].steps.at(-1)?.line, 8, `${rule}: the step names the rule's line`)
  }
})

test('iptables tracer: an [unsupported revision] rule on one branch leaves the other branches traced', () => {
  const r = trace(
    nat(
      '-A KUBE-SERVICES -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-A',
      '-A KUBE-SERVICES -j DNAT --to-destination 10.244.2.2:8080',
      '-A KUBE-SEP-A -m foo [unsupported revision] -j DNAT --to-destination 10.244.1.1:8080',
    ).replace(':KUBE-SERVICES - [0:0]', ':KUBE-SERVICES - [0:0]\n:KUBE-SEP-A - [0:0]'),
  )
  assert.equal(r.verdict, 'MIXED')
  assert.deepEqual(
    r.outcomes.map((o) => [o.verdict, o.destination, o.probability]),
    [
      ['UNKNOWN', null, 0.5],
      ['DNAT', '10.244.2.2:8080', 0.5],
    ],
  )
})

test('iptables tracer: an IPv6 packet against an IPv4 dump is UNKNOWN with the reason, not ACCEPT', () => {
  const r = trace(nat('-A KUBE-SERVICES -d 10.96.10.10/32 -j DNAT --to-destination 10.244.1.1:8080'), {
    src: 'fd00::5',
    dst: 'fd00:96::10',
  })
  assert.equal(r.verdict, 'UNKNOWN')
  assert.match(
    r.outcomes[0].reason ?? '',
    /the packet is IPv6 but the dump's rules are IPv4: give the ip6tables-save output/,
  )
})

test('trace CLI: empty stdin is exit 2; --ipvsadm traces an IPVS node to its real servers', async () => {
  const empty = await runCli(
    ['trace', '--iptables-save', '-', '--src', '10.244.1.5', '--dst', '10.96.10.10', '--dport', '80'],
    {},
    60_000,
    '',
  )
  assert.equal(empty.code, 2)
  assert.match(empty.stderr, /stdin: the input is empty: no iptables-save output was read/)
  const node = 'examples/ipvs-cluster/nodes/node-a'
  const args = [
    'trace',
    '--iptables-save',
    `${node}/iptables-save.txt`,
    '--ipset-save',
    `${node}/ipset.txt`,
    '--src',
    '10.244.1.5',
    '--dst',
    '10.96.10.10',
    '--dport',
    '80',
    '--in-iface',
    'cni0',
    '--out-iface',
    'eth0',
    '-o',
    'json',
  ]
  const ipvs = await runCli([...args, '--ipvsadm', `${node}/ipvsadm.txt`])
  assert.equal(ipvs.code, 0, ipvs.stderr)
  assert.equal(ipvs.json.verdict, 'DNAT')
  assert.deepEqual(ipvs.json.destinations, ['10.244.1.10:8080', '10.244.2.10:8080', '10.244.2.11:8080'])
  const mixed = await runCli([
    'trace',
    '--iptables-save',
    `${node}/iptables-save.txt`,
    '--src',
    'fd00::1',
    '--dst',
    '10.96.10.10',
    '--dport',
    '80',
  ])
  assert.equal(mixed.code, 2)
  assert.match(mixed.stderr, /different address families/)
})
