/**
 * The finding codes each check case file, test/unit/checks-FAMILY.test.ts, makes fire in its own cases: the
 * catalogue's families (src/checks/catalogue.ts), grouped as the case tables are (the live probes' codes together, the
 * filter path apart from the node under it). Each file fails when one of its codes fires in none of its cases
 * (checkFamily); test/unit/check-families.test.ts fails when a catalogue code is in no family or a family has no file.
 * The files run in separate processes: this list is what ties them together.
 */
export const CHECK_FAMILIES = {
  service: [
    'KPD-NOT-PROXIED',
    'KPD-SELECTOR-NO-PODS',
    'KPD-NO-READY-ENDPOINTS',
    'KPD-TARGETPORT-NOT-EXPOSED',
    'KPD-TARGETPORT-UNDECLARED',
    'KPD-ENDPOINT-NOT-READY',
  ],
  dns: ['KPD-DNS-SERVICE-MISSING', 'KPD-DNS-NO-ENDPOINTS', 'KPD-DNS-NO-ANSWER'],
  'kube-proxy': [
    'KPD-NODE-UNREADABLE',
    'KPD-NO-IMPLEMENTER',
    'KPD-TWO-IMPLEMENTERS',
    'KPD-MODE-MIXED',
    'KPD-MODE-UNSUPPORTED',
    'KPD-MODE-MISMATCH',
    'KPD-MODE-LEFTOVER',
    'KPD-PROXY-POD-DOWN',
    'KPD-PROXY-UNHEALTHY',
    'KPD-PROXY-STUCK',
    'KPD-PROXY-SYNC-FAILURES',
    'KPD-NODE-DIVERGES',
  ],
  rules: [
    'KPD-HOOK-MISSING',
    'KPD-SVC-RULE-MISSING',
    'KPD-REJECT-STALE',
    'KPD-NODEPORT-MISSING',
    'KPD-SEP-MISSING',
    'KPD-SEP-STALE',
    'KPD-DNAT-WRONG',
    'KPD-PROBABILITY-WRONG',
    'KPD-AFFINITY-MISMATCH',
    'KPD-MASQ-MISSING',
    'KPD-IPVS-WEIGHT-ZERO',
    'KPD-IPVS-VIP-UNBOUND',
    'KPD-IPVS-IPSET-MISSING',
    'KPD-IPVS-SYSCTL',
    'KPD-IPVS-SCHEDULER',
  ],
  cilium: [
    'KPD-CILIUM-FRONTEND-MISSING',
    'KPD-CILIUM-BACKEND-MISSING',
    'KPD-CILIUM-BACKEND-STALE',
    'KPD-CILIUM-BACKEND-NOT-READY-ACTIVE',
    'KPD-CILIUM-NODE-DIVERGES',
  ],
  hairpin: ['KPD-HAIRPIN-OFF', 'KPD-HAIRPIN-UNMAPPED'],
  filter: ['KPD-FILTER-DROP', 'KPD-PATH-BROKEN', 'KPD-PATH-UNDECIDED'],
  'node-path': [
    'KPD-NODE-FORWARDING-OFF',
    'KPD-BRIDGE-NF-OFF',
    'KPD-ROUTE-LOCALNET-OFF',
    'KPD-ROUTE-MISSING',
    'KPD-CONNTRACK-STALE',
    'KPD-CONNTRACK-FULL',
  ],
  probes: [
    'KPD-BACKEND-REFUSED',
    'KPD-ENDPOINT-CROSS-NODE',
    'KPD-VIP-FAILS',
    'KPD-PROBE-CONTRADICTS',
    'KPD-KERNEL-DISAGREES',
  ],
  policy: [
    'KPD-POLICY-DENIES',
    'KPD-POLICY-SERVICE-PORT',
    'KPD-POLICY-EGRESS-DENIES',
    'KPD-POLICY-DNS-EGRESS',
    'KPD-POLICY-DATAPLANE-DISAGREES',
  ],
  /** The catalogue's policy family too: AdminNetworkPolicies and the baseline, in their own case file. */
  'admin-policy': ['KPD-ANP-DENIES', 'KPD-BANP-DENIES', 'KPD-ANP-SAME-PRIORITY', 'KPD-ANP-ALLOWS'],
} as const satisfies Record<string, readonly string[]>

export type CheckFamilyName = keyof typeof CHECK_FAMILIES
