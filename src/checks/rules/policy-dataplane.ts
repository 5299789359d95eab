import type {Check, CheckContext, Finding, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {policyName, type PolicyDestination, type PolicySource} from '../../model/network-policy.js'
import {judgeWithPrecedence} from '../../model/policy-precedence.js'
import {precedenceWorld} from './policy-connections.js'
import type {TraceOutcome} from '../../trace/types.js'
import {dropEvidence, dropKey, dropSite, foreignDrops, type Dropped} from './foreign-drops.js'
import {judgedSources, policyEndpoints} from './policy-sources.js'

/**
 * What the API's NetworkPolicies say of a policy engine's drop that names policies: `denied` (they deny a judged client
 * the dropped endpoints too: KPD-POLICY-DENIES reports it, with the drop as evidence), `allowed` (they allow every judged
 * client, and the walks' own sources the engine dropped), `missing` (a named policy is not in the API), undefined (no policy named, policies unread, or the verdict
 * depends on what is not known of the client: KPD-FILTER-DROP reports the drop as it is).
 */
export function dataplaneVerdict(ctx: CheckContext, d: Dropped): Verdict {
  // One drop is judged by several checks and for every broken path through it; the policies never change meanwhile.
  if (!judged.has(d)) judged.set(d, judge(ctx, d))
  return judged.get(d)
}

type Verdict = 'denied' | 'allowed' | 'missing' | undefined
const judged = new WeakMap<Dropped, Verdict>()

function judge(ctx: CheckContext, d: Dropped): Verdict {
  const policy = ctx.cluster.policy
  if (d.policies.size === 0 || !policy || policy.unread) return undefined
  const known = new Set(policy.policies.map(policyName))
  if ([...d.policies].some((n) => !known.has(n))) return 'missing'
  const world = precedenceWorld(ctx)
  if (!world) return undefined
  const endpoints = droppedEndpoints(ctx, d)
  const verdicts = judgedSources(ctx.cluster, policy).flatMap((s) =>
    endpoints.map(
      (e) =>
        judgeWithPrecedence(world, 'ingress', s.source, e.destination, {port: e.port, protocol: e.protocol}).allowed,
    ),
  )
  if (verdicts.length === 0) return undefined
  if (verdicts.some((v) => v === false)) return 'denied'
  if (!verdicts.every((v) => v === true)) return undefined
  // The engine dropped the walks' own sources: a disagreement only where the API allows those very sources too.
  const walkVerdicts = [...d.sources].flatMap((ip) =>
    endpoints.map(
      (e) =>
        judgeWithPrecedence(world, 'ingress', walkSource(ctx, ip), e.destination, {port: e.port, protocol: e.protocol})
          .allowed,
    ),
  )
  return walkVerdicts.every((v) => v === true) ? 'allowed' : undefined
}

/**
 * A walk's source address as the API's policies see it: a Pod's (the --from Pod's, or one of the Service's namespace:
 * namespace and labels), a node's, or else an address
 * alone (an outside client, or the address the doctor makes up for "a Pod of this node", whose namespace and labels
 * are nobody's): matched by ipBlocks and rules without peers only, so it is allowed only where any Pod or client with
 * that address would be.
 */
function walkSource(ctx: CheckContext, ip: string): PolicySource {
  const client = ctx.cluster.policy?.clientPod
  const pods = client ? [client, ...ctx.cluster.pods] : ctx.cluster.pods
  const pod = pods.find((p) => !p.spec?.hostNetwork && p.status?.podIPs?.some((a) => a.ip === ip))
  if (pod)
    return {
      kind: 'pod',
      namespace: pod.metadata?.namespace ?? '',
      name: pod.metadata?.name ?? '',
      ip,
      labels: pod.metadata?.labels ?? {},
      hostNetwork: false,
    }
  const node = ctx.cluster.nodes.find((n) => n.status?.addresses?.some((a) => a.address === ip))
  return {kind: 'host', node: node?.metadata?.name ?? '', ip}
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

/**
 * Whether every walk of path `p` dropped on the node it breaks on was dropped by a policy engine's rule the API's
 * policies agree with: then the API's denial (KPD-POLICY-DENIES, KPD-POLICY-SERVICE-PORT, their catalogue rows' condition)
 * explains the break. Any other drop on the path (a firewall's, kubelet's, an engine's the API does not agree with)
 * leaves the break to the finding that names it.
 */
export function policyDropsAgree(ctx: CheckContext, node: string, outcomes: TraceOutcome[]): boolean {
  const drops = outcomes.filter((o) => o.verdict === 'DROP' || o.verdict === 'REJECT')
  if (drops.length === 0) return false
  const agreeing = new Set(
    foreignDrops(ctx)
      .filter((d) => dataplaneVerdict(ctx, d) === 'denied')
      .map((d) => d.key),
  )
  return drops.every((o) => {
    const site = dropSite(o)
    return !!site && agreeing.has(dropKey(node, site))
  })
}

/** The findings of the API's policies denying the judged clients the endpoints: they carry agreeing drops as evidence. */
const API_DENIALS: ReadonlySet<string> = new Set(['KPD-POLICY-DENIES', 'KPD-POLICY-SERVICE-PORT'])

/**
 * The API's denial (KPD-POLICY-DENIES, KPD-POLICY-SERVICE-PORT) behind a failed connection to `ip` from or on `nodes`:
 * a policy engine there drops the walks to it, as the API's policies say; undefined when none does.
 */
export function policyCause(ctx: CheckContext, nodes: string[], ip: string): Finding | undefined {
  const dropped = foreignDrops(ctx).some(
    (d) =>
      nodes.includes(d.node.name) &&
      dataplaneVerdict(ctx, d) === 'denied' &&
      droppedEndpoints(ctx, d).some((e) => e.destination.ip === ip),
  )
  if (!dropped) return undefined
  return ctx.findings.find(
    (f) =>
      API_DENIALS.has(f.code) &&
      f.severity === 'error' &&
      f.evidence.some((e) => nodes.some((n) => e.startsWith(`${n} drops it too`))),
  )
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
