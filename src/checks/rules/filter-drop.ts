import type {Check, CheckContext, FindingDraft, NodeView} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {tableChains} from '../../parse/chain-owner.js'
import type {Command} from '../../model/shell.js'
import {nodeCommand} from '../../model/reach.js'
import {dropEvidence, foreignDrops, POLICY_ENGINES, type Dropped, type DropSite} from './foreign-drops.js'
import {dataplaneVerdict} from './policy-dataplane.js'

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
 * A path dropped or rejected outside kube-proxy's own chains: a rule of another owner, or a base chain's policy. A
 * policy engine's drop that names a NetworkPolicy, with the policies read from the API, is the policy checks' to
 * judge (network-policy.ts, policy-dataplane.ts): one fault, one finding.
 */
export const filterDrop: Check = {
  meta: codeEntry('KPD-FILTER-DROP'),
  run(ctx) {
    const endpoints = ctx.service.ports.flatMap((port) => port.allEndpoints)
    const podName = new Map(endpoints.map((e) => [e.address, e.podName]))
    return foreignDrops(ctx)
      .filter((d) => dataplaneVerdict(ctx, d) === undefined)
      .map((d): FindingDraft => {
        const destinations = [...d.destinations].sort().map((a) => (podName.get(a) ? `${a} (${podName.get(a)})` : a))
        const policies = d.policies.size > 0 ? ` (its rules name NetworkPolicy ${[...d.policies].join(', ')})` : ''
        return {
          node: d.node.name,
          message: `${d.node.name}: new connections to ${destinations.join(', ')} are ${d.site.verdict === 'DROP' ? 'dropped' : 'rejected'} by ${where(d.site)}${policies}; entry points: ${[...d.entries].join('; ')}`,
          evidence: [dropEvidence(d)],
          check: showChain(ctx, d.node, d.site),
          text: nextStep(d),
        }
      })
  },
}
