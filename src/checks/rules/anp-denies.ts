import type {Check, CheckContext, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import type {AdminPolicyPeer} from '../../cluster/admin-policy-objects.js'
import type {AdminRuleMatch} from '../../model/admin-network-policy.js'
import type {PrecedenceVerdict} from '../../model/policy-precedence.js'
import {kubectlCommand} from '../../model/reach.js'
import type {JudgedSource} from './policy-sources.js'
import {
  adminRuleText,
  connectionText,
  decidingRule,
  flowYaml,
  getAdminPolicy,
  groupsByRule,
  NAME_LABEL,
  stableLabels,
  type ConnectionGroup,
} from './policy-connections.js'

/** Whether NetworkPolicies select the Pod the direction judges. */
export const networkPoliciesSelect = (v: PrecedenceVerdict) => v.np.selecting.some((s) => s.selected === true)

/** What the NetworkPolicies and the baseline would have decided without the ANP rule. */
function withoutIt(v: PrecedenceVerdict): string {
  const pods = v.direction === 'ingress' ? 'the endpoints' : 'the client'
  if (v.withoutAdmin === true)
    return networkPoliciesSelect(v)
      ? '; without it the NetworkPolicies selecting ' + pods + ' would allow it'
      : `; without it nothing would deny it (no NetworkPolicy selects ${pods})`
  if (v.withoutAdmin === false)
    return networkPoliciesSelect(v) ? '; the NetworkPolicies would deny it too' : '; the baseline would deny it too'
  return ''
}

/** An ANP ingress peer naming a client: its Pod (namespace and stable labels) or its namespace; a node: none. */
function clientPeer(s: JudgedSource): AdminPolicyPeer | undefined {
  const src = s.source
  if (src.kind === 'host' || (src.kind === 'pod' && src.hostNetwork)) return undefined
  const namespaceSelector = {matchLabels: {[NAME_LABEL]: src.namespace}}
  if (src.kind === 'namespace') return {namespaces: namespaceSelector}
  return {pods: {namespaceSelector, podSelector: {matchLabels: stableLabels(src.labels)}}}
}

function finding(ctx: CheckContext, g: ConnectionGroup, r: AdminRuleMatch): FindingDraft {
  const direction = g.verdict.direction
  const selector = ctx.cluster.service.spec?.selector ?? {}
  const peers =
    direction === 'ingress'
      ? g.sources.map(clientPeer).filter((p) => p !== undefined)
      : [
          {
            pods: {
              namespaceSelector: {matchLabels: {[NAME_LABEL]: ctx.service.namespace}},
              podSelector: {matchLabels: selector},
            },
          },
        ]
  // Where the NetworkPolicies would allow it, a Pass leaves the decision to them; else only an Allow lets it through.
  const action = g.verdict.withoutAdmin === true ? 'Pass' : 'Allow'
  const rule = {
    name: `${action.toLowerCase()}-${direction === 'ingress' ? 'to' : 'from'}-${ctx.service.name}`,
    action,
    [direction === 'ingress' ? 'from' : 'to']: peers,
    ports: [{portNumber: {protocol: g.protocol, port: g.port}}],
  }
  const name = r.policy.metadata?.name ?? ''
  const path = `/spec/${direction}/${r.rule}`
  return {
    node: null,
    message: `${connectionText(g)}: ${adminRuleText(r)} denies it${direction === 'ingress' ? ', before any NetworkPolicy' : ' at the client'}${withoutIt(g.verdict)}`,
    check: getAdminPolicy(ctx, r),
    fix:
      peers.length === 0
        ? {
            changes: 'cluster',
            text: `an AdminNetworkPolicy ingress rule cannot name a node's own traffic (its peers are namespaces and Pods): narrow the peers of spec.${direction}[${r.rule}] of AdminNetworkPolicy ${name}`,
          }
        : {
            changes: 'cluster',
            command: kubectlCommand(
              ctx.reach,
              null,
              [
                'patch',
                'adminnetworkpolicy',
                name,
                '--type=json',
                '-p',
                JSON.stringify([{op: 'add', path, value: rule}]),
              ],
              [name],
            ),
            text: `if the Deny is not meant for this client, insert before spec.${direction}[${r.rule}] of AdminNetworkPolicy ${name}: ${flowYaml([rule])}`,
          },
  }
}

export const anpDenies: Check = {
  meta: codeEntry('KPD-ANP-DENIES'),
  run(ctx) {
    return groupsByRule(ctx, (v) => decidingRule(v, 'admin', 'Deny')).map((d) => finding(ctx, d.group, d.rule))
  },
}
