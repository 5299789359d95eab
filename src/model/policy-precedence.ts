import type {AdminNetworkPolicy, BaselineAdminNetworkPolicy} from '../cluster/admin-policy-objects.js'
import {adminRuleMatches, type AdminRuleMatch} from './admin-network-policy.js'
import {
  any,
  judgeEgress,
  judgeIngress,
  type DirectionVerdict,
  type PolicyDestination,
  type PolicyPort,
  type PolicySource,
  type PolicyWorld,
  type Tri,
} from './network-policy.js'

/**
 * The precedence of the policy APIs for one connection in one direction, as network-policy-api defines it: the
 * AdminNetworkPolicies by priority (a lower number first; within one, its rules in order), the first rule that takes
 * the connection decides: Allow (NetworkPolicies are not consulted), Deny, or Pass (the remaining ANPs are skipped);
 * then the NetworkPolicies, when one selects the Pod; then the BaselineAdminNetworkPolicy's rules in order; else
 * allowed. Two ANPs of one priority that would decide differently: the API leaves the order undefined, so is the verdict.
 */
interface AdminPolicies {
  anps: AdminNetworkPolicy[]
  banp?: BaselineAdminNetworkPolicy
  /** They could not be read: an ANP could decide anything first, so no verdict is sure. */
  unread: boolean
}

export interface PrecedenceWorld extends PolicyWorld {
  /** Absent: the cluster has none (or they were not asked for). */
  admin?: AdminPolicies
}

/** Who decides a connection. */
type PolicyDecider =
  /** An AdminNetworkPolicy's Allow or Deny rule. */
  | {tier: 'admin'; rule: AdminRuleMatch}
  /** NetworkPolicies select the Pod (after an ANP's Pass, when `passedBy`). */
  | {tier: 'network-policy'; passedBy?: AdminRuleMatch}
  /** No NetworkPolicy selects the Pod: a baseline rule. */
  | {tier: 'baseline'; rule: AdminRuleMatch; passedBy?: AdminRuleMatch}
  /** Nothing selects the Pod: allowed. */
  | {tier: 'none'; passedBy?: AdminRuleMatch}

export interface PrecedenceVerdict {
  direction: 'ingress' | 'egress'
  allowed: Tri
  /** Undefined where it cannot be told: unknown labels of the source, ANPs of one priority in an undefined order. */
  decidedBy?: PolicyDecider
  /** The NetworkPolicies' own verdict. */
  np: DirectionVerdict
  /** What the NetworkPolicies and the baseline decide without the ANPs: what an ANP's Allow or Deny overrides. */
  withoutAdmin: Tri
  /** The first rules of ANPs sharing a priority that take the connection and would decide it differently. */
  samePriority?: AdminRuleMatch[]
  /** The ANPs were not read: `allowed` is never sure; `decidedBy` is what the rest decides. */
  adminUnread: boolean
}

/** More ANPs of one priority taking one connection than this are not put in every order: their verdict is unsure. */
const MAX_ORDERED = 5

/** Rules judged in order, each's verdict given: the first that takes the connection decides, else `rest`. */
function firstMatch(rules: AdminRuleMatch[], verdict: (r: AdminRuleMatch) => Tri, rest: Tri): Tri {
  let out = rest
  for (const r of [...rules].reverse()) {
    const v = verdict(r)
    out = r.matches === true ? v : r.matches === false ? out : v === out ? out : undefined
  }
  return out
}

function orders<T>(xs: T[]): T[][] {
  if (xs.length <= 1) return [xs]
  return xs.flatMap((x, i) => orders([...xs.slice(0, i), ...xs.slice(i + 1)]).map((rest) => [x, ...rest]))
}

const live = (rules: AdminRuleMatch[]) => rules.some((r) => r.matches !== false)
const named = (p: {metadata?: {name?: string}}) => p.metadata?.name ?? ''

