import type {CheckContext, NodeView} from '../check.js'
import {stepChainOwner, type ChainOwner} from '../../parse/chain-owner.js'
import type {TraceOutcome} from '../../trace/types.js'
import {policiesOnWalk} from './policy-chains.js'

/** Owners whose drops other codes judge: kube-proxy's own rules and kubelet's KUBE-FIREWALL. */
const KUBERNETES_OWNERS: ReadonlySet<ChainOwner> = new Set(['kube-proxy', 'kubelet'])
export const POLICY_ENGINES: ReadonlySet<ChainOwner> = new Set([
  'Calico',
  'kube-router',
  'Antrea',
  'Cilium',
  'Weave Net',
])

/** Where a walk was dropped or rejected: a rule of a chain, or a base chain's policy. */
export interface DropSite {
  table: string
  chain: string
  owner: ChainOwner
  verdict: 'DROP' | 'REJECT'
  /** The rule, when a rule (not the policy) dropped it. */
  rule?: {line: number; text: string}
}

export interface Dropped {
  /** dropKey of the node and site. */
  key: string
  node: NodeView
  site: DropSite
  entries: Set<string>
  destinations: Set<string>
  /** The walks' source addresses (a node's, an outside client's, or one the doctor made up for a Pod of the node). */
  sources: Set<string>
  /** The NetworkPolicies (namespace/name) a policy engine's rules on the walk name. */
  policies: Set<string>
}

export function dropSite(o: TraceOutcome): DropSite | undefined {
  if (o.verdict !== 'DROP' && o.verdict !== 'REJECT') return undefined
  if (o.policy)
    return {
      table: o.policy.table,
      chain: o.policy.chain,
      owner: stepChainOwner(o.policy.table, o.policy.chain),
      verdict: o.verdict,
    }
  const last = o.steps.at(-1)
  if (!last || last.table === 'ipvs' || last.line === 0) return undefined
  return {
    table: last.table,
    chain: last.chain,
    owner: stepChainOwner(last.table, last.chain),
    verdict: o.verdict,
    rule: {line: last.line, text: last.rule},
  }
}

/** One drop site on one node: its table, chain and rule (or the chain's policy). */
export const dropKey = (node: string, site: DropSite) =>
  `${node}\0${site.table}\0${site.chain}\0${site.rule?.line ?? 'policy'}`

/**
 * Every walk dropped or rejected outside kube-proxy's own chains, one per node and rule: on the node where the packet
 * enters and, for an endpoint on another read node, on that node as the packet arrives there.
 */
export function foreignDrops(ctx: CheckContext): Dropped[] {
  // Asked by several checks and for every broken path: collected once per diagnosis (its paths never change).
  const known = collected.get(ctx.paths)
  if (known) return known
  const dropped = new Map<string, Dropped>()
  const note = (nodeName: string, o: TraceOutcome, entry: string, destination: string, source: string) => {
    const node = ctx.nodes.find((n) => n.name === nodeName)
    const site = dropSite(o)
    if (!node || !site || KUBERNETES_OWNERS.has(site.owner)) return
    const key = dropKey(nodeName, site)
    const d = dropped.get(key) ?? {
      key,
      node,
      site,
      entries: new Set<string>(),
      destinations: new Set<string>(),
      sources: new Set<string>(),
      policies: new Set<string>(),
    }
    d.entries.add(entry)
    d.destinations.add(destination)
    d.sources.add(source)
    if (POLICY_ENGINES.has(site.owner))
      for (const name of policiesOnWalk(o.steps, ctx.service.namespace, (table, chain) => {
        const dump = node.obs.iptables
        const t = table.split(' ').pop()!
        return dump?.hasChain(t, chain) ? dump.rawRules(t, chain).map((r) => r.text) : []
      }))
        d.policies.add(name)
    dropped.set(key, d)
  }
  for (const p of ctx.paths.filter((x) => x.ok === false)) {
    for (const o of p.trace.outcomes)
      note(p.node, o, `${p.entry} (${p.port})`, o.destination ?? `${p.packet.dst}:${p.packet.dport}`, p.packet.src)
  }
  for (const half of ctx.halves) {
    for (const o of half.trace.outcomes)
      note(
        half.node,
        o,
        `${half.path.node}'s ${half.path.entry} (${half.path.port}), arriving DNATed`,
        half.endpoint.address,
        half.packet.src,
      )
  }
  const all = [...dropped.values()]
  collected.set(ctx.paths, all)
  return all
}

const collected = new WeakMap<CheckContext['paths'], Dropped[]>()

/** The rule (or policy) that dropped it, as evidence. */
export function dropEvidence(d: Dropped): string {
  return d.site.rule
    ? `${d.site.table} line ${d.site.rule.line}: ${d.site.rule.text}`
    : `${d.site.table}: :${d.site.chain} ${d.site.verdict} (the chain's policy)`
}
