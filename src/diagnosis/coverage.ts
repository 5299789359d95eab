import {CATALOGUE} from '../checks/catalogue.js'
import type {CheckContext} from '../checks/check.js'
import {familySave, type NodeObservation} from '../node/observation.js'
import {familyOf} from '../net/address.js'
import {FORWARDING_KEYS, type SysctlValues} from '../parse/sysctl.js'
import type {NodeProbes, ProbeRun, RecordedProbes} from '../node/probe/tcp-probe.js'
import type {PolicyState} from '../cluster/types.js'
import type {NodeReadVia} from './choose-transport.js'
import {compareNames} from '../model/name-order.js'
import type {IpFamily} from '../model/expected.js'
import {notReadReason} from '../node/read/path-reads.js'

/**
 * The checks a run can fail to make, each with the finding codes it would have produced. `required` on a
 * NotChecked entry says whether the run was expected to make it (see notChecked below): a required check that
 * could not run keeps the headline from saying ✓ and makes the run incomplete (exit 3 unless `--fail-on` leaves it out).
 */
const NODE_SIDE_FAMILIES = new Set(['rules', 'hairpin', 'path'])
const PROBE_CODES = ['KPD-VIP-FAILS', 'KPD-ENDPOINT-CROSS-NODE', 'KPD-BACKEND-REFUSED', 'KPD-PROBE-CONTRADICTS']
const KERNEL_CODES = ['KPD-KERNEL-DISAGREES']
const HEALTH_CODES = ['KPD-PROXY-UNHEALTHY']
const METRICS_CODES = ['KPD-PROXY-STUCK', 'KPD-PROXY-SYNC-FAILURES']
const DNS_CODES = ['KPD-DNS-NO-ANSWER']
const SYSCTL_CODES = ['KPD-NODE-FORWARDING-OFF', 'KPD-BRIDGE-NF-OFF', 'KPD-ROUTE-LOCALNET-OFF']
const ROUTE_CODES = ['KPD-ROUTE-MISSING']
const CONNTRACK_CODES = ['KPD-CONNTRACK-STALE', 'KPD-CONNTRACK-FULL']
const PATH_READ_CODES = [...SYSCTL_CODES, ...ROUTE_CODES, ...CONNTRACK_CODES]
const RULE_CODES = CATALOGUE.filter(
  (e) =>
    NODE_SIDE_FAMILIES.has(e.family) &&
    !PROBE_CODES.includes(e.code) &&
    !KERNEL_CODES.includes(e.code) &&
    !PATH_READ_CODES.includes(e.code),
).map((e) => e.code)
const HAIRPIN_CODES = CATALOGUE.filter((e) => e.family === 'hairpin').map((e) => e.code)
const POLICY_CODES = CATALOGUE.filter((e) => e.family === 'policy').map((e) => e.code)

const COVERAGE_CHECKS = {
  /** Everything read on the node: rules, packet paths, kube-proxy's endpoints, DNS from the node, probes. */
  'node-read': [
    ...RULE_CODES,
    ...PATH_READ_CODES,
    ...HEALTH_CODES,
    ...METRICS_CODES,
    ...DNS_CODES,
    ...PROBE_CODES,
    ...KERNEL_CODES,
  ],
  /** The node's rules judged in its proxy mode, and the paths traced through them. */
  'proxy-rules': RULE_CODES,
  /** The iptables backend the family's own save does not show, where kube-proxy rules may be left (its own save). */
  'iptables-backend': ['KPD-MODE-LEFTOVER'],
  sysctls: SYSCTL_CODES,
  routes: ROUTE_CODES,
  conntrack: CONNTRACK_CODES,
  /** The packet-path reads as a whole (sysctls, routes, conntrack). */
  'path-reads': PATH_READ_CODES,
  'kube-proxy-healthz': HEALTH_CODES,
  'kube-proxy-metrics': METRICS_CODES,
  'dns-from-node': DNS_CODES,
  /** The pod-to-bridge-port mapping the hairpin checks use. */
  hairpin: HAIRPIN_CODES,
  'live-probes': PROBE_CODES,
  /** The kernel's conntrack entries of the live probes, set against the walk. */
  'kernel-evidence': KERNEL_CODES,
  /** --kernel-trace: netfilter's own trace of the probes' packets, set against the walk. */
  'kernel-trace': KERNEL_CODES,
  /** iptables: the rule counters of the Service's chains around the live probes (which rules the probes moved). */
  'rule-counters': KERNEL_CODES,
  /** The NetworkPolicies on the Service's path, judged from the API. */
  'network-policy': POLICY_CODES,
  /** The AdminNetworkPolicies and the baseline, judged around the NetworkPolicies: without them no verdict is sure. */
  'admin-network-policy': POLICY_CODES,
} as const

