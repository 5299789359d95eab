import type {ClusterState} from '../cluster/types.js'
import {CHECKS} from '../checks/index.js'
import {codesExplaining} from '../checks/catalogue.js'
import {toFinding, type CheckContext, type Finding, type NodeView} from '../checks/check.js'
import {expectedService, serviceFamilies} from '../model/expected.js'
import {chooseMode, decideMode, type NodeFacts, type ProxyMode} from '../model/modes/index.js'
import type {NodeObservation} from '../node/bundle.js'
import {followEndpoints, tracePaths, type PathResult} from '../model/paths.js'
import {pathNodes} from '../checks/rules/filter-drop.js'
import {silencingRule, type IgnoreRule} from './ignore-rules.js'
import {nodeAddress} from './node-address.js'
import type {ProbeRun} from '../node/tcp-probe.js'
import {DEFAULT_REACH, type Reach} from '../model/reach.js'
import type {ProbeAware} from '../checks/rules/probe-evidence.js'
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
}

const PROBES_NOT_RUN: ProbeRun = {ran: false, reason: 'live probes were not run'}

/** Model, trace, check: the one engine behind `svc`, live or from a snapshot. */
export function diagnose(cluster: ClusterState, observations: NodeObservation[], opts: DiagnoseOptions = {}): Diagnosis {
  const nodes: NodeView[] = []
  const paths: PathResult[] = []
  const unsupported: CheckContext['unsupported'] = []
  for (const obs of observations) {
    if (!obs.reachable) continue
    const k8sNode = cluster.nodes.find((n) => n.metadata?.name === obs.name)
    const facts: NodeFacts = {family: (cluster.service.spec?.clusterIP ?? '').includes(':') ? 'ip6' : 'ip', nodeAddress: k8sNode ? nodeAddress(k8sNode) : undefined}
    const configured = {mode: cluster.proxyConfig.mode, source: cluster.proxyConfig.source}
    const choice = chooseMode(obs, facts, configured, opts.proxyMode)
    if (!choice) {
      const decision = decideMode(obs, facts, configured, opts.proxyMode)
      opts.log?.(`${obs.name}: proxy mode ${decision.mode} (${decision.source}): its data was not read, so its rules are not judged`)
      if (decision.mode === 'ipvs') unsupported.push({node: obs.name, mode: 'ipvs', source: `${decision.source}; but no ipvsadm output was read`})
      continue
    }
    opts.log?.(`${obs.name}: proxy mode ${choice.mode} (${choice.source})${choice.leftovers.length > 0 ? `; also found: ${choice.leftovers.join('; ')}` : ''}`)
    const expected = expectedService(cluster, obs.name)
    const dataplane = choice.dataplane
    const view: NodeView = {
      name: obs.name,
      mode: choice,
      address: k8sNode ? nodeAddress(k8sNode) : undefined,
      obs,
      dataplane,
      expected,
      programmed: expected.notProxied ? [] : dataplane.programmed(expected),
      infra: dataplane.infrastructure(),
    }
    nodes.push(view)
    paths.push(
      ...tracePaths({
        node: obs.name,
        address: view.address,
        k8sNode,
        dataplane,
        expected,
        network: obs.network,
        podIPsOnNode: cluster.pods.filter((p) => p.spec?.nodeName === obs.name && p.status?.podIP).map((p) => p.status!.podIP!),
      }),
    )
  }
  const probes = opts.probes ?? PROBES_NOT_RUN
  const context: CheckContext & ProbeAware = {cluster, service: expectedService(cluster, ''), nodes, observations, paths, unsupported, findings: [], probes, reach: opts.reach ?? DEFAULT_REACH}
  // One path across two nodes: each remote endpoint's half, judged on its node, before the checks read the paths.
  followEndpoints(
    paths,
    pathNodes(context),
    context.service.ports.flatMap((port) => port.allEndpoints),
  )
  // Silenced checks still run: what they find explains its path step, so the generic path-broken finding stays quiet too.
  for (const c of CHECKS) context.findings.push(...c.run(context).map((d) => toFinding(c.meta, d)))
  const rules = opts.ignore ?? []
  const namespace = cluster.service.metadata?.namespace ?? ''
  const name = cluster.service.metadata?.name ?? ''
  const findings: Finding[] = []
  const ignored: Diagnosis['ignored'] = []
  for (const f of context.findings) {
    const rule = silencingRule(rules, f, namespace, name)
    if (rule) {
      ignored.push({...f, ignoredBy: rule})
      opts.log?.(`ignored ${f.code}${f.node ? ` [${f.node}]` : ''} (${rule.source}${rule.reason ? `: ${rule.reason}` : ''}): ${f.message}`)
    } else findings.push(f)
  }
  const ignoredBreaks = new Map<PathResult, string>()
  for (const p of paths) {
    if (p.ok !== false || p.breaksAt === null) continue
    const explaining = codesExplaining(p.breaksAt)
    const explained = (f: Finding) => f.severity === 'error' && (f.node === (p.breaksOn ?? p.node) || f.node === null) && explaining.includes(f.code)
    const silenced = ignored.find(explained)
    if (silenced && !findings.some(explained)) ignoredBreaks.set(p, silenced.code)
  }
  // Only the primary family (spec.clusterIP) is judged: every other family of a dual-stack Service is said to be unchecked.
  const familiesNotJudged = serviceFamilies(cluster.service)
    .slice(1)
    .flatMap(({family, clusterIP}) =>
      observations
        .filter((o) => o.reachable)
        .map((o) => ({node: o.name, reason: `${family} rules not read (${family === 'IPv6' ? 'ip6tables-save' : 'iptables-save'}): ${family} ClusterIP ${clusterIP} not judged`})),
    )
  const skipped = notChecked({context, probes, readVia: opts.readVia, familiesNotJudged})
  for (const n of skipped) opts.log?.(`not checked${n.required ? '' : ' (not required)'}: ${n.check}${n.node ? ` on ${n.node}` : ''}: ${n.reason}`)
  return {cluster, context, findings, ignored, paths, ignoredBreaks, probes, notChecked: skipped, ok: !findings.some((f) => f.severity === 'error')}
}
