import assert from 'node:assert/strict'
import {test} from 'node:test'
import {Chalk} from 'chalk'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {PROBES_OFF} from '../../src/diagnosis/probe-stage.js'
import {NftRuleset} from '../../src/parse/nft-ruleset.js'
import {renderHuman} from '../../src/report/human.js'
import {buildReport, exitCode} from '../../src/report/report.js'
import {renderWalk} from '../../src/report/trace-walk.js'
import {IptablesTracer} from '../../src/trace/iptables-tracer.js'
import {NftTracer} from '../../src/trace/nft-tracer.js'
import {runBounded} from '../helpers/bounded-run.js'
import type {JumpLoopTrace} from '../helpers/jump-loop-trace.js'
import {offlineCluster} from '../helpers/offline-cluster.js'
import {NAT_NODE, natDump, POD_TO_CLUSTER_IP} from '../helpers/nat-dump.js'

const NODE = NAT_NODE
const pkt = POD_TO_CLUSTER_IP
const traceNat = (chains: string[], rules: string[]) =>
  new IptablesTracer(natDump(chains, rules), {localAddresses: [NODE]}).trace(pkt)

const JUMP_LOOP_TRACE = new URL('../helpers/jump-loop-trace.js', import.meta.url).href

/**
 * Generated 6 KB dumps of jump loops behind random branches (issue #32: 21-42 s, 2-4 GB and 65,536 outcomes per
 * trace). Each trace runs in a child whose heap is 192 MB (before: out of memory at 6 GB for the goto shapes), and
 * must keep few outcomes and steps, a JSON of well under a megabyte, little heap, and name the loops.
 */
for (const nft of [false, true])
  for (const gotos of [false, true])
    for (const seed of [1, 2, 3])
      test(`walk bounds: a ${nft ? 'nft' : 'iptables'} dump of jump${gotos ? ' and goto' : ''} loops behind random branches (seed ${seed}) keeps little and names the loops`, async () => {
        const r = await runBounded<JumpLoopTrace>(
          JUMP_LOOP_TRACE,
          'traceJumpLoop',
          [seed, nft, {chains: 12, rulesPerChain: 4, gotos}],
          {heapMb: 192, timeoutMs: 120_000, nodeArgs: ['--expose-gc']},
        )
        assert.ok(r.ok, JSON.stringify(r))
        const t = r.value
        assert.ok(t.bytes < 8_000, `a dump of ${t.bytes} bytes`)
        assert.ok(t.outcomes <= 200, `${t.outcomes} outcomes kept`)
        assert.ok(t.steps <= 5_000, `${t.steps} steps kept`)
        assert.ok(t.jsonBytes < 1_000_000, `${t.jsonBytes} bytes of JSON`)
        assert.ok(t.retainedMb < 16, `the trace holds ${t.retainedMb.toFixed(1)} MB`)
        assert.ok(t.loops > 0, 'the loops are reported as loops')
        assert.ok(Math.abs(t.probability - 1) < 1e-6, `shares sum to ${t.probability}`)
      })

test('walk bounds: a jump back into a chain with the same packet is a loop; with a changed packet it is not, until it repeats', () => {
  const r = traceNat(
    ['KUBE-A', 'KUBE-B'],
    [
      '-A PREROUTING -j KUBE-A',
      '-A KUBE-A -m mark ! --mark 0x1/0x1 -j MARK --set-xmark 0x1/0x1',
      '-A KUBE-A -j KUBE-B',
      '-A KUBE-B -j KUBE-A',
    ],
  )
  assert.equal(r.verdict, 'UNKNOWN')
  assert.equal(r.outcomes.length, 1)
  // KUBE-A entered with mark 0, then with mark 1 (not a loop yet), then KUBE-B again with mark 1: a loop.
  assert.match(
    r.outcomes[0].reason!,
    /^a loop: nat\/KUBE-A line 10 jumps to nat\/KUBE-B again with the same packet, which would run the same rules without end/,
  )
  assert.deepEqual(
    r.outcomes[0].steps.map((s) => `${s.chain}:${s.line}`),
    ['PREROUTING:8', 'KUBE-A:9', 'KUBE-A:10', 'KUBE-B:11', 'KUBE-A:10'],
  )
})