type CoverageCheck = keyof typeof COVERAGE_CHECKS

/** One check that could not run: where (null: the whole run), which, the codes it would have given, and why. */
export interface NotChecked {
  node: string | null
  check: CoverageCheck
  codes: string[]
  reason: string
  /** The run was expected to make it (not something the user opted out of, nor the nature of the input). */
  required: boolean
}

export interface CoverageInputs {
  context: Pick<CheckContext, 'observations' | 'modeNotRead' | 'service' | 'implementers' | 'nodes'>
  probes: ProbeRun
  /** How each selected node was read live, or why it was left API-only; absent for a snapshot. */
  readVia?: Map<string, NodeReadVia>
  /** A family of a dual-stack Service whose rules were not read or not judged on a node, or the --from Pod no walk
   * starts from (model/paths.ts PathClient), and why. */
  familiesNotJudged?: Array<{node: string | null; reason: string}>
  /** What is not checked of another implementer's state where the rest of it was judged (kube-router's glue). */
  implementerUnchecked?: Array<{node: string; reason: string}>
  /** The families of a dual-stack Service other than the primary (their DNS records, routes and sysctls are gaps of their own). */
  otherFamilies?: string[]
  /** The families whose rules were judged on each node, in any family's run (the primary run's nodes are one family's). */
  judgedFamilies: ReadonlyMap<string, ReadonlySet<IpFamily>>
  /**
   * Paths whose walk could not be decided (a rule the tracer cannot evaluate, a loop, the walk's budget), each by the
   * node it is undecided on and why, minus those whose KPD-PATH-UNDECIDED finding an ignore rule silenced.
   */
  undecidedPaths?: Array<{node: string; why: string}>
  /** The NetworkPolicies as read (absent: not judged in this run, as in a scan). */
  policy?: PolicyState
}

const entry = (node: string | null, check: CoverageCheck, reason: string, required: boolean): NotChecked => ({
  node,
  check,
  codes: [...COVERAGE_CHECKS[check]],
  reason,
  required,
})

/**
 * Every check the run could not make, per node, with the reason. Required: a check the run was expected to make and
 * could not (node unreadable, no way in, RBAC denial, tool missing, read failed, endpoint not answering, DNS not
 * asked, mode not judged). Not required: what the user opted out of (--via none, --no-probe) or what the input cannot
 * give by nature (a snapshot opens no connection; kube-proxy's Pod cannot open TCP to other addresses; a scan makes
 * no probes; lookups over the per-node cap).
 */
