import {createRequire} from 'node:module'
import type * as Yaml from 'yaml'
import type {CheckContext} from '../check.js'
import type {AdminRuleMatch} from '../../model/admin-network-policy.js'
import {kubectlCommand} from '../../model/reach.js'
import type {PolicyDestination} from '../../model/network-policy.js'
import {judgeWithPrecedence, type PrecedenceVerdict, type PrecedenceWorld} from '../../model/policy-precedence.js'
import {judgedSources, policyEndpoints, type JudgedSource} from './policy-sources.js'

/** yaml, loaded when a policy finding prints its rule. */
const loadModule = createRequire(import.meta.url)

/** A rule as one line of flow YAML (a finding's text is one paragraph). */
export function flowYaml(value: unknown): string {
  const yaml = loadModule('yaml') as typeof Yaml
  return yaml.stringify(value, {collectionStyle: 'flow', lineWidth: 0}).trim()
}

export const NAME_LABEL = 'kubernetes.io/metadata.name'
/** Labels a controller sets per Pod or per revision: a rule naming them would stop matching at the next rollout. */
const PER_POD_LABELS = ['pod-template-hash', 'controller-revision-hash', 'statefulset.kubernetes.io/pod-name']

/** A Pod's labels a rule may name. */
export function stableLabels(labels: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(labels).filter(([k]) => !PER_POD_LABELS.includes(k)))
}

/** Every policy the run read, the AdminNetworkPolicies included; undefined when the NetworkPolicies were not read. */
export function precedenceWorld(ctx: CheckContext): PrecedenceWorld | undefined {
  const policy = ctx.cluster.policy
  if (!policy || policy.unread) return undefined
  const admin = policy.admin
  return {
    policies: policy.policies,
    ...(policy.namespaceLabels ? {namespaceLabels: policy.namespaceLabels} : {}),
    ...(admin
      ? {admin: {anps: admin.anps, ...(admin.banp ? {banp: admin.banp} : {}), unread: admin.unread !== undefined}}
      : {}),
  }
}

/** The connections of one direction judged with every policy, the sources and endpoints of one verdict together. */
export interface ConnectionGroup {
  sources: JudgedSource[]
  endpoints: PolicyDestination[]
  servicePort: number
  protocol: string
  port: number
  verdict: PrecedenceVerdict
}

/**
 * Each judged client to each ready endpoint, after DNAT: ingress at the endpoint, egress at the client (a node's own
 * traffic is no egress any policy judges). `key` names what the finding is about (undefined: not this finding's); the
 * connections with one key and Service port are one group.
 */
export function connectionGroups(
  ctx: CheckContext,
  direction: 'ingress' | 'egress',
  key: (v: PrecedenceVerdict) => string | undefined,
): ConnectionGroup[] {
  const world = precedenceWorld(ctx)
  const policy = ctx.cluster.policy
  if (!world || !policy) return []
  const groups = new Map<string, ConnectionGroup>()
  const endpoints = policyEndpoints(ctx.cluster, ctx.service)
  for (const s of judgedSources(ctx.cluster, policy)) {
    if (direction === 'egress' && s.source.kind === 'host') continue
    for (const e of endpoints) {
      const verdict = judgeWithPrecedence(world, direction, s.source, e.destination, {
        port: e.port,
        protocol: e.protocol,
      })
      const k = key(verdict)
      if (k === undefined) continue
      const id = `${e.servicePort}/${e.protocol}/${e.port}\0${k}`
      const g = groups.get(id) ?? {...e, sources: [], endpoints: [], verdict}
      if (!g.sources.includes(s)) g.sources.push(s)
      if (!g.endpoints.some((d) => d.name === e.destination.name)) g.endpoints.push(e.destination)
      groups.set(id, g)
    }
  }
  return [...groups.values()]
}

/** The rule of an AdminNetworkPolicy (tier `admin`) or of the baseline that decides the connection with `action`. */
export function decidingRule(
  v: PrecedenceVerdict,
  tier: AdminRuleMatch['tier'],
  action: 'Allow' | 'Deny',
): AdminRuleMatch | undefined {
  const d = v.decidedBy
  return d?.tier === tier && 'rule' in d && d.rule.action === action ? d.rule : undefined
}

/** The connections of both directions a rule decides (`rule`: undefined where none of this finding's does), by rule. */
export function groupsByRule(
  ctx: CheckContext,
  rule: (v: PrecedenceVerdict) => AdminRuleMatch | undefined,
): Array<{group: ConnectionGroup; rule: AdminRuleMatch}> {
  return (['ingress', 'egress'] as const).flatMap((direction) =>
    connectionGroups(ctx, direction, (v) => {
      const r = rule(v)
      return r && ruleKey(r)
    }).map((group) => ({group, rule: rule(group.verdict)!})),
  )
}

/** "web-a1 (10.244.1.10), web-b1 (10.244.2.10) and 3 more". */
export function endpointsText(endpoints: PolicyDestination[]): string {
  const names = endpoints.map((e) => `${e.name} (${e.ip})`)
  return names.length > 3 ? `${names.slice(0, 3).join(', ')} and ${names.length - 3} more` : names.join(', ')
}

/** "Pod client/curl → web-a1 (10.244.1.10) on TCP 8080 (targetPort of Service port 80)". */
export function connectionText(g: ConnectionGroup): string {
  return `${g.sources.map((s) => s.label).join(', ')} → ${endpointsText(g.endpoints)} on ${g.protocol} ${g.port} (targetPort of Service port ${g.servicePort})`
}

const policyKind = (r: AdminRuleMatch) => (r.tier === 'admin' ? 'AdminNetworkPolicy' : 'BaselineAdminNetworkPolicy')

/** "AdminNetworkPolicy deny-shop (priority 10) ingress rule 2 'deny-from-shop'". */
export function adminRuleText(r: AdminRuleMatch): string {
  const p = r.policy
  const priority = 'priority' in (p.spec ?? {}) ? ` (priority ${(p.spec as {priority?: number}).priority})` : ''
  const name = (r.direction === 'ingress' ? p.spec?.ingress : p.spec?.egress)?.[r.rule]?.name
  return `${policyKind(r)} ${p.metadata?.name ?? ''}${priority} ${r.direction} rule ${r.rule}${name ? ` '${name}'` : ''}`
}

/** A key naming one rule of one policy. */
export const ruleKey = (r: AdminRuleMatch) =>
  `${policyKind(r)}/${r.policy.metadata?.name ?? ''}/${r.direction}/${r.rule}`

/**
 * What came before the NetworkPolicies' verdict, for their findings: the ANP rule that passed the connection to them,
 * or that the ANPs were not read (one could have decided first).
 */
export function beforeNetworkPolicies(v: PrecedenceVerdict): string {
  const passed = v.decidedBy && 'passedBy' in v.decidedBy ? v.decidedBy.passedBy : undefined
  if (passed) return ` (${adminRuleText(passed)} passes it to the NetworkPolicies)`
  if (v.adminUnread) return ' (AdminNetworkPolicies were not read: one could allow or deny it before any NetworkPolicy)'
  return ''
}

/** The resource kubectl names the rule's policy by. */
const adminResource = (r: AdminRuleMatch) => (r.tier === 'admin' ? 'adminnetworkpolicy' : 'baselineadminnetworkpolicy')

/** `kubectl get adminnetworkpolicy NAME -o yaml` (or the baseline's). */
export function getAdminPolicy(ctx: CheckContext, r: AdminRuleMatch) {
  const name = r.policy.metadata?.name ?? ''
  return kubectlCommand(ctx.reach, null, ['get', adminResource(r), name, '-o', 'yaml'], [name])
}
