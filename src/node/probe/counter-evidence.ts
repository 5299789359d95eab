import type {CountedRule} from '../../parse/rule-counters.js'

/** One chain's rules with their counters, as read before or after the probes. */
export interface ChainCounters {
  table: string
  chain: string
  rules: CountedRule[]
}

/** A rule on the walked path whose counters the probes' time moved. */
export interface MovedRule {
  table: string
  chain: string
  rule: string
  packets: number
  bytes: number
}

/** What the counters of the walked chains say of the probes: the rules that moved, and how far to trust it. */
export interface CounterEvidence {
  moved: MovedRule[]
  /** Some rule moved more packets than the probes sent: other traffic moved it too (evidence, not proof). */
  busy: boolean
  /** Chains whose rules changed between the reads (kube-proxy rewrote them): not compared. */
  rewritten: string[]
  /** The sentence the report gives. */
  note: string
}

const BUSY = 'evidence, not proof: other traffic moves counters too'

const chainKey = (c: {table: string; chain: string}) => `${c.table}/${c.chain}`

/**
 * The rules of the walked chains the probes moved: each chain's counters after the probes less those before, rule by
 * rule (a chain is compared only where its rules are the same, in the same order, both times). `packetsSent` is the
 * most packets one rule can have seen from the probes (each connection's packets through the chains read); a rule
 * that moved more saw other traffic as well, and the whole is then evidence, not proof.
 */
export function counterEvidence(before: ChainCounters[], after: ChainCounters[], packetsSent: number): CounterEvidence {
  const earlier = new Map(before.map((c) => [chainKey(c), c]))
  const moved: MovedRule[] = []
  const rewritten: string[] = []
  for (const now of after) {
    const then = earlier.get(chainKey(now))
    if (!then) continue
    const same = then.rules.length === now.rules.length && then.rules.every((r, i) => r.rule === now.rules[i].rule)
    if (!same) {
      rewritten.push(chainKey(now))
      continue
    }
    now.rules.forEach((r, i) => {
      const packets = r.packets - then.rules[i].packets
      // A counter that went back was zeroed (iptables -Z) between the reads: nothing to say of it.
      if (packets <= 0n) return
      moved.push({
        table: now.table,
        chain: now.chain,
        rule: r.rule,
        packets: Number(packets),
        bytes: Number(r.bytes - then.rules[i].bytes),
      })
    })
  }
  const busy = moved.some((m) => m.packets > packetsSent)
  const parts = [
    moved.length === 0
      ? 'no rule on the walked chains moved'
      : `${moved.length} rule${moved.length > 1 ? 's' : ''} on the walked chains moved`,
    ...(busy ? [BUSY] : []),
    ...(rewritten.length > 0 ? [`not compared (rewritten between the reads): ${rewritten.join(', ')}`] : []),
  ]
  return {moved, busy, rewritten, note: parts.join('; ')}
}
