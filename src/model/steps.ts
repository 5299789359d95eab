/**
 * The steps of the path, in the order a packet meets them, in words of no mode: each mode names its own chains, maps
 * or sets for the steps met in its rules (ModeVocabulary.steps), the detail of a break. `breaksAt` in the report is
 * one of these, or `unknown`.
 */
export const STEPS = [
  'endpoints',
  'entry',
  'service-match',
  'nodeport-match',
  'external-policy',
  'service',
  'endpoint',
  'DNAT',
  'filter',
  'masquerade',
  'bridge/hairpin',
] as const
export type Step = (typeof STEPS)[number] | 'unknown'

/** What a break at each step means (docs/checks.md's step table is made from these and each mode's words). */
export const STEP_MEANINGS: Record<Step, string> = {
  endpoints: 'the Service has no ready endpoint: kube-proxy rejects the connection (the cluster side)',
  entry:
    'the hook where the packet enters (PREROUTING from a pod or outside, OUTPUT from the node) does not hand it to the Service rules',
  'service-match': "the Service's address and port are matched nowhere, or rejected there",
  'nodeport-match': 'the node port is matched nowhere, or rejected there',
  'external-policy': "the chain of external traffic's policy (externalTrafficPolicy) does not pass it on",
  service: "the Service's own chain does not choose every endpoint",
  endpoint: "an endpoint's chain does not translate the packet",
  DNAT: "the packet is translated to an address that is not a ready endpoint (or, on the endpoint's node, translated again)",
  filter: 'a filter rule or policy drops or rejects it (whoever owns the chain)',
  masquerade: 'the packet is not masqueraded where its reply must come back through this node',
  'bridge/hairpin': 'a pod reaching itself: the reply cannot leave by the bridge port it came in on (hairpin_mode 0)',
  unknown: 'the walk met a rule it cannot evaluate: not decided',
}

/** The steps of no mode's rules: the cluster's side, whoever's filter, the bridge. */
const STEPS_OF_NO_MODE = ['endpoints', 'filter', 'bridge/hairpin'] as const

/** The steps met in a mode's own rules: each mode's vocabulary names them (ModeVocabulary.steps). */
export type RuleStep = Exclude<(typeof STEPS)[number], (typeof STEPS_OF_NO_MODE)[number]>
export const RULE_STEPS: readonly RuleStep[] = STEPS.filter(
  (s): s is RuleStep => !(STEPS_OF_NO_MODE as readonly string[]).includes(s),
)