export function notChecked(inputs: CoverageInputs): NotChecked[] {
  const out: NotChecked[] = []
  const {context, probes, readVia} = inputs
  const notProxied = !!context.service.notProxied
  const primary = context.service.clusterIP ? familyOf(context.service.clusterIP) : undefined
  const families = [...(primary ? [primary === 6 ? 'IPv6' : 'IPv4'] : []), ...(inputs.otherFamilies ?? [])]
  for (const [name, via] of [...(readVia ?? new Map<string, NodeReadVia>())].sort(([a], [b]) => compareNames(a, b))) {
    if (via.transport === null)
      out.push(entry(name, 'node-read', `not read: ${via.why}`, via.why !== 'API-only (--via none)'))
  }
  for (const o of [...context.observations].sort((a, b) => compareNames(a.name, b.name))) {
    if (!o.reachable) {
      out.push(entry(o.name, 'node-read', `not read: ${o.error ?? 'unreadable'}`, true))
      continue
    }
    if (notProxied) continue
    // kube-proxy's own endpoints are not asked for where another implementer serves the node instead.
    const kubeProxyHere = context.implementers.find((i) => i.node === o.name)?.kubeProxyJudged ?? true
    out.push(
      ...nodeGaps(
        o,
        readVia?.get(o.name),
        `${context.service.name}.${context.service.namespace}.svc.`,
        families,
        kubeProxyHere,
      ),
    )
    // IPVS mode's sysctls (KPD-IPVS-SYSCTL) where sysctl could not answer: only a node judged in IPVS mode needs them.
    const sysctlsNotRead = o.ipvs?.sysctlsNotRead
    if (sysctlsNotRead && context.nodes.some((n) => n.name === o.name && n.mode.mode === 'ipvs'))
      out.push(entry(o.name, 'proxy-rules', sysctlsNotRead, true))
    // A backend save that could not run, of a family judged on the node: rules left in that backend are not looked for.
    // Not required: a host with one backend's tools is normal (kube-proxy's image carries both).
    // A backend save recorded but unreadable (a cut or edited copy) loses the same, said so.
    const backendsUnread = [
      ...(o.backendsNotRead ?? []),
      ...(o.backends ?? []).flatMap((b) =>
        b.unreadable ? [{family: b.family, backend: b.backend, reason: b.unreadable}] : [],
      ),
    ]
    for (const b of backendsUnread) {
      const judged = inputs.judgedFamilies.get(o.name)?.has(b.family === 6 ? 'IPv6' : 'IPv4') ?? false
      if (!judged || familySave(o, b.family)?.backend === b.backend) continue
      const backend = `${b.family === 6 ? 'ip6tables' : 'iptables'}-${b.backend}`
      out.push(
        entry(o.name, 'iptables-backend', `${b.reason}: kube-proxy rules left in ${backend} are not looked for`, false),
      )
    }
  }
  // No node read (every node unreadable, or left API-only by --via none): nothing on the nodes was checked, so the
  // run cannot say the Service works, whatever the user chose.
  if (!notProxied && !context.observations.some((o) => o.reachable))
    out.push(entry(null, 'node-read', 'no node was read: the packet path on the nodes is unchecked', true))
  for (const u of context.modeNotRead)
    out.push(entry(u.node, 'proxy-rules', `${u.mode} rules not judged: ${u.source}`, true))
  if (!notProxied)
    for (const f of inputs.familiesNotJudged ?? []) out.push(entry(f.node, 'proxy-rules', f.reason, true))
  if (!notProxied)
    for (const f of inputs.implementerUnchecked ?? []) out.push(entry(f.node, 'proxy-rules', f.reason, false))
  if (!notProxied) out.push(...probeGaps(probes, context.observations, context.service.clusterIP))
  // A path not walked to its end is not known to work: the headline must not say every path does.
  const undecided = new Map<string, {node: string; why: string}>()
  for (const u of inputs.undecidedPaths ?? []) undecided.set(`${u.node}\0${u.why}`, u)
  for (const u of undecided.values())
    out.push(entry(u.node, 'proxy-rules', `a packet path was not walked to its end: ${u.why}`, true))
  out.push(...policyGaps(inputs.policy))
  return out
}

/** NetworkPolicies or AdminNetworkPolicies not read, or Namespaces not read while a policy selects by namespace. */
function policyGaps(policy: PolicyState | undefined): NotChecked[] {
  if (!policy) return []
  if (policy.unread)
    return [entry(null, 'network-policy', `NetworkPolicies not read: ${policy.unread.reason}`, policy.unread.required)]
  const admin = policy.admin?.unread
  if (admin) return [entry(null, 'admin-network-policy', admin.reason, admin.required), ...namespaceGaps(policy)]
  return namespaceGaps(policy)
}

function namespaceGaps(policy: PolicyState): NotChecked[] {
  if (policy.namespacesUnread)
    return [
      entry(
        null,
        'network-policy',
        `Namespaces not read (a namespaceSelector decides nothing): ${policy.namespacesUnread}`,
        true,
      ),
    ]
  return []
}

