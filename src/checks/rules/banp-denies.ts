import type {Check, CheckContext, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import type {AdminRuleMatch} from '../../model/admin-network-policy.js'
import {peerFor} from './network-policy.js'
import {
  adminRuleText,
  beforeNetworkPolicies,
  connectionText,
  decidingRule,
  flowYaml,
  getAdminPolicy,
  groupsByRule,
  NAME_LABEL,
  stableLabels,
  type ConnectionGroup,
} from './policy-connections.js'

/**
 * The minimal NetworkPolicy that lets the connection through: ingress at the endpoints from the clients, or egress at
 * the client to the endpoints. Once it selects the Pods, NetworkPolicies decide all their traffic of that direction.
 */
function allowingPolicy(ctx: CheckContext, g: ConnectionGroup) {
  const ports = [{protocol: g.protocol, port: g.port}]
  const selector = ctx.cluster.service.spec?.selector ?? {}
  if (g.verdict.direction === 'ingress')
    return {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: {namespace: ctx.service.namespace, name: `allow-to-${ctx.service.name}`},
      spec: {
        podSelector: {matchLabels: selector},
        policyTypes: ['Ingress'],
        ingress: [{from: g.sources.map((s) => peerFor(s, ctx.service.namespace)), ports}],
      },
    }
  const client = g.sources[0].source
  const namespace = client.kind === 'host' ? '' : client.namespace
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: {namespace, name: `allow-to-${ctx.service.name}`},
    spec: {
      podSelector: client.kind === 'pod' ? {matchLabels: stableLabels(client.labels)} : {},
      policyTypes: ['Egress'],
      egress: [
        {
          to: [
            {
              namespaceSelector: {matchLabels: {[NAME_LABEL]: ctx.service.namespace}},
              podSelector: {matchLabels: selector},
            },
          ],
          ports,
        },
      ],
    },
  }
}

function finding(ctx: CheckContext, g: ConnectionGroup, r: AdminRuleMatch): FindingDraft {
  const ingress = g.verdict.direction === 'ingress'
  const policy = allowingPolicy(ctx, g)
  return {
    node: null,
    message: `${connectionText(g)}: no NetworkPolicy selects ${ingress ? 'the endpoints' : 'the client'} and ${adminRuleText(r)} denies it${beforeNetworkPolicies(g.verdict)}`,
    check: getAdminPolicy(ctx, r),
    fix: {
      changes: 'cluster',
      text: `a NetworkPolicy allowing it (it then decides all ${ingress ? 'ingress of the endpoint Pods' : 'egress of the client, DNS included'}, instead of the baseline): ${flowYaml(policy)}; or change spec.${g.verdict.direction}[${r.rule}] of the BaselineAdminNetworkPolicy default`,
    },
  }
}

export const banpDenies: Check = {
  meta: codeEntry('KPD-BANP-DENIES'),
  run(ctx) {
    return groupsByRule(ctx, (v) => decidingRule(v, 'baseline', 'Deny')).map((d) => finding(ctx, d.group, d.rule))
  },
}
