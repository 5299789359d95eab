import assert from 'node:assert/strict'
import {test} from 'node:test'
import {probesThroughRules, targetCounters} from '../../src/checks/rules/kernel-counters.js'
import type {PathResult} from '../../src/model/paths.js'
import {withRuleCounters, type CounterChain} from '../../src/node/probe/rule-counters-read.js'
import type {NodeAccess, RunResult} from '../../src/node/transport/node-access.js'

const SVC = '-A KUBE-SERVICES -d 10.96.10.10/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-X'
const OTHER = '-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m tcp --dport 443 -j KUBE-SVC-K'
const TO_A = '-A KUBE-SVC-X -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-A'
const TO_B = '-A KUBE-SVC-X -j KUBE-SEP-B'
const MASQ_A = '-A KUBE-SEP-A -s 10.244.1.10/32 -j KUBE-MARK-MASQ'
const DNAT_A = '-A KUBE-SEP-A -p tcp -m tcp -j DNAT --to-destination 10.244.1.10:8080'
const DNAT_B = '-A KUBE-SEP-B -p tcp -m tcp -j DNAT --to-destination 10.244.2.10:8080'

/** `iptables -v -S CHAIN`'s answer: the rule with its counters between the matches and the target, as iptables prints. */
function listing(chain: string, rules: Array<[string, number]>): string {
  const counted = rules.map(([r, p]) => r.replace(/ -j /, ` -c ${p} ${p * 60} -j `))
  return [`-N ${chain}`, ...counted, ''].join('\n')
}

const ran = (stdout: string, code = 0, stderr = ''): RunResult => ({
  kind: 'ran',
  code,
  stdout: Buffer.from(stdout),
  stderr,
})

const NFT_VERSION = 'iptables v1.8.9 (nf_tables)\n'
const LEGACY_VERSION = 'iptables v1.8.9 (legacy)\n'

/**
 * A node answering `iptables -V` with `version` and each chain's read from the current counters; `asked` keeps every
 * read asked, in order.
 */
function fakeNode(answer: (c: CounterChain) => RunResult, version: RunResult = ran(NFT_VERSION)) {
  const asked: Array<{key: string; args: unknown}> = []
  const access = {
    run: (key: string, args: CounterChain) => {
      asked.push({key, args})
      return Promise.resolve(key === 'iptablesVersion' ? version : answer(args))
    },
  } as unknown as NodeAccess
  return {access, asked}
}

const CHAINS: CounterChain[] = [
  {family: 4, table: 'nat', chain: 'KUBE-SERVICES'},
  {family: 4, table: 'nat', chain: 'KUBE-NODEPORTS'},
  {family: 4, table: 'nat', chain: 'KUBE-SVC-X'},
  {family: 4, table: 'nat', chain: 'KUBE-SEP-A'},
]
const NFT_ABSENT =
  "iptables v1.8.9 (nf_tables): chain `KUBE-NODEPORTS' in table `nat' is incompatible, use 'nft' tool.\n"