/** Whether a sysctl read answered for the key, with a value or with its absence. */
const knows = (s: SysctlValues, key: string) => s.values.has(key) || s.absent.has(key)

/** What a read node could not give: its transport's missing tools, path reads, kube-proxy's endpoints, DNS per family. */
function nodeGaps(
  o: NodeObservation,
  via: NodeReadVia | undefined,
  dnsPrefix: string,
  families: string[],
  kubeProxyHere: boolean,
): NotChecked[] {
  const out: NotChecked[] = []
  // A node's DNS answer is for one name (a scan asks the DNS Service's own): only this Service's counts.
  const dns = o.dns?.name.startsWith(dnsPrefix) ? o.dns : undefined
  // A tool the transport went around ("… read from /proc/… instead") cost nothing. Without the CNI result cache the
  // hairpin check still maps pods through the FDB; a backend left unmapped on a port with hairpin off is a finding
  // (KPD-HAIRPIN-UNMAPPED, its evidence says the cache was not read), so the cache alone is no gap.
  for (const what of via?.notRead ?? []) {
    if (/ instead$/.test(what) || what.startsWith('/var/lib/cni/results ')) continue
    const check: CoverageCheck = /hairpin/.test(what)
      ? 'hairpin'
      : /DNS/.test(what)
        ? 'dns-from-node'
        : /sysctl/.test(what)
          ? 'sysctls'
          : 'node-read'
    if (check === 'dns-from-node' && dns?.method === 'none') continue
    out.push(entry(o.name, check, what, true))
  }
  // A section of the network read that failed (the FDB, the neighbours, the links) leaves pods unmapped to their ports.
  for (const f of o.network?.failed ?? []) out.push(entry(o.name, 'hairpin', notReadReason(f.command, f), true))
  const path = o.path
  if (!path)
    out.push(
      entry(
        o.name,
        'path-reads',
        'no packet-path reads were recorded for this node (an older bundle has no path-reads.json)',
        false,
      ),
    )
  else {
    if (path.sysctls?.status === 'not-read') out.push(entry(o.name, 'sysctls', path.sysctls.reason, true))
    // Only a bundle recorded before IPv6's keys were read lacks them: the nature of the input, so not required.
    else if (
      path.sysctls?.status === 'read' &&
      families.includes('IPv6') &&
      !knows(path.sysctls.value, FORWARDING_KEYS[6].forward)
    )
      out.push(
        entry(
          o.name,
          'sysctls',
          `IPv6 forwarding settings not read (${FORWARDING_KEYS[6].forward}, ${FORWARDING_KEYS[6].bridge}; recorded by a version that read IPv4's only)`,
          false,
        ),
      )
    if (path.routeTable?.status === 'not-read') out.push(entry(o.name, 'routes', path.routeTable.reason, true))
    if (path.routeTable6?.status === 'not-read') out.push(entry(o.name, 'routes', path.routeTable6.reason, true))
    // Only a bundle recorded before the IPv6 table was read lacks it: the nature of the input, so not required.
    else if (!path.routeTable6 && families.includes('IPv6'))
      out.push(
        entry(
          o.name,
          'routes',
          'IPv6 route table not read (recorded by a version that read the IPv4 table only): IPv6 endpoints reached by the default route alone are not told',
          false,
        ),
      )
    for (const l of path.routeLookups)
      if (l.result.status === 'not-read') out.push(entry(o.name, 'routes', l.result.reason, true))
    for (const c of path.conntrack)
      if (c.result.status === 'not-read') out.push(entry(o.name, 'conntrack', c.result.reason, true))
    for (const s of path.skipped) out.push(entry(o.name, 'routes', s, false))
  }
  const kp = kubeProxyHere ? o.kubeProxy : undefined
  if (kp?.healthzError)
    out.push(entry(o.name, 'kube-proxy-healthz', `kube-proxy's /healthz did not answer: ${kp.healthzError}`, true))
  if (kp?.metricsError)
    out.push(entry(o.name, 'kube-proxy-metrics', `kube-proxy's /metrics did not answer: ${kp.metricsError}`, true))
  if (dns?.method === 'none')
    out.push(
      entry(o.name, 'dns-from-node', `${dns.name} not asked of ${dns.server}: ${dns.error ?? 'no way to ask'}`, true),
    )
  else if (dns) {
    for (const family of families) {
      const type = family === 'IPv6' ? 'AAAA' : 'A'
      // Only a bundle recorded before AAAA questions lacks one: the nature of the input, so not required.
      if (!dns.answers.some((a) => a.type === type))
        out.push(
          entry(
            o.name,
            'dns-from-node',
            `${family} DNS: the ${type} record of ${dns.name} was not asked of ${dns.server} (recorded by a version that asked A only)`,
            false,
          ),
        )
    }
  }
  return out
}

