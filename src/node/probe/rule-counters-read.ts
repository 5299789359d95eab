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
 * Every chain's `iptables -v -S CHAIN` at once (one read each: the SSH transport runs the reads asked together as one
 * exec). A chain that is not on the node is left out; none at all: nothing to count here (in nftables mode kube-proxy's
 * rules keep no counters).
 */
async function readRuleCounters(access: NodeAccess, chains: readonly CounterChain[]): Promise<OneRead> {
  if (chains.length === 0) return {read: false, reason: 'rule counters not read: no iptables chain on the path'}
  const results = await Promise.all(chains.map((c) => access.run('ruleCounters', c)))
  const out: ReadChainCounters[] = []
  for (const [i, r] of results.entries()) {
    const c = chains[i]
    if (r.kind === 'not-recorded') return {read: false, reason: `rule counters not read: ${r.what}`}
    if (toolMissing(r))
      return {read: false, reason: `rule counters not read: no iptables on the node (${firstLine(r.stderr)})`}
    if (r.code !== 0) {
      if (ABSENT.test(r.stderr)) continue
      return {
        read: false,
        reason: `rule counters not read: iptables -t ${c.table} -v -S ${c.chain} failed: ${firstLine(r.stderr)}`,
      }
    }
    try {
      const rules = NODE_READS.ruleCounters.parse(r.stdout.toString('utf8'))
      out.push({
        ...c,
        rules: rules.map((x) => ({rule: x.rule, packets: String(x.packets), bytes: String(x.bytes)})),
      })
    } catch (e) {
      return {read: false, reason: `rule counters not read: ${c.chain}: ${(e as Error).message}`}
    }
  }
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
  const before = await readRuleCounters(access, chains).catch((e: Error): OneRead => ({
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
  ).catch((e: Error): OneRead => ({read: false, reason: `rule counters not read: ${e.message}`}))
  if (!after.read) return withBeside({result, counters: after})
  return withBeside({result, counters: {read: true, before: before.chains, after: after.chains} as RuleCountersRun})
}
