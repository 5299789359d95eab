import type {V1LabelSelector, V1NetworkPolicy, V1NetworkPolicyPeer, V1NetworkPolicyPort} from '@kubernetes/client-node'
import type {Check, CheckContext, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {kubectlCommand} from '../../model/reach.js'
import {
  ingressPeers,
  policyName,
  portsMatch,
  type DirectionVerdict,
  type PolicyDestination,
  type RuleMatch,
} from '../../model/network-policy.js'
import {judgeWithPrecedence, type PrecedenceVerdict} from '../../model/policy-precedence.js'
import {judgedSources, podDestination, type JudgedSource} from './policy-sources.js'
import {agreeingDrops} from './policy-dataplane.js'
import {
  beforeNetworkPolicies,
  connectionGroups,
  endpointsText,
  flowYaml,
  NAME_LABEL,
  precedenceWorld,
  stableLabels,
} from './policy-connections.js'

function selectorText(s: V1LabelSelector | undefined): string {
  const parts = [
    ...Object.entries(s?.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`),
    ...(s?.matchExpressions ?? []).map((e) =>
      e.operator === 'Exists'
        ? e.key
        : e.operator === 'DoesNotExist'
          ? `!${e.key}`
          : `${e.key} ${e.operator.toLowerCase()} (${(e.values ?? []).join(',')})`,
    ),
  ]
  return parts.join(',')
}

function peerText(p: V1NetworkPolicyPeer, policyNamespace: string): string {
  if (p.ipBlock)
    return `addresses ${p.ipBlock.cidr}${(p.ipBlock.except ?? []).length > 0 ? ` except ${(p.ipBlock.except ?? []).join(', ')}` : ''}`
  const pods = p.podSelector && selectorText(p.podSelector) ? `Pods ${selectorText(p.podSelector)}` : 'every Pod'
  if (!p.namespaceSelector) return `${pods} of ${policyNamespace}`
  const ns = selectorText(p.namespaceSelector)
  return `${pods} of ${ns ? `namespaces ${ns}` : 'every namespace'}`
}

function portText(p: V1NetworkPolicyPort): string {
  const protocol = p.protocol ?? 'TCP'
  if (p.port === undefined || p.port === null) return `every ${protocol} port`
  return `${protocol} ${p.port}${p.endPort !== undefined ? `-${p.endPort}` : ''}`
}

/** Why one rule does not take the connection: the peers it takes, or the ports. */
function ruleMiss(r: RuleMatch, direction: 'ingress' | 'egress'): string {
  const spec = direction === 'ingress' ? r.policy.spec?.ingress?.[r.rule] : r.policy.spec?.egress?.[r.rule]
  const peers = direction === 'ingress' ? ingressPeers(spec ?? {}) : ((spec as {to?: V1NetworkPolicyPeer[]}).to ?? [])
  const ns = r.policy.metadata?.namespace ?? ''
  const whom = peers.map((p) => peerText(p, ns)).join(' or ')
  const what = (spec?.ports ?? []).map(portText).join(', ')
  if (r.peers !== true) return `${direction} rule ${r.rule} takes only ${whom}`
  return `${direction} rule ${r.rule} takes only ${what}`
}

/** Which policies select the Pod and why none of their rules takes the connection. */
function verdictText(v: DirectionVerdict, pod: string): string {
  return v.selecting
    .map(({policy}) => {
      const rules = v.rules.filter((r) => r.policy === policy)
      const why =
        rules.length === 0
          ? `has no ${v.direction} rule (it denies all ${v.direction})`
          : rules.map((r) => ruleMiss(r, v.direction)).join('; ')
      return `NetworkPolicy ${policyName(policy)} selects ${pod} and ${rules.length === 0 ? '' : 'its '}${why}`
    })
    .join('; ')
}

const getPolicy = (ctx: CheckContext, p: V1NetworkPolicy) =>
  kubectlCommand(
    ctx.reach,
    p.metadata?.namespace ?? '',
    ['get', 'networkpolicy', p.metadata?.name ?? '', '-o', 'yaml'],
    [p.metadata?.name],
  )

/** A JSON patch adding `rule` to the policy's ingress or egress list (creating the list when it has none). */
function addRule(ctx: CheckContext, p: V1NetworkPolicy, direction: 'ingress' | 'egress', rule: object) {
  const has = (direction === 'ingress' ? p.spec?.ingress : p.spec?.egress) !== undefined
  const op = has
    ? {op: 'add', path: `/spec/${direction}/-`, value: rule}
    : {op: 'add', path: `/spec/${direction}`, value: [rule]}
  return kubectlCommand(
    ctx.reach,
    p.metadata?.namespace ?? '',
    ['patch', 'networkpolicy', p.metadata?.name ?? '', '--type=json', '-p', JSON.stringify([op])],
    [p.metadata?.name],
  )
}

/** The peer a minimal rule names for a source, written in the policy's namespace. */
export function peerFor(s: JudgedSource, policyNamespace: string): V1NetworkPolicyPeer {
  const src = s.source
  if (src.kind === 'host' || (src.kind === 'pod' && src.hostNetwork))
    return {ipBlock: {cidr: `${src.ip ?? '0.0.0.0'}/${(src.ip ?? '').includes(':') ? 128 : 32}`}}
  const labels = src.kind === 'pod' ? stableLabels(src.labels) : {}
  const podSelector = Object.keys(labels).length > 0 ? {matchLabels: labels} : {}
  if (src.namespace === policyNamespace) return {podSelector}
  return {
    namespaceSelector: {matchLabels: {[NAME_LABEL]: src.namespace}},
    ...(Object.keys(labels).length > 0 ? {podSelector} : {}),
  }
}

interface Denial {
  sources: JudgedSource[]
  servicePort: number
  protocol: string
  port: number
  endpoints: PolicyDestination[]
  verdict: DirectionVerdict
  /** What the AdminNetworkPolicies did before (a Pass), or that they were not read. */
  before: string
}

/** NetworkPolicies decide it (no ANP rule, or an ANP's Pass) and deny it. */
const deniedByNetworkPolicy = (v: PrecedenceVerdict) => v.decidedBy?.tier === 'network-policy' && v.np.allowed === false

/** The connections a direction's NetworkPolicies deny, grouped by Service port and reason. */
function denials(ctx: CheckContext, direction: 'ingress' | 'egress'): Denial[] {
  return connectionGroups(ctx, direction, (v) =>
    deniedByNetworkPolicy(v) ? `${verdictText(v.np, '')}\0${beforeNetworkPolicies(v)}` : undefined,
  ).map((g) => ({...g, verdict: g.verdict.np, before: beforeNetworkPolicies(g.verdict)}))
}

/** A rule that takes the source and the Service's port but not the port after DNAT. */
function servicePortRule(d: Denial): RuleMatch | undefined {
  if (d.servicePort === d.port) return undefined
  const dest = d.endpoints[0]
  return d.verdict.rules.find(
    (r) =>
      r.peers === true &&
      !r.ports &&
      portsMatch(
        r.policy.spec?.ingress?.[r.rule]?.ports,
        {port: d.servicePort, protocol: d.protocol},
        dest.containerPorts,
      ),
  )
}

export const policyServicePort: Check = {
  meta: codeEntry('KPD-POLICY-SERVICE-PORT'),
  run(ctx) {
    const out: FindingDraft[] = []
    for (const d of denials(ctx, 'ingress')) {
      const r = servicePortRule(d)
      if (!r) continue
      const ports = (r.policy.spec?.ingress?.[r.rule]?.ports ?? []).map((p) =>
        Number(p.port) === d.servicePort && (p.protocol ?? 'TCP') === d.protocol && p.endPort === undefined
          ? {...p, port: d.port}
          : p,
      )
      const ops = ports.flatMap((p, i) =>
        p.port === d.port && Number(r.policy.spec?.ingress?.[r.rule]?.ports?.[i]?.port) === d.servicePort
          ? [{op: 'replace', path: `/spec/ingress/${r.rule}/ports/${i}/port`, value: d.port}]
          : [],
      )
      const name = r.policy.metadata?.name ?? ''
      out.push({
        node: null,
        message: `NetworkPolicy ${policyName(r.policy)} ingress rule ${r.rule} allows ${d.protocol} ${d.servicePort}, the Service's port; after DNAT the endpoints receive ${d.protocol} ${d.port} (targetPort), which no rule allows: ${d.sources.map((s) => s.label).join(', ')} cannot reach ${endpointsText(d.endpoints)}${d.before}`,
        evidence: agreeingDrops(ctx, d.endpoints),
        check: getPolicy(ctx, r.policy),
        fix: {
          changes: 'cluster',
          command:
            ops.length > 0
              ? kubectlCommand(
                  ctx.reach,
                  r.policy.metadata?.namespace ?? '',
                  ['patch', 'networkpolicy', name, '--type=json', '-p', JSON.stringify(ops)],
                  [name],
                )
              : undefined,
          text: `in NetworkPolicy ${policyName(r.policy)}, spec.ingress[${r.rule}].ports: ${flowYaml(ports)}`,
        },
      })
    }
    return out
  },
}