/**
 * Probes not run at all (always the user's choice or the input's nature: --no-probe, a snapshot, a scan), a node not
 * probed, a target the transport would not open.
 */
/** What the kernel could not confirm of one node's probes. */
function kernelGaps(n: NodeProbes): NotChecked[] {
  const out: NotChecked[] = []
  // The probes' verdicts stand without it: what the kernel did is confirmation, not required.
  if (n.kernel && !n.kernel.read) out.push(entry(n.node, 'kernel-evidence', `not confirmed: ${n.kernel.reason}`, false))
  // Opted into, yet confirmation only: a node that cannot be traced does not fail the run.
  if (n.kernelTrace && !n.kernelTrace.traced) out.push(entry(n.node, 'kernel-trace', n.kernelTrace.reason, false))
  if (n.counters && !n.counters.read) out.push(entry(n.node, 'rule-counters', n.counters.reason, false))
  return out
}

/**
 * A snapshot's replayed kernel evidence: each read node's gaps as recorded, and a node whose bundle folder holds none
 * (collected without --probe, or by a version that did not record it) says so.
 */
function recordedGaps(
  recorded: RecordedProbes,
  observations: NodeObservation[],
  clusterIP: string | undefined,
): NotChecked[] {
  const out: NotChecked[] = []
  for (const o of [...observations].filter((x) => x.reachable).sort((a, b) => compareNames(a.name, b.name))) {
    // Recorded for this Service: probes of its ClusterIP (a bundle's evidence is of the Service it was collected for).
    const n = recorded.nodes.find(
      (x) => x.node === o.name && x.tallies.some((t) => t.target.kind !== 'endpoint' && t.target.host === clusterIP),
    )
    if (n) out.push(...kernelGaps(n))
    else
      out.push(
        entry(
          o.name,
          'kernel-evidence',
          'not recorded in the bundle (collected without --probe, or by a version that did not record it)',
          false,
        ),
      )
  }
  return out
}

function probeGaps(probes: ProbeRun, observations: NodeObservation[], clusterIP: string | undefined): NotChecked[] {
  if (!probes.ran)
    return [
      entry(null, 'live-probes', probes.reason, false),
      ...(probes.recorded ? recordedGaps(probes.recorded, observations, clusterIP) : []),
    ]
  const out: NotChecked[] = []
  for (const n of [...probes.nodes].sort((a, b) => compareNames(a.node, b.node))) {
    // A node read through kube-proxy's Pod or a debug Pod cannot open TCP to other addresses by nature: listed, not required.
    if (n.error) out.push(entry(n.node, 'live-probes', n.error, !/^not probed: read through /.test(n.error)))
    // One entry per node, however many targets the transport would not open (each refusal names its own target).
    const refused = n.tallies.filter((t) => t.notProbed)
    if (refused.length > 0) {
      const reasons = [...new Set(refused.map((t) => t.notProbed))]
      const more = reasons.length > 2 ? `; and ${reasons.length - 2} more` : ''
      out.push(
        entry(
          n.node,
          'live-probes',
          `${refused.length} of ${n.tallies.length} targets not probed: ${reasons.slice(0, 2).join('; ')}${more}`,
          true,
        ),
      )
    }
    out.push(...kernelGaps(n))
  }
  return out
}
