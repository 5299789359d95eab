import type {ClusterState} from '../cluster/types.js'
import {CHECKS} from '../checks/index.js'
import {explainsBreak} from '../checks/break-explained.js'
import {clientNotWalked, pathClient} from './client-walk.js'
import {toFinding, type CheckContext, type Finding, type NodeView} from '../checks/check.js'
import {expectedService, serviceFamilies, type IpFamily} from '../model/expected.js'
import {
  chooseMode,
  decideMode,
  proxyMode,
  type NodeFacts,
  type ProxyMode,
  type TableFamily,
} from '../model/modes/index.js'
import type {NodeObservation} from '../node/observation.js'
import {decideImplementer, type NodeImplementer} from '../model/implementers/index.js'
import {ciliumNodeView, type CiliumNodeView} from '../model/cilium-services.js'
import {kubeRouterNodeView, type KubeRouterNodeView} from '../model/kube-router-ipvs.js'
import {followEndpoints, tracePaths, walkArrivals, type PathNode, type PathResult} from '../model/paths.js'
import {endpointsForPort} from '../model/endpoints.js'
import {joinHostPort} from '../net/host-port.js'
import {familyOf} from '../net/address.js'
import {podIPsOn} from '../cluster/pod-status.js'
import {silencingRule, type IgnoreRule} from './ignore-rules.js'
import {nodeAddress} from './node-address.js'
import type {ProbeRun} from '../node/probe/tcp-probe.js'
import {probesOfFamily} from './probe-plan.js'
import {kernelVerdicts, type KernelVerdict} from '../checks/rules/kernel-disagrees.js'
import {DEFAULT_REACH, type Reach} from '../model/reach.js'
import type {NodeReadVia} from './choose-transport.js'
import {notChecked, type NotChecked} from './coverage.js'

export interface Diagnosis {
  cluster: ClusterState
  context: CheckContext
  findings: Finding[]
  /** Findings the user silenced, each with the rule that did: counted and shown on request, never in `findings`. */
  ignored: Array<Finding & {ignoredBy: IgnoreRule}>
  paths: PathResult[]
  /** Broken paths whose only explanation was silenced, with the code that explained them. */
  ignoredBreaks: Map<PathResult, string>
  /** The live probes the checks used, or why there were none. */
  probes: ProbeRun
  /** What the kernel's conntrack entries say of the probes of each Service address, set against the walk. */
  kernel: KernelVerdict[]
  /** Every check that could not run, per node, with the reason and whether the run was expected to make it. */
  notChecked: NotChecked[]
  ok: boolean
}

export interface DiagnoseOptions {
  /** What the user silenced (`--ignore` codes and the config file's scoped rules, checked against the catalogue). */
  ignore?: IgnoreRule[]
  /** --proxy-mode: trust this mode over what the node's rules say. */
  proxyMode?: ProxyMode
  /** The live probe stage's results (svc); without it the diagnosis is static. */
  probes?: ProbeRun
  /** --verbose: each node's mode decision and each silenced finding. */
  log?: (line: string) => void
  /** How each selected node was read live, or why it was left API-only (for what was not checked). */
  readVia?: Map<string, NodeReadVia>
  /** How the user reaches the cluster and the nodes (their flags, the way each node was read): for printed commands. */
  reach?: Reach
  /** A scan: the cluster DNS Service is judged as a Service of its own, not as part of every other Service's path. */
  dnsJudgedApart?: boolean
}

const PROBES_NOT_RUN: ProbeRun = {ran: false, reason: 'live probes were not run'}

/** One address family's half of a diagnosis: its nodes' dataplanes, paths and findings, and what it could not judge. */
interface FamilyRun {
  context: CheckContext
  notJudged: Array<{node: string | null; reason: string}>
}

/**
 * Model, trace and check one address family of the Service on every read node: the family's expected state
 * (ClusterIP, externalIPs, LB IPs, EndpointSlices), the family's rules (iptables-save or ip6tables-save, nft table
 * ip or ip6), the node's address of that family for NodePorts.
 */
