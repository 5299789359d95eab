import type {TraceStep} from '../../trace/types.js'

/** The texts of a rule's `-m comment --comment` options, quoted or not. */
function comments(rule: string): string[] {
  return [...rule.matchAll(/--comment (?:"((?:[^"\\]|\\.)*)"|(\S+))/g)].map((m) => m[1] ?? m[2])
}

/**
 * How each policy engine names the NetworkPolicy a rule implements, in its rules' comments (its chain names are hashes):
 * kube-router's jump from a Pod's firewall chain ("run through nw policy NAME", the Pod's namespace) and its policy
 * chain's rules ("… selected by policy name[:] NAME namespace NS"); Calico's policy chains ("Policy NS/NAME ingress",
 * a Kubernetes policy as knp.default.NAME).
 */
const NAMINGS: Array<(comment: string, namespace: string) => string | undefined> = [
  (c, ns) => {
    const m = /^run through nw policy (\S+)$/.exec(c)
    return m ? `${ns}/${m[1]}` : undefined
  },
  (c) => {
    const m = /selected by policy name:? (\S+) namespace (\S+)/.exec(c)
    return m ? `${m[2]}/${m[1]}` : undefined
  },
  (c, ns) => {
    const m = /^Policy (?:([^\s/]+)\/)?(?:knp\.default\.)?(\S+) (?:ingress|egress)$/.exec(c)
    return m ? `${m[1] ?? ns}/${m[2]}` : undefined
  },
]

/** Chains whose rules are one NetworkPolicy's: kube-router's and Calico's (inbound and outbound). */
const POLICY_CHAIN = /^(?:KUBE-NWPLCY-|cali-pi-|cali-po-)/

/**
 * The NetworkPolicies (namespace/name) the walk passed through on its way to a drop, named by the comments of the rules
 * it took and of the policy chains it jumped to (a policy that takes nothing matches none of its own rules);
 * `namespace` is the destination Pod's, for names written without one; `chainRules` gives a chain's rule texts.
 */
export function policiesOnWalk(
  steps: TraceStep[],
  namespace: string,
  chainRules: (table: string, chain: string) => string[],
): string[] {
  const names = new Set<string>()
  const name = (rule: string) => {
    for (const comment of comments(rule))
      for (const naming of NAMINGS) {
        const found = naming(comment, namespace)
        if (found) names.add(found)
      }
  }
  for (const step of steps) {
    name(step.rule)
    const target = /(?:^|\s)-[jg] (\S+)/.exec(step.rule)?.[1]
    if (target && POLICY_CHAIN.test(target)) for (const rule of chainRules(step.table, target)) name(rule)
  }
  return [...names].sort()
}