export const policyDenies: Check = {
  meta: codeEntry('KPD-POLICY-DENIES'),
  run(ctx) {
    const out: FindingDraft[] = []
    for (const d of denials(ctx, 'ingress')) {
      if (servicePortRule(d)) continue
      const target = [...d.verdict.selecting].sort((a, b) =>
        policyName(a.policy).localeCompare(policyName(b.policy)),
      )[0].policy
      const ns = target.metadata?.namespace ?? ''
      const rule = {_from: d.sources.map((s) => peerFor(s, ns)), ports: [{protocol: d.protocol, port: d.port}]}
      const asWritten = {from: rule._from, ports: rule.ports}
      out.push({
        node: null,
        message: `${d.sources.map((s) => s.label).join(', ')} → ${endpointsText(d.endpoints)} on ${d.protocol} ${d.port} (targetPort of Service port ${d.servicePort}): ${verdictText(d.verdict, d.endpoints.length > 1 ? 'them' : d.endpoints[0].name)}${d.before}`,
        evidence: agreeingDrops(ctx, d.endpoints),
        check: getPolicy(ctx, target),
        fix: {
          changes: 'cluster',
          command: addRule(ctx, target, 'ingress', asWritten),
          text: `add to spec.ingress of NetworkPolicy ${policyName(target)} (or a new policy selecting the endpoint Pods): ${flowYaml([asWritten])}`,
        },
      })
    }
    return out
  },
}

