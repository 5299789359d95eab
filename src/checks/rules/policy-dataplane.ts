import type {Check, CheckContext, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {judgeIngress, policyName, type PolicyDestination} from '../../model/network-policy.js'
import {dropEvidence, foreignDrops, type Dropped} from './foreign-drops.js'
import {judgedSources, policyEndpoints} from './policy-sources.js'

/**
 * What the API's NetworkPolicies say of a policy engine's drop that names policies: `denied` (they deny a judged client
 * the dropped endpoints too: KPD-POLICY-DENIES reports it, with the drop as evidence), `allowed` (they allow every judged
 * client), `missing` (a named policy is not in the API), undefined (no policy named, policies unread, or the verdict
 * depends on what is not known of the client: KPD-FILTER-DROP reports the drop as it is).
 */
export function dataplaneVerdict(ctx: CheckContext, d: Dropped): 'denied' | 'allowed' | 'missing' | undefined {
  const policy = ctx.cluster.policy
  if (d.policies.size === 0 || !policy || policy.unread) return undefined
  const known = new Set(policy.policies.map(policyName))
  if ([...d.policies].some((n) => !known.has(n))) return 'missing'
  const world = {
    policies: policy.policies,
    ...(policy.namespaceLabels ? {namespaceLabels: policy.namespaceLabels} : {}),
  }
  const endpoints = droppedEndpoints(ctx, d)
  const verdicts = judgedSources(ctx.cluster, policy).flatMap((s) =>
    endpoints.map((e) => judgeIngress(world, s.source, e.destination, {port: e.port, protocol: e.protocol}).allowed),
  )
  if (verdicts.length === 0) return undefined
  if (verdicts.some((v) => v === false)) return 'denied'
  return verdicts.every((v) => v === true) ? 'allowed' : undefined
}

/** The Service's endpoints among a drop's destinations ("IP" or "IP:port"). */
function droppedEndpoints(ctx: CheckContext, d: Dropped) {
  const ips = new Set([...d.destinations].map((a) => a.replace(/:\d+$/, '')))
  return policyEndpoints(ctx.cluster, ctx.service).filter((e) => ips.has(e.destination.ip))
}

/** The drops on the walk to these endpoints that agree with the API's denial: their rules, as evidence. */
export function agreeingDrops(ctx: CheckContext, endpoints: PolicyDestination[]): string[] {
  const ips = new Set(endpoints.map((e) => e.ip))
  return foreignDrops(ctx)
    .filter((d) => dataplaneVerdict(ctx, d) === 'denied')
    .filter((d) => droppedEndpoints(ctx, d).some((e) => ips.has(e.destination.ip)))
    .map((d) => `${d.node.name} drops it too (${d.site.owner}, for ${[...d.policies].join(', ')}): ${dropEvidence(d)}`)
}

/** A policy engine's rules drop what the API's NetworkPolicies allow, or implement a policy the API does not have. */
export const policyDataplaneDisagrees: Check = {
  meta: codeEntry('KPD-POLICY-DATAPLANE-DISAGREES'),
  run(ctx) {
    const out: FindingDraft[] = []
    const known = new Set((ctx.cluster.policy?.policies ?? []).map(policyName))
    for (const d of foreignDrops(ctx)) {
      const verdict = dataplaneVerdict(ctx, d)
      if (verdict !== 'allowed' && verdict !== 'missing') continue
      const names = [...d.policies]
      const endpoints = droppedEndpoints(ctx, d)
        .map((e) => `${e.destination.name} (${e.destination.ip})`)
        .filter((x, i, all) => all.indexOf(x) === i)
      const dropped = `${d.node.name}: ${d.site.owner}'s rules ${d.site.verdict === 'DROP' ? 'drop' : 'reject'} new connections to ${endpoints.join(', ') || [...d.destinations].join(', ')} for NetworkPolicy ${names.join(', ')}`
      const why =
        verdict === 'missing'
          ? `but the API has no ${names.filter((n) => !known.has(n)).join(', ')}: ${d.site.owner} still enforces a deleted or renamed policy`
          : `but the API's NetworkPolicies allow ${judgedSources(ctx.cluster, ctx.cluster.policy!)
              .map((s) => s.label)
              .join(', ')} there: ${d.site.owner}'s rules are out of step with the policies`
      out.push({
        node: d.node.name,
        message: `${dropped}, ${why}; entry points: ${[...d.entries].join('; ')}`,
        evidence: [dropEvidence(d)],
        text: `Check ${d.site.owner}'s agent on ${d.node.name} (its logs, its sync with the API server): restarting it rebuilds its rules from the API's policies.`,
      })
    }
    return out
  },
}