export function judgeWithPrecedence(
  world: PrecedenceWorld,
  direction: 'ingress' | 'egress',
  source: PolicySource,
  destination: PolicyDestination,
  target: PolicyPort,
): PrecedenceVerdict {
  const np = (direction === 'ingress' ? judgeIngress : judgeEgress)(world, source, destination, target)
  const admin = world.admin
  const rulesOf = (tier: AdminRuleMatch['tier'], p: AdminNetworkPolicy | BaselineAdminNetworkPolicy) =>
    adminRuleMatches(tier, p, direction, source, destination, target, world.namespaceLabels)

  const baseline = admin?.banp ? rulesOf('baseline', admin.banp) : []
  const baselineAllowed = firstMatch(
    baseline,
    (r) => (r.action === 'Allow' ? true : r.action === 'Deny' ? false : undefined),
    true,
  )
  const npSelected = any(np.selecting.map((s) => s.selected))
  const withoutAdmin =
    npSelected === true
      ? np.allowed
      : npSelected === false
        ? baselineAllowed
        : baselineAllowed === true
          ? np.allowed
          : undefined
  const below = (passedBy?: AdminRuleMatch): PolicyDecider | undefined => {
    const passed = passedBy ? {passedBy} : {}
    if (npSelected === true) return {tier: 'network-policy', ...passed}
    if (npSelected === undefined) return undefined
    const first = baseline.find((r) => r.matches !== false)
    if (!first) return {tier: 'none', ...passed}
    return first.matches === true ? {tier: 'baseline', rule: first, ...passed} : undefined
  }
  const actionVerdict = (r: AdminRuleMatch): Tri =>
    r.action === 'Allow' ? true : r.action === 'Deny' ? false : r.action === 'Pass' ? withoutAdmin : undefined

  // The ANPs by priority; within one priority, those whose rules may take the connection in every order.
  const byPriority = new Map<number, AdminRuleMatch[][]>()
  for (const p of [...(admin?.anps ?? [])].sort((a, b) => named(a).localeCompare(named(b)))) {
    const rules = rulesOf('admin', p)
    if (!live(rules)) continue
    const priority = p.spec?.priority ?? 0
    byPriority.set(priority, [...(byPriority.get(priority) ?? []), rules])
  }
  const groups = [...byPriority.entries()].sort(([a], [b]) => a - b).map(([, members]) => members)
  const groupVerdict = (members: AdminRuleMatch[][], rest: Tri) => {
    const results =
      members.length > MAX_ORDERED
        ? [true, false]
        : orders(members).map((order) => firstMatch(order.flat(), actionVerdict, rest))
    return {
      allowed: results.every((r) => r === results[0]) ? results[0] : undefined,
      agree: new Set(results).size === 1,
    }
  }
  let allowed: Tri = withoutAdmin
  for (const members of [...groups].reverse()) allowed = groupVerdict(members, allowed).allowed

  // Who decides: the first group with a rule that may take the connection.
  let decidedBy: PolicyDecider | undefined = below()
  let samePriority: AdminRuleMatch[] | undefined
  for (const members of groups) {
    if (members.length > 1 && !groupVerdict(members, withoutAdmin).agree) {
      decidedBy = undefined
      samePriority = members.map((rules) => rules.find((r) => r.matches !== false)!)
      break
    }
    const first = members.flat().find((r) => r.matches !== false)!
    decidedBy =
      first.matches !== true
        ? undefined
        : first.action === 'Pass'
          ? below(first)
          : first.action === 'Allow' || first.action === 'Deny'
            ? {tier: 'admin', rule: first}
            : undefined
    break
  }
  const unread = admin?.unread ?? false
  return {
    direction,
    allowed: unread ? undefined : allowed,
    ...(decidedBy ? {decidedBy} : {}),
    np,
    withoutAdmin,
    ...(samePriority ? {samePriority} : {}),
    adminUnread: unread,
  }
}