function diagnoseFamily(
  cluster: ClusterState,
  observations: NodeObservation[],
  opts: DiagnoseOptions,
  family: IpFamily | undefined,
  label: string,
  probes: ProbeRun,
  implementers: NodeImplementer[],
): FamilyRun {
  const nodes: NodeView[] = []
  const paths: PathResult[] = []
  /** The read nodes, as first or second nodes of a path. */
  const pathNodes: PathNode[] = []
  const modeNotRead: CheckContext['modeNotRead'] = []
  const notJudged: FamilyRun['notJudged'] = []
  /** The read nodes whose rules are not judged for a reason other than not being read: why, for the paths ending there. */
  const readNotJudged = new Map<string, string>()
  const client = pathClient(cluster)
  const tableFamily: TableFamily = family === 'IPv6' ? 'ip6' : 'ip'
  const addressFamily = family === 'IPv6' ? 6 : family === 'IPv4' ? 4 : undefined
  for (const obs of observations) {
    if (!obs.reachable) continue
    // Another implementer serves Services here: kube-proxy's checks would judge rules nobody is meant to program.
    if (!implementers.find((i) => i.node === obs.name)?.kubeProxyJudged) continue
    const k8sNode = cluster.nodes.find((n) => n.metadata?.name === obs.name)
    const address = k8sNode ? nodeAddress(k8sNode, addressFamily) : undefined
    const facts: NodeFacts = {family: tableFamily, nodeAddress: address}
    const configured = {mode: cluster.proxyConfig.mode, source: cluster.proxyConfig.source}
    const choice = chooseMode(obs, facts, configured, opts.proxyMode)
    if (!choice) {
      const decision = decideMode(obs, facts, configured, opts.proxyMode)
      if (decision.unknown) {
        opts.log?.(`${obs.name}${label}: ${decision.unknown}`)
        readNotJudged.set(obs.name, `${obs.name}'s ${decision.unknownInShort}`)
        if (family) notJudged.push({node: obs.name, reason: decision.unknown})
        continue
      }
      opts.log?.(
        `${obs.name}${label}: proxy mode ${decision.mode} (${decision.source}): its data was not read, so its rules are not judged`,
      )
      const notRead = proxyMode(decision.mode).notRead(facts, decision.source, obs)
      if (notRead.finding) modeNotRead.push({node: obs.name, mode: decision.mode, ...notRead.finding})
      else if (family) notJudged.push({node: obs.name, reason: notRead.reason})
      continue
    }
    opts.log?.(
      `${obs.name}${label}: proxy mode ${choice.mode} (${choice.source})${choice.leftovers.length > 0 ? `; also found: ${choice.leftovers.join('; ')}` : ''}`,
    )
    const expected = expectedService(cluster, obs.name, family)
    const dataplane = choice.dataplane
    const view: NodeView = {
      name: obs.name,
      mode: choice,
      address,
      obs,
      dataplane,
      expected,
      programmed: expected.notProxied ? [] : dataplane.programmed(expected),
      infra: dataplane.infrastructure(),
    }
    nodes.push(view)
    const pathNode: PathNode = {
      node: obs.name,
      address,
      dataplane,
      k8sNode,
      network: obs.network,
      podIPsOnNode: podIPsOn(cluster.pods, obs.name),
    }
    pathNodes.push(pathNode)
    paths.push(...tracePaths({...pathNode, expected, ...(client ? {client} : {})}))
  }
  const service = expectedService(cluster, '', family)
  const unwalked = client && clientNotWalked(client, service, paths, nodes)
  if (unwalked) notJudged.push({node: client.node || null, reason: unwalked})
  const context: CheckContext = {
    cluster,
    service,
    nodes,
    observations,
    paths,
    halves: [],
    dnsArrivals: [],
    modeNotRead,
    findings: [],
    probes,
    reach: opts.reach ?? DEFAULT_REACH,
    dnsJudgedApart: opts.dnsJudgedApart ?? false,
    implementers,
    cilium: ciliumViews(cluster, observations, implementers, family),
    kubeRouter: kubeRouterViews(cluster, observations, implementers, family),
  }
  // One path across two nodes: each remote endpoint's half, judged on its node, before the checks read the paths.
  context.halves = followEndpoints(
    paths,
    pathNodes,
    context.service.ports.flatMap((port) => port.allEndpoints),
    readNotJudged,
  )
  if (!context.dnsJudgedApart && !isDnsService(cluster))
    context.dnsArrivals = walkArrivals(pathNodes, dnsEndpoints(cluster), 'tcp')
  // Silenced checks still run: what they find explains its path step, so the generic path-broken finding stays quiet too.
  for (const c of CHECKS) context.findings.push(...c.run(context).map((d) => toFinding(c.meta, d)))
  return {context, notJudged}
}