function egressVerdicts(ctx: CheckContext) {
  return denials(ctx, 'egress')
}

export const policyEgressDenies: Check = {
  meta: codeEntry('KPD-POLICY-EGRESS-DENIES'),
  run(ctx) {
    const out: FindingDraft[] = []
    const serviceNamespace = ctx.service.namespace
    const selector = ctx.cluster.service.spec?.selector ?? {}
    for (const d of egressVerdicts(ctx)) {
      const target = d.verdict.selecting[0].policy
      const ns = target.metadata?.namespace ?? ''
      const rule = {
        to: [
          {
            ...(ns === serviceNamespace ? {} : {namespaceSelector: {matchLabels: {[NAME_LABEL]: serviceNamespace}}}),
            podSelector: {matchLabels: selector},
          },
        ],
        ports: [{protocol: d.protocol, port: d.port}],
      }
      out.push({
        node: null,
        message: `${d.sources.map((s) => s.label).join(', ')} → ${endpointsText(d.endpoints)} of ${serviceNamespace} on ${d.protocol} ${d.port} (egress is judged after DNAT, on the endpoint and targetPort, not the ClusterIP): ${verdictText(d.verdict, 'the client')}${d.before}`,
        check: getPolicy(ctx, target),
        fix: {
          changes: 'cluster',
          command: addRule(ctx, target, 'egress', rule),
          text: `add to spec.egress of NetworkPolicy ${policyName(target)}: ${flowYaml([rule])}`,
        },
      })
    }
    return out
  },
}

export const policyDnsEgress: Check = {
  meta: codeEntry('KPD-POLICY-DNS-EGRESS'),
  run(ctx) {
    const w = precedenceWorld(ctx)
    const policy = ctx.cluster.policy
    if (!w || !policy || policy.dnsPods.length === 0) return []
    const dnsPorts = ctx.cluster.dns.slices
      .flatMap((s) => s.ports ?? [])
      .filter((p) => p.port !== undefined && (p.protocol ?? 'TCP') === 'UDP')
    if (dnsPorts.length === 0) return []
    const udp = dnsPorts[0].port!
    const ips = new Map(
      ctx.cluster.dns.slices.flatMap((s) =>
        (s.endpoints ?? []).map((e) => [e.targetRef?.name ?? '', e.addresses?.[0] ?? ''] as const),
      ),
    )
    const out: FindingDraft[] = []
    for (const s of judgedSources(ctx.cluster, policy)) {
      if (s.source.kind === 'host') continue
      const verdicts = policy.dnsPods.map((pod) =>
        judgeWithPrecedence(w, 'egress', s.source, podDestination(pod, ips.get(pod.metadata?.name ?? '') ?? ''), {
          port: udp,
          protocol: 'UDP',
        }),
      )
      if (!verdicts.every(deniedByNetworkPolicy)) continue
      const target = verdicts[0].np.selecting[0].policy
      const dnsLabels = policy.dnsPods[0].metadata?.labels ?? {}
      const app = dnsLabels['k8s-app'] !== undefined ? {'k8s-app': dnsLabels['k8s-app']} : dnsLabels
      const dnsNamespace = policy.dnsPods[0].metadata?.namespace ?? 'kube-system'
      const rule = {
        to: [{namespaceSelector: {matchLabels: {[NAME_LABEL]: dnsNamespace}}, podSelector: {matchLabels: app}}],
        ports: [
          {protocol: 'UDP', port: udp},
          {protocol: 'TCP', port: udp},
        ],
      }
      out.push({
        node: null,
        message: `${s.label} cannot ask the cluster DNS (${policy.dnsPods.map((p) => p.metadata?.name).join(', ')} on UDP ${udp}): ${verdictText(verdicts[0].np, 'the client')}${beforeNetworkPolicies(verdicts[0])}; names such as ${ctx.service.name}.${ctx.service.namespace}.svc do not resolve`,
        check: getPolicy(ctx, target),
        fix: {
          changes: 'cluster',
          command: addRule(ctx, target, 'egress', rule),
          text: `add to spec.egress of NetworkPolicy ${policyName(target)}: ${flowYaml([rule])}`,
        },
      })
    }
    return out
  },
}
