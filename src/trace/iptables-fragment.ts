import type {IptablesSave} from '../parse/iptables-save.js'
import {BUILT_IN_CHAINS} from '../parse/iptables-save.js'
import {summarize, type TraceResult} from './types.js'

/**
 * What a walk through part of a node's rules (a paste cut or grepped, see IptablesSave.isFragment) cannot know, said
 * where the walk meets it: it ends UNKNOWN naming what is missing, never with the verdict a whole dump would give.
 * Nothing here evaluates a rule; a whole dump gets undefined from every function.
 */

/** Tables whose absence from a cut input is a gap: the ones kube-proxy writes (raw and mangle are often not loaded). */
const KUBE_PROXY_TABLES = new Set(['nat', 'filter'])

/**
 * Why the walk cannot pass `table`'s base chain `chain` in this input (undefined: it can, or the table is not used).
 * The branch ends UNKNOWN there, keeping a destination already DNATed (nat's POSTROUTING missing leaves where the
 * packet goes known, not whether it is masqueraded).
 */
export function missingBaseChain(dump: IptablesSave, table: string, chain: string): string | undefined {
  if (!dump.isFragment()) return undefined
  if (dump.hasTable(table)) {
    if (dump.hasChain(table, chain)) return undefined
    if (table === 'nat' && (chain === 'INPUT' || chain === 'POSTROUTING'))
      return `table nat has no ${chain} chain in this input: whether the packet is masqueraded is not known; paste \`iptables-save -t nat\` whole`
    const into = entryChains(dump, table)
    return `${into.length > 0 ? `no hook into ${into.join(', ')}` : `no ${chain} chain of table ${table}`} in this input: table ${table} has no ${chain} chain (a cut or grepped table); paste \`iptables-save -t ${table}\` whole`
  }
  if (dump.cut && KUBE_PROXY_TABLES.has(table))
    return `table ${table} is not in this input, which is cut short in table ${dump.cut.table}: what its ${chain} chain does is not known; paste \`iptables-save\` whole`
  return undefined
}

/** Why a rule's target names nothing in this input: the chain was left out of a fragment, or the target is unknown. */
export function missingTarget(dump: IptablesSave, table: string, target: string): string {
  if (!dump.isFragment()) return `target ${target} is not a chain of table ${table} nor a target the tracer knows`
  return `chain ${target} is not in this input (a chain of table ${table} left out of it, or a target the tracer does not know); paste \`iptables-save -t ${table}\` whole`
}

/** The table's chains that no rule of it jumps or goes to, up to three named (what a hook would lead into). */
function entryChains(dump: IptablesSave, table: string): string[] {
  const builtIn = BUILT_IN_CHAINS[table] ?? []
  const chains = dump.chainNames(table).filter((c) => !builtIn.includes(c))
  const targets = new Set<string>()
  for (const c of chains)
    for (const r of dump.rawRules(table, c)) {
      const m = /\s-[jg]\s+(\S+)/.exec(r.text)
      if (m) targets.add(m[1])
    }
  const roots = chains.filter((c) => !targets.has(c))
  return roots.length > 3 ? [...roots.slice(0, 3), `${roots.length - 3} more`] : roots
}

/**
 * Why this dump's ACCEPT is not a packet's fate when no `ipvsadm` output comes with it (undefined: it is): the dump is
 * an IPVS-mode node's iptables glue (the KUBE-NODE-PORT chain, or a KUBE-CLUSTER-IP ipset match in KUBE-SERVICES), and
 * IPVS, after these rules, decides where a Service's packet goes.
 */
export function ipvsGlueWithoutIpvsadm(dump: IptablesSave): string | undefined {
  const glue =
    dump.hasChain('nat', 'KUBE-NODE-PORT') ||
    // The native search spares a big cluster's 50,000 KUBE-SERVICES rules a string and a regular expression each.
    (dump.chainHolds('nat', 'KUBE-SERVICES', '--match-set KUBE-') &&
      dump.rawRules('nat', 'KUBE-SERVICES').some((r) => /--match-set KUBE-(?:6-)?CLUSTER-IP\s/.test(r.text)))
  if (!glue) return undefined
  return "these are an IPVS-mode node's rules (KUBE-CLUSTER-IP ipset match, KUBE-NODE-PORT): IPVS, not these rules, decides where the packet goes after them; add --ipvsadm with the node's `ipvsadm -Sn` output"
}

/** The walk with every ACCEPT (the rules let the packet on, to what this input does not hold) made UNKNOWN, saying why. */
export function acceptsUnknown(result: TraceResult, reason: string): TraceResult {
  return summarize(result.outcomes.map((o) => (o.verdict === 'ACCEPT' ? {...o, verdict: 'UNKNOWN', reason} : o)))
}