/** The nodes whose Services Cilium implements and whose agent's Service list was read, each compared with the slices. */
function ciliumViews(
  cluster: ClusterState,
  observations: NodeObservation[],
  implementers: NodeImplementer[],
  family: IpFamily | undefined,
): CiliumNodeView[] {
  return observations.flatMap((o) => {
    if (!o.reachable || !ciliumJudged(implementers, o)) return []
    const expected = expectedService(cluster, o.name, family)
    return expected.notProxied ? [] : [ciliumNodeView(expected, o.name, o.ciliumServices!)]
  })
}

/** The nodes whose Services kube-router serves and whose IPVS state was read, each read by the IPVS engine. */
function kubeRouterViews(
  cluster: ClusterState,
  observations: NodeObservation[],
  implementers: NodeImplementer[],
  family: IpFamily | undefined,
): KubeRouterNodeView[] {
  const addressFamily = family === 'IPv6' ? 6 : 4
  return observations.flatMap((o) => {
    if (!o.reachable || !kubeRouterJudged(implementers, o)) return []
    const expected = expectedService(cluster, o.name, family)
    const k8sNode = cluster.nodes.find((n) => n.metadata?.name === o.name)
    const address = k8sNode ? nodeAddress(k8sNode, addressFamily) : undefined
    const annotations = cluster.service.metadata?.annotations ?? {}
    return expected.notProxied ? [] : [kubeRouterNodeView(expected, annotations, o, address, addressFamily)]
  })
}

/**
 * kube-router serves the node's Services and its IPVS state (ipvsadm) was read: judged instead of kube-proxy's rules.
 * Beside an active kube-proxy (KPD-TWO-IMPLEMENTERS) kube-proxy's rules are judged, and the IPVS state with them.
 */
const kubeRouterJudged = (implementers: NodeImplementer[], o: NodeObservation) => {
  const i = implementers.find((x) => x.node === o.name)
  return !!o.ipvs && i?.name === 'kube-router' && !i.kubeProxyJudged
}

/** What the doctor does not check of kube-router on the nodes where its IPVS state was judged (never ✓, never ✗). */
function kubeRouterUnchecked(views: KubeRouterNodeView[]): Array<{node: string; reason: string}> {
  return views.map((v) => ({
    node: v.name,
    reason: `kube-router's IPVS virtual and real servers were judged; not checked: its iptables rules (the KUBE-ROUTER-SERVICES chain and the kube-router-svip and kube-router-svip-prt ipsets, the KUBE-ROUTER-HAIRPIN chain), the Service addresses on kube-dummy-if, masquerading and the packet walk${v.unjudged.length > 0 ? `; ${v.unjudged.join('; ')}` : ''}`,
  }))
}

/** Cilium serves the node's Services and its agent's Service list was read: its state is judged instead of kube-proxy's. */
const ciliumJudged = (implementers: NodeImplementer[], o: NodeObservation) =>
  !!o.ciliumServices && implementers.find((i) => i.node === o.name)?.name === 'cilium'

/** The nodes whose Services another implementer serves, or none: kube-proxy's rules were not judged there, and why. */
function implementerGaps(
  implementers: NodeImplementer[],
  observations: NodeObservation[],
): Array<{node: string; reason: string}> {
  return implementers
    .filter((i) => !i.kubeProxyJudged)
    .flatMap((i) => {
      const o = observations.find((x) => x.name === i.node)
      return o && (ciliumJudged(implementers, o) || kubeRouterJudged(implementers, o))
        ? []
        : [{i, notRead: o?.agentNotRead}]
    })
    .map(({i, notRead}) => ({
      node: i.node,
      reason:
        i.name === 'none'
          ? "no implementer of Services found: kube-proxy's rules were not judged"
          : `Services here are implemented by ${i.title}, not kube-proxy (${i.evidence.join('; ')}): kube-proxy's rules were not judged, and ${i.title}'s Service state was not read${notRead ? ` (${notRead})` : ''}; look with: ${i.look}`,
    }))
}