test('the counters of the Service’s chains are read right before and right after the probes; a chain not on the node is left out', async () => {
  let probed = false
  const {access, asked} = fakeNode((c) => {
    const n = probed ? 3 : 0
    if (c.chain === 'KUBE-NODEPORTS') return ran('', 1, NFT_ABSENT)
    if (c.chain === 'KUBE-SERVICES')
      return ran(
        listing(c.chain, [
          [OTHER, 100 + 2 * n],
          [SVC, 7 + n],
        ]),
      )
    if (c.chain === 'KUBE-SVC-X')
      return ran(
        listing(c.chain, [
          [TO_A, 4 + n],
          [TO_B, 3],
        ]),
      )
    return ran(
      listing(c.chain, [
        [MASQ_A, 0],
        [DNAT_A, 4 + n],
      ]),
    )
  })
  const {result, counters} = await withRuleCounters(access, CHAINS, () => {
    probed = true
    return Promise.resolve('tallies')
  })
  assert.equal(result, 'tallies')
  // Before: every chain; after: the three that were there.
  assert.deepEqual(
    asked.map((a) => [a.key, (a.args as CounterChain | undefined)?.chain]),
    [
      ['iptablesVersion', undefined],
      ...CHAINS.map((c) => ['ruleCounters', c.chain]),
      ...CHAINS.filter((c) => c.chain !== 'KUBE-NODEPORTS').map((c) => ['ruleCounters', c.chain]),
    ],
  )
  assert.ok(counters.read)
  assert.deepEqual(
    counters.after.find((c) => c.chain === 'KUBE-SVC-X'),
    {
      family: 4,
      table: 'nat',
      chain: 'KUBE-SVC-X',
      rules: [
        {rule: TO_A, packets: '7', bytes: '420'},
        {rule: TO_B, packets: '3', bytes: '180'},
      ],
    },
  )

  // The ClusterIP's walk: KUBE-SERVICES → KUBE-SVC-X → KUBE-SEP-A or KUBE-SEP-B.
  const path = {
    trace: {
      outcomes: [
        {steps: [step('KUBE-SERVICES', SVC), step('KUBE-SVC-X', TO_A), step('KUBE-SEP-A', DNAT_A)]},
        {steps: [step('KUBE-SERVICES', SVC), step('KUBE-SVC-X', TO_B), step('KUBE-SEP-B', DNAT_B)]},
      ],
    },
  } as unknown as PathResult
  const quiet = targetCounters(counters, path, 4, probesThroughRules([{attempts: 8, path}]))
  assert.deepEqual(quiet, {
    moved: [
      {table: 'nat', chain: 'KUBE-SERVICES', rule: SVC, packets: 3, bytes: 180, probes: 8},
      {table: 'nat', chain: 'KUBE-SVC-X', rule: TO_A, packets: 3, bytes: 180, probes: 8},
      {table: 'nat', chain: 'KUBE-SEP-A', rule: DNAT_A, packets: 3, bytes: 180, probes: 8},
    ],
    busy: false,
    note: '3 rules of the walk moved',
  })
  // Fewer probes than the rules moved: other traffic too.
  assert.equal(
    targetCounters(counters, path, 4, probesThroughRules([{attempts: 2, path}]))?.note,
    '3 rules of the walk moved; evidence, not proof: other traffic moves counters too',
  )
  // The IPv6 address of the Service: no IPv6 chain read, nothing moved.
  assert.equal(targetCounters(counters, path, 6, () => 8)?.note, 'no rule of the walk moved')
  assert.equal(
    targetCounters(counters, undefined, 4, () => 8),
    undefined,
  )
})

test('a rule of the Service’s own chains the walk does not take moved: other traffic (a Pod reaching itself), evidence only', async () => {
  let probed = false
  const {access} = fakeNode((c) => {
    const n = probed ? 1 : 0
    if (c.chain === 'KUBE-SEP-A')
      return ran(
        listing(c.chain, [
          [MASQ_A, n],
          [DNAT_A, 5 + n],
        ]),
      )
    return ran(listing(c.chain, [[c.chain === 'KUBE-SERVICES' ? SVC : TO_A, n]]))
  })
  const {counters} = await withRuleCounters(access, CHAINS.slice(2), () => {
    probed = true
    return Promise.resolve()
  })
  const path = {
    trace: {outcomes: [{steps: [step('KUBE-SVC-X', TO_A), step('KUBE-SEP-A', DNAT_A)]}]},
  } as unknown as PathResult
  const v = targetCounters(counters, path, 4, () => 8)
  assert.deepEqual(
    v?.moved.map((m) => m.rule),
    [TO_A, DNAT_A],
  )
  assert.equal(v?.busy, true)
})

test('counters not read: no chain of the Service on the node (nftables mode), sudo refusing, no iptables; the probes run all the same', async () => {
  const cases: Array<[RunResult, string]> = [
    [
      ran('', 1, 'iptables: No chain/target/match by that name.\n'),
      "rule counters not available: none of the Service's iptables chains is on the node (in nftables mode kube-proxy's rules keep no counters)",
    ],
    [
      ran('', 1, 'sudo: a password is required\n'),
      'rule counters not read: iptables -t nat -v -S KUBE-SERVICES failed: sudo: a password is required',
    ],
    [
      ran('', 127, 'sh: 1: iptables: not found\n'),
      'rule counters not read: no iptables on the node (sh: 1: iptables: not found)',
    ],
    [{kind: 'not-recorded', what: 'a snapshot makes no probes'}, 'rule counters not read: a snapshot makes no probes'],
  ]
  for (const [answer, reason] of cases) {
    const {access, asked} = fakeNode(() => answer)
    let probes = 0
    const {counters} = await withRuleCounters(access, CHAINS, () => Promise.resolve(probes++))
    assert.equal(probes, 1)
    assert.deepEqual(counters, {read: false, reason})
    // Nothing read after the probes when nothing could be read before.
    assert.equal(asked.length, 1 + CHAINS.length)
  }
})

