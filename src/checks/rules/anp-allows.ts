import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import type {AdminRuleMatch} from '../../model/admin-network-policy.js'
import {policyName} from '../../model/network-policy.js'
import type {PrecedenceVerdict} from '../../model/policy-precedence.js'
import {networkPoliciesSelect} from './anp-denies.js'
import {adminRuleText, connectionText, decidingRule, getAdminPolicy, groupsByRule} from './policy-connections.js'

/** The ANP Allow rule that lets through what the NetworkPolicies or the baseline would deny. */
function overridingAllow(v: PrecedenceVerdict): AdminRuleMatch | undefined {
  return v.withoutAdmin === false ? decidingRule(v, 'admin', 'Allow') : undefined
}

/** Who would deny it without the Allow: the NetworkPolicies selecting the Pod, else the baseline. */
function overridden(v: PrecedenceVerdict): string {
  if (!networkPoliciesSelect(v)) return 'the BaselineAdminNetworkPolicy default would deny it'
  const names = v.np.selecting.filter((s) => s.selected === true).map((s) => policyName(s.policy))
  return `NetworkPolicy ${names.join(', ')} would deny it`
}

export const anpAllows: Check = {
  meta: codeEntry('KPD-ANP-ALLOWS'),
  run(ctx) {
    return groupsByRule(ctx, overridingAllow).map(({group: g, rule: r}): FindingDraft => ({
      node: null,
      message: `${connectionText(g)}: ${adminRuleText(r)} allows it, and an AdminNetworkPolicy Allow is final: ${overridden(g.verdict)}, but is not consulted`,
      check: getAdminPolicy(ctx, r),
    }))
  },
}
