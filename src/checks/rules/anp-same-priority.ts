import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {kubectlCommand} from '../../model/reach.js'
import {adminRuleText, connectionGroups, connectionText, getAdminPolicy, ruleKey} from './policy-connections.js'

/** ANP priorities run from 0 to 1000. */
const MAX_PRIORITY = 1000

export const anpSamePriority: Check = {
  meta: codeEntry('KPD-ANP-SAME-PRIORITY'),
  run(ctx) {
    const used = new Set((ctx.cluster.policy?.admin?.anps ?? []).map((p) => p.spec?.priority ?? 0))
    return (['ingress', 'egress'] as const).flatMap((direction) =>
      connectionGroups(ctx, direction, (v) => v.samePriority?.map(ruleKey).join('\0')).map((g): FindingDraft => {
        const rules = g.verdict.samePriority!
        const names = rules.map((r) => r.policy.metadata?.name ?? '')
        const priority = (rules[0].policy.spec as {priority?: number}).priority ?? 0
        let free = priority + 1
        while (used.has(free) && free < MAX_PRIORITY) free++
        const last = names.at(-1)!
        return {
          node: null,
          message: `${connectionText(g)}: AdminNetworkPolicies ${names.join(' and ')} share priority ${priority} and decide it differently (${rules.map((r) => `${adminRuleText(r)}: ${r.action}`).join('; ')}); the API leaves their order undefined, and so is the verdict`,
          check: getAdminPolicy(ctx, rules[0]),
          fix: {
            changes: 'cluster',
            command: used.has(free)
              ? undefined
              : kubectlCommand(
                  ctx.reach,
                  null,
                  ['patch', 'adminnetworkpolicy', last, '--type=merge', '-p', JSON.stringify({spec: {priority: free}})],
                  [last],
                ),
            text: `give them different priorities (a lower number is judged first): which one should win is the administrators' choice${used.has(free) ? '' : `; priority ${free} is free`}`,
          },
        }
      }),
    )
  },
}
