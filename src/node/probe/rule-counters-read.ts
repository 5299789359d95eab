import {toolMissing} from '../node-commands.js'
import type {IptablesTable} from '../read/command-arguments.js'
import {NODE_READS} from '../read/node-reads.js'
import type {NodeAccess} from '../transport/node-access.js'

/** One iptables chain whose counters are read: its family's tool (iptables, ip6tables), table and name. */
export interface CounterChain {
  family: 4 | 6
  table: IptablesTable
  chain: string
}

/** One chain's rules with their counters as read (decimal strings: the kernel's 64-bit counters, kept exact in JSON). */
export interface ReadChainCounters extends CounterChain {
  rules: Array<{rule: string; packets: string; bytes: string}>
}

/** The counters of the chains on the Service's path, read right before and right after a node's probes, or why not. */
export type RuleCountersRun =
  {read: true; before: ReadChainCounters[]; after: ReadChainCounters[]} | {read: false; reason: string}

type OneRead = {read: true; chains: ReadChainCounters[]} | {read: false; reason: string}

/** iptables' answers for a chain that is not there: legacy's, and iptables-nft's (1.8.x) own wording. */
const ABSENT = /No chain\/target\/match by that name|does not exist|is incompatible, use 'nft' tool/i

const firstLine = (text: string) => text.trim().split('\n')[0] || 'no message'

/**
 * How a family's counters are read. Chain by chain (`iptables -v -S CHAIN`, one read each) where `iptables` is
 * iptables-nft: it fetches only the chain. Else (iptables-legacy, whose `-S` copies the whole table out of the kernel
 * and parses all of it for each chain: 1.3 s a chain at 10,000 Services) one `iptables-save -c -t TABLE` for each
 * table. Chain by chain too where `iptables -V` does not answer: the read as it was before the backend was asked.
 */
type CountersForm = 'chains' | 'tables'

async function countersForm(access: NodeAccess, family: 4 | 6): Promise<CountersForm> {
  const versionRead = family === 6 ? 'ip6tablesVersion' : 'iptablesVersion'
  const r = await access.run(versionRead)
  if (r.kind !== 'ran' || r.code !== 0) return 'chains'
  const {nfTables, release} = NODE_READS[versionRead].parse(r.stdout.toString('utf8'))
  return nfTables || release === undefined ? 'chains' : 'tables'
}

type Answer = {chains: ReadChainCounters[]} | {read: false; reason: string}

/** One chain's `iptables -v -S CHAIN`: its counted rules, nothing where it is not on the node, or why not read. */
async function readChain(access: NodeAccess, c: CounterChain): Promise<Answer> {
  const r = await access.run('ruleCounters', c)
  if (r.kind === 'not-recorded') return {read: false, reason: `rule counters not read: ${r.what}`}
  if (toolMissing(r))
    return {read: false, reason: `rule counters not read: no iptables on the node (${firstLine(r.stderr)})`}
  if (r.code !== 0) {
    if (ABSENT.test(r.stderr)) return {chains: []}
    return {
      read: false,
      reason: `rule counters not read: iptables -t ${c.table} -v -S ${c.chain} failed: ${firstLine(r.stderr)}`,
    }
  }
  try {
    const rules = NODE_READS.ruleCounters.parse(r.stdout.toString('utf8'))
    return {chains: [{...c, rules: rules.map(asRead)}]}
  } catch (e) {
    return {read: false, reason: `rule counters not read: ${c.chain}: ${(e as Error).message}`}
  }
}

/** One table's `iptables-save -c -t TABLE`: the counted rules of its chains asked for that are on the node. */
async function readTable(access: NodeAccess, chains: readonly CounterChain[]): Promise<Answer> {
  const {family, table} = chains[0]
  const r = await access.run('tableCounters', {family, table})
  const command = `${family === 6 ? 'ip6tables-save' : 'iptables-save'} -c -t ${table}`
  if (r.kind === 'not-recorded') return {read: false, reason: `rule counters not read: ${r.what}`}
  if (toolMissing(r))
    return {read: false, reason: `rule counters not read: no iptables on the node (${firstLine(r.stderr)})`}
  if (r.code !== 0) return {read: false, reason: `rule counters not read: ${command} failed: ${firstLine(r.stderr)}`}
  try {
    const counted = NODE_READS.tableCounters.parse(r.stdout.toString('utf8'), new Set(chains.map((c) => c.chain)))
    return {
      chains: chains.flatMap((c) => {
        const rules = counted.get(c.chain)
        return rules ? [{...c, rules: rules.map(asRead)}] : []
      }),
    }
  } catch (e) {
    return {read: false, reason: `rule counters not read: ${command}: ${(e as Error).message}`}
  }
}

