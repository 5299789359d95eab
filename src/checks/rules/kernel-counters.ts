import type {PathResult} from '../../model/paths.js'
import {counterEvidence, type ChainCounters, type MovedRule} from '../../node/probe/counter-evidence.js'
import type {ReadChainCounters, RuleCountersRun} from '../../node/probe/rule-counters-read.js'

/** What the rule counters of one probed Service address's walked chains say (JSON `kernelTrace[].counters`). */
export interface TargetCounters {
  /**
   * The rules the walk takes whose counters moved while the probes ran, in the order read, each with how many of the
   * node's probe connections the walks take through it (a chain shared by the ClusterIP and the NodePort counts both).
   */
  moved: Array<MovedRule & {probes: number}>
  /** Other traffic moved the counters too: a rule moved more than the probes through it, or one the walk does not take. */
  busy: boolean
  /** The sentence the report gives. */
  note: string
}

const BUSY = 'evidence, not proof: other traffic moves counters too'

/**
 * kube-proxy's dispatch chains, shared by every Service: their other Services' rules move with those Services' traffic,
 * which says nothing of this one's.
 */
const SHARED_CHAINS: ReadonlySet<string> = new Set(['KUBE-SERVICES', 'KUBE-NODEPORTS'])

const ruleKey = (table: string, chain: string, rule: string) => `${table}/${chain}\u0000${rule}`

/** The rules of the walk's ways (every endpoint it may choose), by table, chain and text. */
function walkedRules(path: PathResult): Set<string> {
  return new Set(path.trace.outcomes.flatMap((o) => o.steps.map((s) => ruleKey(s.table, s.chain, s.rule))))
}

function counted(chains: ReadChainCounters[], family: 4 | 6, walkedChains: Set<string>): ChainCounters[] {
  return chains
    .filter((c) => c.family === family && walkedChains.has(`${c.table}/${c.chain}`))
    .map((c) => ({
      table: c.table,
      chain: c.chain,
      rules: c.rules.map((r) => ({rule: r.rule, packets: BigInt(r.packets), bytes: BigInt(r.bytes)})),
    }))
}

/**
 * The counters of the chains one probed address's walk enters, before and after the node's probes: the rules of the
 * walk they moved. `probesThrough(rule)` is how many of the node's probe connections the walks take through a rule
 * (the nat table sees a connection's first packet only: one each); a rule that moved more, or a rule of the Service's
 * own chains the walk does not take, saw other traffic, and the whole is then evidence, not proof.
 */
export function targetCounters(
  run: RuleCountersRun | undefined,
  path: PathResult | undefined,
  family: 4 | 6,
  probesThrough: (table: string, chain: string, rule: string) => number,
): TargetCounters | undefined {
  if (!run?.read || !path) return undefined
  const walked = walkedRules(path)
  const walkedChains = new Set(path.trace.outcomes.flatMap((o) => o.steps.map((s) => `${s.table}/${s.chain}`)))
  const ev = counterEvidence(
    counted(run.before, family, walkedChains),
    counted(run.after, family, walkedChains),
    Number.POSITIVE_INFINITY,
  )
  const moved = ev.moved
    .filter((m) => walked.has(ruleKey(m.table, m.chain, m.rule)))
    .map((m) => ({...m, probes: probesThrough(m.table, m.chain, m.rule)}))
  const strays = ev.moved.filter((m) => !walked.has(ruleKey(m.table, m.chain, m.rule)) && !SHARED_CHAINS.has(m.chain))
  const busy = strays.length > 0 || moved.some((m) => m.packets > m.probes)
  const parts = [
    moved.length === 0
      ? 'no rule of the walk moved'
      : `${moved.length} rule${moved.length > 1 ? 's' : ''} of the walk moved`,
    ...(busy ? [BUSY] : []),
    ...(ev.rewritten.length > 0 ? [`not compared (rewritten between the reads): ${ev.rewritten.join(', ')}`] : []),
  ]
  return {moved, busy, note: parts.join('; ')}
}

/**
 * How many of a node's probe connections to the Service's addresses the walks take through each rule: a probed
 * address's attempts for every rule of its path.
 */
export function probesThroughRules(
  probed: Array<{attempts: number; path: PathResult | undefined}>,
): (table: string, chain: string, rule: string) => number {
  const through = new Map<string, number>()
  for (const {attempts, path} of probed)
    if (path) for (const key of walkedRules(path)) through.set(key, (through.get(key) ?? 0) + attempts)
  return (table, chain, rule) => through.get(ruleKey(table, chain, rule)) ?? 0
}
