import assert from 'node:assert/strict'
import {test} from 'node:test'
import type {IptablesSave} from '../../src/parse/iptables-save.js'
import {NftRuleset} from '../../src/parse/nft-ruleset.js'
import {IptablesTracer} from '../../src/trace/iptables-tracer.js'
import {NftTracer} from '../../src/trace/nft-tracer.js'
import {cpuTimed} from '../helpers/cpu-time.js'
import {NAT_NODE, natDump, POD_TO_CLUSTER_IP} from '../helpers/nat-dump.js'

const NODE = NAT_NODE
const pkt = POD_TO_CLUSTER_IP

/** A Service chain as kube-proxy writes it: n-1 statistic rules with probability 1/(n-i), then the last endpoint. */
function serviceWithEndpoints(n: number): IptablesSave {
  const rules = [
    '-A PREROUTING -j KUBE-SERVICES',
    '-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-BIG',
  ]
  const chains = ['KUBE-SERVICES', 'KUBE-SVC-BIG']
  const sep = (i: number) => `KUBE-SEP-E${i}`
  for (let i = 0; i < n; i++) {
    const ip = `10.${244 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`
    const prob = i === n - 1 ? '' : ` -m statistic --mode random --probability ${(1 / (n - i)).toFixed(11)}`
    rules.push(`-A KUBE-SVC-BIG${prob} -j ${sep(i)}`)
    rules.push(
      `-A ${sep(i)} -s ${ip}/32 -j KUBE-MARK-MASQ`,
      `-A ${sep(i)} -p tcp -m tcp -j DNAT --to-destination ${ip}:8080`,
    )
    chains.push(sep(i))
  }
  chains.push('KUBE-MARK-MASQ')
  rules.push('-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000')
  return natDump(chains, rules)
}

for (const n of [3_500, 10_000]) {
  test(`iptables tracer: a Service with ${n} endpoints is traced to every endpoint without recursion`, () => {
    const {value: r, ms} = cpuTimed(() =>
      new IptablesTracer(serviceWithEndpoints(n), {localAddresses: [NODE]}).trace(pkt),
    )
    assert.equal(r.verdict, 'DNAT')
    assert.equal(r.destinations.length, n)
    const total = r.outcomes.reduce((a, o) => a + o.probability, 0)
    assert.ok(Math.abs(total - 1) < 1e-6, `probabilities sum to ${total}`)
    assert.ok(ms < 20_000, `took ${ms} ms of CPU`)
  })
}

test('iptables tracer: 20,000 non-terminal rules in one chain are walked in a loop, not a recursion', () => {
  const rules = ['-A PREROUTING -j KUBE-SERVICES']
  for (let i = 0; i < 20_000; i++) rules.push(`-A KUBE-SERVICES -m comment --comment "note ${i}"`)
  rules.push('-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j DNAT --to-destination 10.244.2.2:8080')
  const r = new IptablesTracer(natDump(['KUBE-SERVICES'], rules), {localAddresses: [NODE]}).trace(pkt)
  assert.equal(r.verdict, 'DNAT')
  assert.deepEqual(r.destinations, ['10.244.2.2:8080'])
  assert.equal(r.outcomes[0].steps.length, 10_001)
  assert.equal(r.outcomes[0].steps[0].rule, '10002 earlier steps not shown')
})