test('walk bounds: a goto loop is a loop (it used to run to the 2,000,000-evaluation budget)', () => {
  const r = traceNat(['KUBE-A', 'KUBE-B'], ['-A PREROUTING -j KUBE-A', '-A KUBE-A -g KUBE-B', '-A KUBE-B -g KUBE-A'])
  assert.equal(r.verdict, 'UNKNOWN')
  assert.match(r.outcomes[0].reason!, /^a loop: nat\/KUBE-B line 10 goes to nat\/KUBE-A again with the same packet/)
  assert.equal(r.outcomes[0].steps.length, 3)
})

test('walk bounds: two ways to the same end with the same packet are one outcome, their shares summed', () => {
  // Both halves of the random split reach the DNAT rule with the same packet: one outcome of share 1.
  const r = traceNat(
    ['KUBE-SVC-X', 'KUBE-NOTE'],
    [
      '-A PREROUTING -j KUBE-SVC-X',
      '-A KUBE-SVC-X -m statistic --mode random --probability 0.25000000000 -j KUBE-NOTE',
      '-A KUBE-SVC-X -j DNAT --to-destination 10.244.1.1:8080',
      '-A KUBE-NOTE -m comment --comment "does nothing"',
    ],
  )
  assert.equal(r.verdict, 'DNAT')
  assert.equal(r.outcomes.length, 1)
  assert.equal(r.outcomes[0].probability, 1)
  // The first way walked is the one kept: through KUBE-NOTE.
  assert.deepEqual(
    r.outcomes[0].steps.map((s) => `${s.chain}:${s.line}`),
    ['PREROUTING:8', 'KUBE-SVC-X:9', 'KUBE-NOTE:11', 'KUBE-SVC-X:10'],
  )
})

test('walk bounds: a walk that would keep more than 2,000,000 steps stops at the budget, one outcome for every branch left', () => {
  // 20,000 counters before a 1,000-way numgen: 1,000 outcomes of 10,001 kept steps each would be 10 million.
  const lines = ['table ip t {', '\tchain pre {', '\t\ttype nat hook prerouting priority dstnat; policy accept;']
  for (let i = 0; i < 20_000; i++) lines.push('\t\tcounter packets 0 bytes 0')
  lines.push('\t\tgoto svc', '\t}', '\tchain svc {')
  const n = 1_000
  lines.push(
    `\t\tnumgen random mod ${n} vmap { ${Array.from({length: n}, (_, i) => `${i} : goto ep${i}`).join(', ')} }`,
  )
  lines.push('\t}')
  for (let i = 0; i < n; i++) lines.push(`\tchain ep${i} {`, `\t\tdnat to 10.244.${i >> 8}.${i & 255}:8080`, '\t}')
  lines.push('}')
  const r = new NftTracer(NftRuleset.parse(lines.join('\n')), {localAddresses: [NODE]}).trace(pkt)
  const steps = r.outcomes.reduce((a, o) => a + o.steps.length, 0)
  assert.ok(steps <= 2_000_000 + 2 * 10_001, `${steps} steps kept`)
  const stopped = r.outcomes.filter((o) => o.verdict === 'UNKNOWN')
  assert.equal(stopped.length, 1)
  assert.match(
    stopped[0].reason!,
    /^stopped at ip t\/ep\d+ rule 1 \(line \d+\): more than 2000000 steps kept \(the walk's budget\); this branch was not followed further \(nor were the \d+ other branches still to walk: their shares are in this one's\)$/,
  )
  assert.equal(r.outcomes.length, 1 + r.destinations.length)
  const total = r.outcomes.reduce((a, o) => a + o.probability, 0)
  assert.ok(Math.abs(total - 1) < 1e-9, `shares sum to ${total}`)
})