function isDnsService(cluster: ClusterState): boolean {
  const dns = cluster.dns.service?.metadata
  const svc = cluster.service.metadata
  return !!dns && dns.namespace === svc?.namespace && dns.name === svc?.name
}

/** The ready cluster DNS endpoints of its TCP port (the nodes' DNS question goes over TCP), of its ClusterIP's family. */
function dnsEndpoints(cluster: ClusterState) {
  const spec = cluster.dns.service?.spec
  const port = (spec?.ports ?? []).find((p) => (p.protocol ?? 'TCP') === 'TCP' && p.port === 53)
  const family = familyOf(spec?.clusterIP ?? '') === 6 ? 'IPv6' : 'IPv4'
  if (!port) return []
  return endpointsForPort(cluster.dns.slices, port, family)
    .filter((e) => e.ready)
    .map((e) => ({...e, address: joinHostPort(e.ip, e.port)}))
}

const findingKey = (f: Finding) => `${f.code}\0${f.node ?? ''}\0${f.message}\0${JSON.stringify([f.check, f.fix])}`

/**
 * The findings of every family as one list: a finding every family gives alike (a cluster fact, a node setting: the
 * same message and fix) once and as it is; one that only some families give says which ("node-b (IPv6): …"), so the two halves of a dual-stack
 * Service are told apart.
 */
function mergeFamilies(runs: Array<{family: IpFamily | undefined; findings: Finding[]}>): Finding[] {
  if (runs.length === 1) return runs[0].findings
  const keys = runs.map((r) => new Set(r.findings.map(findingKey)))
  const out: Finding[] = []
  runs.forEach((r, i) => {
    for (const f of r.findings) {
      const everywhere = keys.every((k) => k.has(findingKey(f)))
      if (everywhere && i > 0) continue
      out.push(everywhere ? f : {...f, message: labelled(f, r.family!)})
    }
  })
  return out
}

function labelled(f: Finding, family: IpFamily): string {
  return f.node && f.message.startsWith(`${f.node}: `)
    ? `${f.node} (${family}): ${f.message.slice(f.node.length + 2)}`
    : `${family}: ${f.message}`
}

/**
 * Paths whose walk could not be decided, by the node where (the path's own, or the endpoint's for a second half) and
 * why, unless the user silenced KPD-PATH-UNDECIDED on that node.
 */
function undecidedPaths(paths: PathResult[], ignored: Finding[]): Array<{node: string; why: string}> {
  return paths
    .filter((p) => p.ok === null && p.breaksAt === 'unknown')
    .map((p) => {
      const node = p.breaksOn ?? p.node
      const half = p.remote.find((h) => h.node === node && h.breaksAt === 'unknown')
      const detail = half?.detail ?? p.detail
      return {node, why: detail.replace(/^.*?(?:where the walk )?cannot tell: /, '')}
    })
    .filter((u) => !ignored.some((f) => f.code === 'KPD-PATH-UNDECIDED' && f.node === u.node))
}

/**
 * Model, trace, check: the one engine behind `svc`, live or from a snapshot. A dual-stack Service is judged once per
 * family (spec.clusterIPs), each family against its own rules; the findings and paths of all families make one report.
 *
 * A node's rules are parsed chain by chain as the walk reaches them, so a broken rule is met while judging, not while
 * reading: when judging fails, each read node is judged alone, and those that fail alone are reported unreadable (with
 * the file and line) while the others are judged. A failure no single node explains is the Service's (the caller's).
 */
export function diagnose(
  cluster: ClusterState,
  observations: NodeObservation[],
  opts: DiagnoseOptions = {},
): Diagnosis {
  try {
    return judge(cluster, observations, opts)
  } catch (e) {
    const unjudgeable = nodesNotJudgeable(cluster, observations, opts)
    if (unjudgeable.size === 0) throw e
    for (const [node, why] of unjudgeable) opts.log?.(`${node}: ${why}`)
    return judge(
      cluster,
      observations.map((o) => {
        const error = unjudgeable.get(o.name)
        return error === undefined ? o : {name: o.name, reachable: false, error}
      }),
      opts,
    )
  }
}