/** `iptables-save -c -t nat`'s answer: every chain `listing` would answer for (the others not there), and another Service's. */
function saved(chains: string[], answer: (c: CounterChain) => RunResult): RunResult {
  const there = chains.flatMap((chain) => {
    const r = answer({family: 4, table: 'nat', chain})
    return r.kind === 'ran' && r.code === 0 ? [{chain, lines: r.stdout.toString().split('\n').slice(1, -1)}] : []
  })
  const toSave = (line: string) => {
    const m = / -c (\d+) (\d+)/.exec(line)!
    return `[${m[1]}:${m[2]}] ${line.replace(m[0], '')}`
  }
  return ran(
    [
      '# Generated by iptables-save v1.8.9 on Fri Nov 27 18:25:14 2026',
      '*nat',
      ':PREROUTING ACCEPT [0:0]',
      ...there.map((c) => `:${c.chain} - [0:0]`),
      ':KUBE-SVC-K - [0:0]',
      '[0:0] -A PREROUTING -j KUBE-SERVICES',
      ...there.flatMap((c) => c.lines.map(toSave)),
      '[9:540] -A KUBE-SVC-K -j KUBE-SEP-K',
      'COMMIT',
      '# Completed on Fri Nov 27 18:25:14 2026',
      '',
    ].join('\n'),
  )
}

test('where iptables is iptables-legacy the counters are one iptables-save -c of the table before and after: the same counters', async () => {
  const node = (version: string) => {
    let probed = false
    const chainAnswer = (c: CounterChain): RunResult => {
      const n = probed ? 3 : 0
      if (c.chain === 'KUBE-NODEPORTS') return ran('', 1, 'iptables: No chain/target/match by that name.\n')
      if (c.chain === 'KUBE-SERVICES')
        return ran(
          listing(c.chain, [
            [OTHER, 100 + 2 * n],
            [SVC, 7 + n],
          ]),
        )
      if (c.chain === 'KUBE-SVC-X') return ran(listing(c.chain, [[TO_A, 4 + n]]))
      return ran(listing(c.chain, []))
    }
    const fake = fakeNode(
      (c) =>
        c.chain === undefined
          ? saved(
              CHAINS.map((x) => x.chain),
              chainAnswer,
            )
          : chainAnswer(c),
      ran(version),
    )
    return {
      ...fake,
      counters: withRuleCounters(fake.access, CHAINS, () => {
        probed = true
        return Promise.resolve()
      }).then((r) => r.counters),
    }
  }
  const legacy = node(LEGACY_VERSION)
  const nft = node(NFT_VERSION)
  const counters = await legacy.counters
  assert.deepEqual(counters, await nft.counters)
  assert.ok(counters.read)
  assert.deepEqual(
    counters.after.map((c) => [c.chain, c.rules.map((r) => r.packets)]),
    [
      ['KUBE-SERVICES', ['106', '10']],
      ['KUBE-SVC-X', ['7']],
      ['KUBE-SEP-A', []],
    ],
  )
  assert.deepEqual(
    legacy.asked.map((a) => [a.key, a.args]),
    [
      ['iptablesVersion', undefined],
      ['tableCounters', {family: 4, table: 'nat'}],
      ['tableCounters', {family: 4, table: 'nat'}],
    ],
  )
  assert.equal(nft.asked.filter((a) => a.key === 'ruleCounters').length, 2 * CHAINS.length - 1)

  // The table read failing: why, with the command, and nothing read after the probes.
  const refused = fakeNode(() => ran('', 1, 'sudo: a password is required\n'), ran(LEGACY_VERSION))
  assert.deepEqual((await withRuleCounters(refused.access, CHAINS, () => Promise.resolve())).counters, {
    read: false,
    reason: 'rule counters not read: iptables-save -c -t nat failed: sudo: a password is required',
  })
  assert.equal(refused.asked.length, 2)
  // iptables -V not answering: chain by chain, as before the backend was asked.
  const unknown = fakeNode(
    () => ran('', 1, 'iptables: No chain/target/match by that name.\n'),
    ran('', 127, 'not found'),
  )
  await withRuleCounters(unknown.access, CHAINS, () => Promise.resolve())
  assert.deepEqual(
    unknown.asked.map((a) => a.key),
    ['iptablesVersion', ...CHAINS.map(() => 'ruleCounters')],
  )
})

function step(chain: string, rule: string) {
  return {table: 'nat', chain, line: 1, rule}
}
