import type {Check, CheckContext, FindingDraft, NodeView} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {stepChainOwner, tableChains, type ChainOwner} from '../../parse/chain-owner.js'
import type {Command} from '../../model/shell.js'
import {nodeCommand} from '../../model/reach.js'
import type {TraceOutcome} from '../../trace/types.js'

/** Owners whose drops other codes judge: kube-proxy's own rules and kubelet's KUBE-FIREWALL. */
const KUBERNETES_OWNERS: ReadonlySet<ChainOwner> = new Set(['kube-proxy', 'kubelet'])
const POLICY_ENGINES: ReadonlySet<ChainOwner> = new Set(['Calico', 'kube-router', 'Antrea', 'Cilium', 'Weave Net'])

/** Where a walk was dropped or rejected: a rule of a chain, or a base chain's policy. */
interface DropSite {
  table: string
  chain: string
  owner: ChainOwner
  verdict: 'DROP' | 'REJECT'
  /** The rule, when a rule (not the policy) dropped it. */
  rule?: {line: number; text: string}
}

interface Dropped {
  node: NodeView
  site: DropSite
  entries: Set<string>
  destinations: Set<string>
}

function dropSite(o: TraceOutcome): DropSite | undefined {
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

/** The command that shows the chain with its policy, counters and rule numbers. */
function showChain(ctx: CheckContext, node: NodeView, site: DropSite): Command | undefined {
  return nodeCommand(ctx.reach, node.name, node.dataplane.showChain(site.table, site.chain), [
    ...site.table.split(' '),
    site.chain,
  ])
}

function hasDockerChains(node: NodeView): boolean {
  return !!node.obs.iptables && tableChains(node.obs.iptables).some((c) => c.owner === 'Docker')
}

function where(site: DropSite): string {
  if (!site.rule)
    return `the ${site.verdict} policy of ${site.table} ${site.chain}: no rule accepts the traffic before it`
  const rule = `${site.table} ${site.chain} line ${site.rule.line}`
  if (site.owner === 'built-in') return `a rule added directly to the built-in chain (${rule})`
  if (site.owner === 'hand-written') return `${rule}, a chain no known project names (hand-written?)`
  return `${rule}, a ${site.owner} chain`
}

function nextStep(d: Dropped): string {
  if (!d.site.rule) {
    if (hasDockerChains(d.node))
      return 'Docker set this policy when it started: accept the pod traffic in DOCKER-USER (the chain Docker leaves to you) or run dockerd with --iptables=false on Kubernetes nodes.'
    return 'Accept the pod traffic before the policy (the CNI usually adds such rules) or set the policy back to ACCEPT.'
  }
  if (POLICY_ENGINES.has(d.site.owner))
    return `${d.site.owner} drops it, usually for a NetworkPolicy: look for one that selects the destination Pods (kubectl get networkpolicy -A, and ${d.site.owner}'s own policy objects).`
  return 'Find out who added the rule (Docker, a firewall script, configuration management) before removing it.'
}

/**
 * A path dropped or rejected outside kube-proxy's own chains: a rule of another owner, or a base chain's policy. On the
 * node where the packet enters and, for an endpoint on another read node, on that node as the packet arrives there.
 */
export const filterDrop: Check = {
  meta: codeEntry('KPD-FILTER-DROP'),
  run(ctx) {
    const dropped = new Map<string, Dropped>()
    const note = (nodeName: string, o: TraceOutcome, entry: string, destination: string) => {
      const node = ctx.nodes.find((n) => n.name === nodeName)
      const site = dropSite(o)
      if (!node || !site || KUBERNETES_OWNERS.has(site.owner)) return
      const key = `${nodeName}\0${site.table}\0${site.chain}\0${site.rule?.line ?? 'policy'}`
      const d = dropped.get(key) ?? {node, site, entries: new Set<string>(), destinations: new Set<string>()}
      d.entries.add(entry)
      d.destinations.add(destination)
      dropped.set(key, d)
    }
    for (const p of ctx.paths.filter((x) => x.ok === false)) {
      for (const o of p.trace.outcomes)
        note(p.node, o, `${p.entry} (${p.port})`, o.destination ?? `${p.packet.dst}:${p.packet.dport}`)
    }
    const endpoints = ctx.service.ports.flatMap((port) => port.allEndpoints)
    for (const half of ctx.halves) {
      for (const o of half.trace.outcomes)
        note(
          half.node,
          o,
          `${half.path.node}'s ${half.path.entry} (${half.path.port}), arriving DNATed`,
          half.endpoint.address,
        )
    }
    return [...dropped.values()].map((d): FindingDraft => {
      const podName = new Map(endpoints.map((e) => [e.address, e.podName]))
      const destinations = [...d.destinations].sort().map((a) => (podName.get(a) ? `${a} (${podName.get(a)})` : a))
      return {
        node: d.node.name,
        message: `${d.node.name}: new connections to ${destinations.join(', ')} are ${d.site.verdict === 'DROP' ? 'dropped' : 'rejected'} by ${where(d.site)}; entry points: ${[...d.entries].join('; ')}`,
        evidence: [
          d.site.rule
            ? `${d.site.table} line ${d.site.rule.line}: ${d.site.rule.text}`
            : `${d.site.table}: :${d.site.chain} ${d.site.verdict} (the chain's policy)`,
        ],
        check: showChain(ctx, d.node, d.site),
        text: nextStep(d),
      }
    })
  },
}