test('iptables tracer: 40 chains that each jump twice to the next end in UNKNOWN naming where the budget ran out', () => {
  const rules = ['-A PREROUTING -j KUBE-D0']
  const chains: string[] = []
  for (let i = 0; i < 40; i++) {
    chains.push(`KUBE-D${i}`)
    rules.push(`-A KUBE-D${i} -j KUBE-D${i + 1}`, `-A KUBE-D${i} -j KUBE-D${i + 1}`)
  }
  chains.push('KUBE-D40')
  rules.push('-A KUBE-D40 -d 10.96.0.99/32 -j DROP')
  const {value: r, ms} = cpuTimed(() => new IptablesTracer(natDump(chains, rules), {localAddresses: [NODE]}).trace(pkt))
  assert.equal(r.verdict, 'UNKNOWN')
  assert.match(
    r.outcomes[0].reason ?? '',
    /^stopped at nat\/KUBE-D\d+ line \d+: 2000000 rule evaluations \(the walk's budget\) used up/,
  )
  assert.ok(ms < 30_000, `took ${ms} ms of CPU`)
})

test('iptables tracer: a jump loop ends in UNKNOWN naming the chain', () => {
  const r = new IptablesTracer(
    natDump(['KUBE-A', 'KUBE-B'], ['-A PREROUTING -j KUBE-A', '-A KUBE-A -j KUBE-B', '-A KUBE-B -j KUBE-A']),
    {localAddresses: [NODE]},
  ).trace(pkt)
  assert.equal(r.verdict, 'UNKNOWN')
  assert.match(
    r.outcomes[0].reason ?? '',
    /^a loop: nat\/KUBE-B line \d+ jumps to nat\/KUBE-A again with the same packet/,
  )
})

// 10,000 outcomes of 20,000 steps each would keep 100 million steps (the walk's budget keeps 2 million): the long
// chain and the wide numgen are walked apart.
for (const [counters, n] of [
  [20_000, 100],
  [10, 10_000],
])
  test(`nft tracer: ${counters} counter rules and a ${n}-way numgen are walked without recursion`, () => {
    // Not kube-proxy's table: this walk is about size, and kube-proxy's table would need all its base chains.
    const lines = [
      'table ip t {',
      '\tchain nat-prerouting {',
      '\t\ttype nat hook prerouting priority dstnat; policy accept;',
    ]
    for (let i = 0; i < counters; i++) lines.push('\t\tcounter packets 0 bytes 0')
    lines.push('\t\tip daddr 10.96.0.10 tcp dport 80 goto svc', '\t}', '\tchain svc {')
    lines.push(
      `\t\tnumgen random mod ${n} vmap { ${Array.from({length: n}, (_, i) => `${i} : goto ep${i}`).join(', ')} }`,
      '\t}',
    )
    for (let i = 0; i < n; i++)
      lines.push(
        `\tchain ep${i} {`,
        `\t\tmeta l4proto tcp dnat to 10.${244 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}:8080`,
        '\t}',
      )
    lines.push('}')
    const {value: r, ms} = cpuTimed(() =>
      new NftTracer(NftRuleset.parse(lines.join('\n')), {localAddresses: [NODE]}).trace(pkt),
    )
    assert.equal(r.verdict, 'DNAT')
    assert.equal(r.destinations.length, n)
    assert.ok(ms < 20_000, `took ${ms} ms of CPU`)
  })

test('nft tracer: 40 chains that each jump twice to the next end in UNKNOWN naming the stop', () => {
  const lines = [
    'table ip t {',
    '\tchain pre {',
    '\t\ttype filter hook prerouting priority 0; policy accept;',
    '\t\tjump d0',
    '\t}',
  ]
  for (let i = 0; i < 40; i++) lines.push(`\tchain d${i} {`, `\t\tjump d${i + 1}`, `\t\tjump d${i + 1}`, '\t}')
  lines.push('\tchain d40 {', '\t\tip daddr 10.96.0.99 drop', '\t}', '}')
  const {value: r, ms} = cpuTimed(() =>
    new NftTracer(NftRuleset.parse(lines.join('\n')), {localAddresses: [NODE]}).trace(pkt),
  )
  assert.equal(r.verdict, 'UNKNOWN')
  assert.match(r.outcomes[0].reason ?? '', /^stopped at ip t\/d\d+ rule \d \(line \d+\): 2000000 rule evaluations/)
  assert.ok(ms < 30_000, `took ${ms} ms of CPU`)
})
