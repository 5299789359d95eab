import type {PathResult} from '../../model/paths.js'
import type {TracedPacket, TraceEvent} from '../../parse/nft-trace.js'
import type {TraceStep} from '../../trace/types.js'

/** One rule the kernel's trace says a probe's packet matched (JSON `kernelTrace[].rules`). */
export interface KernelRule {
  table: string
  chain: string
  rule: string
  verdict: string
}

/** netfilter's trace of a probed address set against the walk of the same path. */
export interface TraceComparison {
  rules: KernelRule[]
  /** null: nothing to compare (no packet traced). */
  agrees: boolean | null
  detail: string
}

/** A table's own name: the walk names nftables tables with their family ("ip kube-proxy"), the trace apart. */
const tableName = (table: string) => table.split(' ').pop() ?? table

/** kube-proxy's own chains: its nftables table, or its iptables chains (KUBE-…). Others' chains are not compared. */
const isKubeProxys = (table: string, chain: string) => tableName(table) === 'kube-proxy' || chain.startsWith('KUBE-')

const DNAT = /(^|\s)(dnat|-j DNAT)(\s|$)/

/**
 * The chains a packet's matched rules are in, in order, a run of rules in one chain once: "nat/KUBE-SERVICES". With
 * `dispatchOnly`, only up to the chain whose rule DNATs: the Service's own choice, the same whichever hook the packet
 * met it at.
 */
function chainsOf(steps: Array<{table: string; chain: string; rule: string}>, dispatchOnly = false): string[] {
  const out: string[] = []
  let dnatAt = -1
  for (const s of steps) {
    if (!isKubeProxys(s.table, s.chain)) continue
    const key = `${tableName(s.table)}/${s.chain}`
    if (out[out.length - 1] !== key) out.push(key)
    if (DNAT.test(s.rule)) dnatAt = out.length - 1
  }
  return dispatchOnly && dnatAt >= 0 ? out.slice(0, dnatAt + 1) : out
}

/** Each sequence without its leading chains the other never meets (the hook's own chains: output vs prerouting). */
function fromCommonStart(a: string[], b: string[]): [string[], string[]] {
  const start = (x: string[], y: string[]) =>
    Math.max(
      0,
      x.findIndex((c) => y.includes(c)),
    )
  return [a.slice(start(a, b)), b.slice(start(b, a))]
}

/** The packet whose way the walk models: the connection's first (SYN), the one NAT sees; else the first traced. */
function firstPacket(packets: TracedPacket[]): TracedPacket | undefined {
  return (
    packets.find((p) => p.events.some((e) => e.kind === 'packet' && /tcp flags == syn(\s|$)/.test(e.packet ?? ''))) ??
    packets[0]
  )
}

function commonPrefix(a: string[], b: string[]): number {
  let n = 0
  while (n < a.length && n < b.length && a[n] === b[n]) n++
  return n
}

function ruleOf(e: TraceEvent): KernelRule {
  return {table: `${e.family} ${e.table}`, chain: e.chain, rule: e.rule ?? '', verdict: e.verdict ?? ''}
}

/**
 * The kernel's rule-by-rule way of the probe's first packet (every table but the doctor's own, `ownTable`), and whether
 * kube-proxy's chains on it are, in order, those of one of the walk's ways (one per endpoint it may choose). Where none
 * is, the detail says where the kernel and the nearest way part.
 */
export function compareTrace(packets: TracedPacket[], ownTable: string, path: PathResult | undefined): TraceComparison {
  // The probes leave the node itself: where the walked path starts elsewhere (outside→NodePort), only the Service's
  // dispatch is the same packet's way; after the DNAT, the node's own packet is delivered, the outside one forwarded.
  const dispatchOnly = path !== undefined && !path.entry.startsWith('node→')
  const packet = firstPacket(packets)
  if (!packet) return {rules: [], agrees: null, detail: "netfilter's trace caught no packet of the probes"}
  const events = packet.events.filter((e) => e.kind === 'rule' && e.table !== ownTable)
  const rules = events.map(ruleOf)
  if (!path) return {rules, agrees: null, detail: "netfilter's trace: the path was not walked"}
  const traced = chainsOf(
    events.map((e) => ({table: e.table, chain: e.chain, rule: e.rule ?? ''})),
    dispatchOnly,
  )
  const pairs = path.trace.outcomes.map((o) =>
    dispatchOnly
      ? fromCommonStart(traced, chainsOf(o.steps as TraceStep[], true))
      : [traced, chainsOf(o.steps as TraceStep[])],
  )
  const same = pairs.find(([k, w]) => w.length === k.length && commonPrefix(w, k) === k.length)
  const scope = dispatchOnly
    ? ' (the Service’s dispatch: the probe leaves the node itself, the walked packet comes from outside)'
    : ''
  if (same)
    return {
      rules,
      agrees: true,
      detail: `netfilter's trace agrees: ${same[0].length} chains of kube-proxy's, as walked${scope} (${same[0].map((k) => k.split('/')[1]).join(' → ')})`,
    }
  const [kernel, nearest] = pairs.reduce(
    (best, p) => (commonPrefix(p[1], p[0]) > commonPrefix(best[1], best[0]) ? p : best),
    pairs[0] ?? [traced, []],
  )
  const at = commonPrefix(nearest, kernel)
  const after = at > 0 ? ` after ${nearest[at - 1]}` : ''
  const kernelSide = kernel[at] ? `the kernel went to ${kernel[at]}` : 'the kernel left kube-proxy’s chains'
  const walkSide = nearest[at] ? `the walk to ${nearest[at]}` : 'the walk left kube-proxy’s chains'
  return {
    rules,
    agrees: false,
    detail: `netfilter's trace parts from the walk${after}${scope}: ${kernelSide}, ${walkSide}`,
  }
}