/** The web Service's nat KUBE-SERVICES, on one node, first sends half the packets into a chain that jumps back to itself. */
const loopOnNodeA = offlineCluster({
  editDump: {
    'node-a': (text) => {
      const at = text.indexOf('*nat')
      const nat = text
        .slice(at)
        .replace('*nat\n', '*nat\n:KUBE-LOOP - [0:0]\n')
        .replace(
          /^-A KUBE-SERVICES /m,
          '-A KUBE-LOOP -m statistic --mode random --probability 0.50000000000 -j KUBE-LOOP\n-A KUBE-SERVICES -j KUBE-LOOP\n$&',
        )
      return text.slice(0, at) + nat
    },
  },
})

test('walk bounds: a path not walked to its end is ?, and the headline does not say every path works', () => {
  const d = diagnose(loopOnNodeA.cluster, loopOnNodeA.observations, {probes: PROBES_OFF})
  const r = buildReport(d)
  const onA = r.paths.filter((p) => p.node === 'node-a')
  assert.ok(onA.length > 0 && onA.every((p) => p.ok === null && p.breaksAt === 'unknown'), JSON.stringify(onA))
  assert.ok(onA.every((p) => /a loop: nat\/KUBE-LOOP line \d+ jumps to nat\/KUBE-LOOP again/.test(p.detail)))
  // node-b's own rules are sound: its paths work, or are undecided where their second half arrives on node-a.
  assert.ok(
    r.paths.filter((p) => p.node === 'node-b').every((p) => p.ok === true || p.breaksOn === 'node-a'),
    JSON.stringify(r.paths.filter((p) => p.node === 'node-b')),
  )
  assert.match(r.summary, /^\? shop\/web: /)
  assert.doesNotMatch(r.summary, /every traced path works/)
  assert.deepEqual(
    r.notChecked.filter((n) => n.check === 'proxy-rules').map((n) => [n.node, n.required]),
    [['node-a', true]],
  )
  assert.match(r.notChecked.find((n) => n.check === 'proxy-rules')!.reason, /not walked to its end: a loop: /)
  // The exit code follows --fail-on as for any check that could not run: 3 (incomplete) by default.
  assert.equal(exitCode(r), 3)
  assert.equal(exitCode(r, {severity: 'error', incomplete: false}), 0)
  const human = renderHuman(r, new Chalk({level: 0}))
  assert.match(human.split('\n')[0], /^\? /)
  assert.doesNotMatch(human, /✓ shop\/web/)
})

test('walk bounds: a walk of 100 outcomes shows 64, the breaking one among them, and says how many more and their share', () => {
  const step = (chain: string, line: number, rule: string) => ({table: 'nat', chain, line, rule})
  const outcomes = Array.from({length: 100}, (_, i) => ({
    verdict: i === 90 ? ('DROP' as const) : ('DNAT' as const),
    destination: i === 90 ? null : `10.244.0.${i}:8080`,
    masquerade: false,
    probability: 0.01,
    steps: [
      step('PREROUTING', 1, '-A PREROUTING -j KUBE-SVC-X'),
      step('KUBE-SVC-X', 2 + i, `-A KUBE-SVC-X -j KUBE-SEP-${i}`),
      // A long rule (a hostile paste): its line is cut, colours closed before the cut.
      step(`KUBE-SEP-${i}`, 200 + i, `-A KUBE-SEP-${i} ${'! -s 10.0.0.1/32 '.repeat(i === 3 ? 200 : 1)}-j DROP`),
    ],
  }))
  const walk = renderWalk(
    {verdict: 'MIXED', destinations: [], masquerade: false, outcomes},
    new Chalk({level: 1}),
    120,
    {
      bad: (o) => o.verdict === 'DROP',
      why: 'dropped',
    },
  ).join('\n')
  const plain = walk.replace(/\x1b\[[0-9;]*m/g, '') // eslint-disable-line no-control-regex
  assert.equal(plain.match(/^[ ✗] 2[a-z]\d* /gm)?.length, 64, plain)
  assert.match(plain, /^✗ 2/m, 'the breaking outcome is shown')
  assert.match(plain, /… \(\d+ more characters in -o json\)/, 'the long line is cut')
  assert.match(plain, /… and 36 more outcomes \(36% of new connections\): -o json lists every one/)
  assert.doesNotMatch(walk.replace(/\x1b\[[0-9;]*m/g, ''), /\x1b/, 'no colour code is cut in two') // eslint-disable-line no-control-regex
})
