import type {IptablesSave} from '../parse/iptables-save.js'
import {BUILT_IN_CHAINS} from '../parse/iptables-save.js'

/**
 * What a walk through part of a node's rules (a paste cut or grepped, see IptablesSave.isFragment) cannot know, said
 * where the walk meets it: it ends UNKNOWN naming what is missing, never with the verdict a whole dump would give.
 * Nothing here evaluates a rule; a whole dump gets undefined from every function.
 */

/** Tables whose absence from a cut input is a gap: the ones kube-proxy writes (raw and mangle are often not loaded). */
const KUBE_PROXY_TABLES = new Set(['nat', 'filter'])

/**
 * Why the walk cannot pass `table`'s base chain `chain` in this input (undefined: it can, or the table is not used).
 * nat's INPUT and POSTROUTING only translate the source: their absence leaves where the packet goes and whether it is
 * accepted as they are.
 */
export function missingBaseChain(dump: IptablesSave, table: string, chain: string): string | undefined {
  if (!dump.isFragment()) return undefined
  if (table === 'nat' && (chain === 'INPUT' || chain === 'POSTROUTING')) return undefined
  if (dump.hasTable(table)) {
    if (dump.hasChain(table, chain)) return undefined
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
