import assert from 'node:assert/strict'
import {test} from 'node:test'
import {counterEvidence, type ChainCounters} from '../../src/node/probe/counter-evidence.js'
import {parseCountedChain, parseCountedRule} from '../../src/parse/rule-counters.js'

const SVC =
  '-A KUBE-SVC-ABCDEFGHIJKLMNOP -m comment --comment "shop/web:http" -m statistic --mode random --probability 0.5 -j KUBE-SEP-AAAAAAAAAAAAAAAA'

test('a counted rule in both forms iptables prints: iptables-save -c "[p:b]" and iptables -v -S "-c p b"', () => {
  assert.deepEqual(parseCountedRule(`[12:720] ${SVC}`), {rule: SVC, packets: 12n, bytes: 720n})
  assert.deepEqual(
    parseCountedRule(
      '-A KUBE-SVC-ABCDEFGHIJKLMNOP -m comment --comment "shop/web:http" -m statistic --mode random --probability 0.5 -c 12 720 -j KUBE-SEP-AAAAAAAAAAAAAAAA',
    ),
    {rule: SVC, packets: 12n, bytes: 720n},
  )
  // 64-bit counters past Number's exact range stay exact.
  assert.equal(
    parseCountedRule('-A KUBE-MARK-MASQ -c 18446744073709551615 1 -j MARK --set-xmark 0x4000/0x4000').packets,
    18446744073709551615n,
  )
  assert.throws(() => parseCountedRule(SVC, 3), /line 3: not a rule with counters/)
  assert.throws(() => parseCountedRule('[1:2] :KUBE-X - [0:0]'), /not a rule with counters/)
})

test("a chain's iptables -v -S answer: its -P/-N line skipped, each rule in order with its counters", () => {
  assert.deepEqual(
    parseCountedChain([
      '-P OUTPUT ACCEPT -c 40 2400',
      '-A OUTPUT -m comment --comment "kubernetes service portals" -c 9 540 -j KUBE-SERVICES',
      '-A OUTPUT -c 0 0 -j KPD-OTHER',
    ]),
    [
      {rule: '-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES', packets: 9n, bytes: 540n},
      {rule: '-A OUTPUT -j KPD-OTHER', packets: 0n, bytes: 0n},
    ],
  )
})

function chain(table: string, name: string, rules: Array<[string, number]>): ChainCounters {
  return {table, chain: name, rules: rules.map(([rule, p]) => ({rule, packets: BigInt(p), bytes: BigInt(p * 60)}))}
}

test('counters before and after the probes: the rules the probes moved, evidence not proof when more moved than sent', () => {
  const before = [
    chain('nat', 'KUBE-SERVICES', [
      ['-A KUBE-SERVICES -d 10.96.10.10/32 -j KUBE-SVC-X', 100],
      ['-A KUBE-SERVICES -j KUBE-NODEPORTS', 7],
    ]),
    chain('nat', 'KUBE-SVC-X', [
      ['-A KUBE-SVC-X -j KUBE-SEP-A', 50],
      ['-A KUBE-SVC-X -j KUBE-SEP-B', 50],
    ]),
  ]
  const quiet = counterEvidence(
    before,
    [
      chain('nat', 'KUBE-SERVICES', [
        ['-A KUBE-SERVICES -d 10.96.10.10/32 -j KUBE-SVC-X', 108],
        ['-A KUBE-SERVICES -j KUBE-NODEPORTS', 7],
      ]),
      chain('nat', 'KUBE-SVC-X', [
        ['-A KUBE-SVC-X -j KUBE-SEP-A', 53],
        ['-A KUBE-SVC-X -j KUBE-SEP-B', 55],
      ]),
    ],
    8,
  )
  assert.deepEqual(
    quiet.moved.map((m) => [m.chain, m.rule, m.packets, m.bytes]),
    [
      ['KUBE-SERVICES', '-A KUBE-SERVICES -d 10.96.10.10/32 -j KUBE-SVC-X', 8, 480],
      ['KUBE-SVC-X', '-A KUBE-SVC-X -j KUBE-SEP-A', 3, 180],
      ['KUBE-SVC-X', '-A KUBE-SVC-X -j KUBE-SEP-B', 5, 300],
    ],
  )
  assert.equal(quiet.busy, false)
  assert.equal(quiet.note, '3 rules on the walked chains moved')

  const busy = counterEvidence(
    before,
    [
      chain('nat', 'KUBE-SERVICES', [
        ['-A KUBE-SERVICES -d 10.96.10.10/32 -j KUBE-SVC-X', 130],
        ['-A KUBE-SERVICES -j KUBE-NODEPORTS', 7],
      ]),
      chain('nat', 'KUBE-SVC-X', [['-A KUBE-SVC-X -j KUBE-SEP-B', 60]]),
    ],
    8,
  )
  assert.equal(busy.busy, true)
  assert.deepEqual(busy.rewritten, ['nat/KUBE-SVC-X'])
  assert.equal(
    busy.note,
    '1 rule on the walked chains moved; evidence, not proof: other traffic moves counters too; not compared (rewritten between the reads): nat/KUBE-SVC-X',
  )
  assert.equal(counterEvidence(before, before, 8).note, 'no rule on the walked chains moved')
})