const asRead = (x: {rule: string; packets: bigint; bytes: bigint}) => ({
  rule: x.rule,
  packets: String(x.packets),
  bytes: String(x.bytes),
})

/**
 * Every chain's counters at once, in the form its family's backend reads fastest (the SSH transport runs the reads
 * asked together as one exec). A chain that is not on the node is left out; none at all: nothing to count here (in
 * nftables mode kube-proxy's rules keep no counters).
 */
async function readRuleCounters(
  access: NodeAccess,
  chains: readonly CounterChain[],
  forms: ReadonlyMap<4 | 6, CountersForm>,
): Promise<OneRead> {
  if (chains.length === 0) return {read: false, reason: 'rule counters not read: no iptables chain on the path'}
  // One read per chain, or per family and table: each keeps the chains' order (the families' and tables' as first met).
  const groups = new Map<string, CounterChain[]>()
  for (const c of chains) {
    const key = forms.get(c.family) === 'tables' ? `${c.family} ${c.table}` : `${c.family} ${c.table} ${c.chain}`
    groups.set(key, [...(groups.get(key) ?? []), c])
  }
  const answers = await Promise.all(
    [...groups.values()].map((g) =>
      forms.get(g[0].family) === 'tables' ? readTable(access, g) : readChain(access, g[0]),
    ),
  )
  const read = answers.flatMap((a) => ('chains' in a ? a.chains : []))
  const failed = answers.find((a): a is {read: false; reason: string} => !('chains' in a))
  if (failed) return failed
  const out = chains.flatMap((c) =>
    read.filter((r) => r.family === c.family && r.table === c.table && r.chain === c.chain),
  )
  if (out.length === 0)
    return {
      read: false,
      reason:
        "rule counters not available: none of the Service's iptables chains is on the node (in nftables mode kube-proxy's rules keep no counters)",
    }
  return {read: true, chains: out}
}

/**
 * Runs `probes` between two reads of the chains' counters. Nothing here fails the probes: what could not be read is
 * the result's reason. `beside`: other reads of what the probes left, asked for at the same moment as the second read
 * (one round of reads: one command over SSH).
 */
export async function withRuleCounters<T, U = undefined>(
  access: NodeAccess,
  chains: readonly CounterChain[],
  probes: () => Promise<T>,
  beside?: (result: T) => Promise<U>,
): Promise<{result: T; counters: RuleCountersRun; beside?: U}> {
  const families = [...new Set(chains.map((c) => c.family))]
  const forms = new Map(
    await Promise.all(
      families.map(async (f) => [f, await countersForm(access, f).catch(() => 'chains' as const)] as const),
    ),
  )
  // One turn later: the SSH transport sends the reads asked in one turn as one exec, settled when all of them end, and
  // the node read's next round (the whole dump, the chains) is asked in the turn `iptables -V` answers. Asked with it,
  // the probes would wait for all of that round; asked after it, the counters go as their own exec.
  await new Promise((resolve) => setImmediate(resolve))
  const before = await readRuleCounters(access, chains, forms).catch((e: Error): OneRead => ({
    read: false,
    reason: `rule counters not read: ${e.message}`,
  }))
  const result = await probes()
  const besideRead = beside?.(result)
  besideRead?.catch(() => undefined)
  const withBeside = async <V extends object>(v: V) => (besideRead ? {...v, beside: await besideRead} : v)
  if (!before.read) return withBeside({result, counters: before})
  // Only the chains there before: a chain made during the probes has nothing to compare with.
  const after = await readRuleCounters(
    access,
    chains.filter((c) =>
      before.chains.some((b) => b.family === c.family && b.table === c.table && b.chain === c.chain),
    ),
    forms,
  ).catch((e: Error): OneRead => ({read: false, reason: `rule counters not read: ${e.message}`}))
  if (!after.read) return withBeside({result, counters: after})
  return withBeside({result, counters: {read: true, before: before.chains, after: after.chains} as RuleCountersRun})
}