/** The read nodes whose judging fails on their own, each with why (the parser's file and line). */
function nodesNotJudgeable(
  cluster: ClusterState,
  observations: NodeObservation[],
  opts: DiagnoseOptions,
): Map<string, string> {
  const out = new Map<string, string>()
  for (const obs of observations) {
    if (!obs.reachable) continue
    try {
      judge(cluster, [obs], {...opts, log: undefined})
    } catch (e) {
      out.set(obs.name, `its rules could not be judged: ${(e as Error).message}`)
    }
  }
  return out
}

function judge(cluster: ClusterState, observations: NodeObservation[], opts: DiagnoseOptions): Diagnosis {
  const probes = opts.probes ?? PROBES_NOT_RUN
  const families = serviceFamilies(cluster.service)
  const dualStack = families.length > 1
  const implementers = observations
    .filter((o) => o.reachable)
    .map((o) => decideImplementer(cluster, o.name, o, observations))
  // Said where it changes what is judged: kube-proxy alone is what every run assumed before.
  for (const i of implementers.filter((x) => x.name !== 'kube-proxy' || x.active.length > 1))
    opts.log?.(
      `${i.node}: Services implemented by ${i.title} (${i.source}${i.evidence.length ? `: ${i.evidence.join('; ')}` : ''})`,
    )
  // The primary family (spec.clusterIP's) carries the cluster-wide facts and the coverage; the others add what differs
  // for their addresses (a finding both families give alike is listed once). Each family is judged on its own probes.
  const runs = (families.length > 0 ? families : [undefined]).map((f) =>
    diagnoseFamily(
      cluster,
      observations,
      opts,
      f?.family,
      dualStack && f ? ` (${f.family})` : '',
      dualStack && f ? probesOfFamily(probes, f.family === 'IPv6' ? 6 : 4) : probes,
      implementers,
    ),
  )
  const context = runs[0].context
  const paths = runs.flatMap((r) => r.context.paths)
  const all = mergeFamilies(runs.map((r, i) => ({family: families[i]?.family, findings: r.context.findings})))
  const rules = opts.ignore ?? []
  const namespace = cluster.service.metadata?.namespace ?? ''
  const name = cluster.service.metadata?.name ?? ''
  const findings: Finding[] = []
  const ignored: Diagnosis['ignored'] = []
  for (const f of all) {
    const rule = silencingRule(rules, f, namespace, name)
    if (rule) {
      ignored.push({...f, ignoredBy: rule})
      opts.log?.(
        `ignored ${f.code}${f.node ? ` [${f.node}]` : ''} (${rule.source}${rule.reason ? `: ${rule.reason}` : ''}): ${f.message}`,
      )
    } else findings.push(f)
  }
  const ignoredBreaks = new Map<PathResult, string>()
  for (const {context: ctx} of runs)
    for (const p of ctx.paths) {
      if (p.ok !== false) continue
      const explained = (f: Finding) => explainsBreak(ctx, f, p)
      const silenced = ignored.find(explained)
      if (silenced && !findings.some(explained)) ignoredBreaks.set(p, silenced.code)
    }
  const familiesNotJudged = [
    ...implementerGaps(implementers, observations),
    ...runs.flatMap((r) => r.notJudged),
  ].filter((g, i, all) => all.findIndex((x) => x.node === g.node && x.reason === g.reason) === i)
  const judgedFamilies = new Map<string, Set<IpFamily>>()
  runs.forEach((r, i) => {
    const family = families[i]?.family
    if (family)
      for (const n of r.context.nodes) judgedFamilies.set(n.name, (judgedFamilies.get(n.name) ?? new Set()).add(family))
  })
  const skipped = notChecked({
    context,
    judgedFamilies,
    probes,
    readVia: opts.readVia,
    familiesNotJudged,
    implementerUnchecked: kubeRouterUnchecked(context.kubeRouter),
    otherFamilies: families.slice(1).map((f) => f.family),
    undecidedPaths: undecidedPaths(paths, ignored),
    ...(cluster.policy ? {policy: cluster.policy} : {}),
  })
  for (const n of skipped)
    opts.log?.(
      `not checked${n.required ? '' : ' (not required)'}: ${n.check}${n.node ? ` on ${n.node}` : ''}: ${n.reason}`,
    )
  return {
    cluster,
    context,
    findings,
    ignored,
    paths,
    ignoredBreaks,
    probes,
    kernel: runs.flatMap((r) => kernelVerdicts(r.context)),
    notChecked: skipped,
    ok: !findings.some((f) => f.severity === 'error'),
  }
}
