import type {Finding} from '../checks/check.js'
import type {Diagnosis} from '../diagnosis/diagnose.js'
import {codesExplaining} from '../checks/catalogue.js'
import {ENTRIES, type PathResult, type RemoteHalf} from '../model/paths.js'
import {serviceFamilies} from '../model/expected.js'
import {familyOf} from '../net/address.js'
import type {TraceResult} from '../trace/types.js'
import type {NodeImplementer} from '../model/implementers/index.js'
import {API_VERSION, type DocumentMeta} from './document.js'
import {joinHostPort} from '../net/host-port.js'
import type {ProbeRun} from '../node/probe/tcp-probe.js'
import type {NotChecked} from '../diagnosis/coverage.js'
import {kernelTrace, type KernelTraceItem} from './kernel-trace.js'

/** The JSON contract (README "JSON output"). The human report is rendered from this same object. */
export interface Report {
  apiVersion: typeof API_VERSION
  kind: 'ServiceReport'
  toolVersion: string
  /** When the report was made (ISO 8601, UTC). */
  time: string
  /** The kubeconfig context read; null for a snapshot. */
  context: string | null
  service: {
    namespace: string
    name: string
    type: string
    clusterIP: string | null
    /** Every ClusterIP (spec.clusterIPs), one per address family, the primary first; each family is judged. */
    clusterIPs: string[]
    ports: Array<{name: string; port: number; targetPort: string; protocol: string; nodePort: number | null}>
  }
  ok: boolean
  summary: string
  /** What to run or do first: the headline finding's check, fix and prose (as each finding has them). */
  next: NextStep | null
  proxy: {mode: string; source: string; masqueradeMark: string}
  endpoints: {ready: number; notReady: number; source: string}
  findings: Finding[]
  nodes: Array<{
    name: string
    reachable: boolean
    error: string | null
    mode: string | null
    modeSource: string | null
    /** Who implements Services on the node, and what said so; null where the node was not read. */
    implementer: ReportImplementer | null
  }>
  /**
   * Each entry point per node, as one path across two nodes: `remote` holds the second half on the node of each
   * endpoint on another node; `ok`/`breaksAt`/`breaksOn` give the first break across both (README "Paths").
   */
  paths: Array<{
    node: string
    entry: string
    port: string
    ok: boolean | null
    breaksAt: string | null
    /** The address family of the path's packet (a dual-stack Service has paths of both). */
    family: 'IPv4' | 'IPv6'
    /** Where the path's packet is sent: the ClusterIP, node address, LB or external IP, host:port. */
    destination: string
    /** The node where it breaks: `node`, or an endpoint's node when only that half breaks; null when breaksAt is. */
    breaksOn: string | null
    detail: string
    remote: RemoteHalf[]
    ignoredBy: string | null
    /** svc --from POD: the client the walk starts from ("shop/client-7d9 10.244.1.5 on node-a"); absent: the doctor's own. */
    source?: string
    trace?: TraceResult
  }>
  /** Findings silenced by --ignore or the config file: code, node, and the rule's source and reason. */
  ignored: Array<{code: string; node: string | null; source: string; reason: string | null}>
  /** Live probes from each node (connect-and-close), or why none were made. */
  probes: ProbeReport
  /** What the kernel's conntrack entries say of each probed Service address, set against the walk. */
  kernelTrace: KernelTraceItem[]
  /** The Service's name asked of cluster DNS from each node: one entry per record type asked (type null: nothing could be asked). */
  dns: Array<{
    node: string
    name: string
    server: string
    type: 'A' | 'AAAA' | null
    addresses: string[]
    rcode: string | null
    method: string
    error: string | null
  }>
  /**
   * Every check that could not run, per node (null: the whole run), with the codes it would have produced and why;
   * `required` ones keep the headline from saying ✓ and make the run incomplete (exit 3 unless `--fail-on` says otherwise).
   */
  notChecked: NotChecked[]
  notes: string[]
}

/** A finding's steps: a read-only `check`, a `fix` that changes the node or cluster, and/or prose (`text`). */
export type NextStep = Pick<Finding, 'check' | 'fix' | 'text'>

function nextStep(f: NextStep | undefined): NextStep | null {
  return f ? {check: f.check, fix: f.fix, text: f.text} : null
}

export interface ProbeReport {
  ran: boolean
  /** Why probes were not made (--no-probe, a snapshot), else null. */
  note: string | null
  settings: {vipAttempts: number; endpointAttempts: number; timeoutMs: number; concurrency: number} | null
  nodes: Array<{
    node: string
    via: string
    /** The node could not be reached for probing. */
    error: string | null
    targets: Array<{
      kind: 'ClusterIP' | 'NodePort' | 'endpoint'
      port: string
      address: string
      pod: string | null
      podNode: string | null
      attempts: number
      connected: number
      refused: number
      timedOut: number
      unreachable: number
      /** The transport would not open connections (e.g. sshd forbids forwarding): nothing was learnt. */
      notProbed: string | null
    }>
  }>
  notes: string[]
}

function probeReport(run: ProbeRun): ProbeReport {
  if (!run.ran) return {ran: false, note: run.reason, settings: null, nodes: [], notes: []}
  return {
    ran: true,
    note: null,
    settings: {...run.settings},
    nodes: run.nodes.map((n) => ({
      node: n.node,
      via: n.via,
      error: n.error ?? null,
      targets: n.tallies.map((t) => ({
        kind: t.target.kind,
        port: t.target.servicePort,
        address: joinHostPort(t.target.host, t.target.port),
        pod: t.target.pod ?? null,
        podNode: t.target.podNode ?? null,
        attempts: t.attempts,
        connected: t.connected,
        refused: t.refused,
        timedOut: t.timedOut,
        unreachable: t.unreachable,
        notProbed: t.notProbed ?? null,
      })),
    })),
    notes: run.notes,
  }
}

/** Where each live-probe finding says the path breaks, in the order a connection meets them. */
const PROBE_PLACES: Array<[code: string, place: (f: Finding) => string]> = [
  ['KPD-VIP-FAILS', (f) => `breaks in ${f.node}'s Service dataplane (live probe)`],
  ['KPD-ENDPOINT-CROSS-NODE', (f) => `breaks between ${f.node} and the endpoint's node (live probe)`],
  ['KPD-BACKEND-REFUSED', () => 'breaks at the backend (live probe)'],
  ['KPD-PROBE-CONTRADICTS', () => 'a live probe contradicts the static diagnosis'],
]

export interface ReportOptions {
  meta?: DocumentMeta
  explain?: boolean
  notes?: string[]
}

function firstLine(d: Diagnosis, findings: Finding[]): {summary: string; next: NextStep | null} {
  const svc = d.context.service
  const id = `${svc.namespace}/${svc.name}`
  const errors = findings.filter((f) => f.severity === 'error')
  const clusterError = errors.find((f) => f.node === null)
  if (clusterError) return {summary: `✗ ${id}: ${clusterError.message}`, next: nextStep(clusterError)}
  const order = (e: string) => ENTRIES.indexOf(e as never)
  const broken = d.paths
    .filter((p) => p.ok === false && !d.ignoredBreaks.has(p))
    .sort((a, b) => order(a.entry) - order(b.entry))[0]
  if (broken) {
    const explaining = codesExplaining(broken.breaksAt ?? 'unknown')
    const on = broken.breaksOn ?? broken.node
    const f =
      errors.find((x) => x.node === on && explaining.includes(x.code)) ?? errors.find((x) => x.node === on) ?? errors[0]
    const from = broken.source ? ` from ${broken.source}` : on === broken.node ? '' : ` from ${broken.node}`
    // A dual-stack Service: which family's path, by its destination.
    const to =
      serviceFamilies(d.cluster.service).length > 1 ? ` to ${joinHostPort(broken.packet.dst, broken.packet.dport)}` : ''
    return {
      summary: `✗ ${id}: ${broken.entry}${to} (${broken.port})${from} breaks at ${broken.breaksAt} on ${on}: ${broken.detail}`,
      next: nextStep(f),
    }
  }
  for (const [code, place] of PROBE_PLACES) {
    const f = errors.find((x) => x.code === code)
    if (f) return {summary: `✗ ${id}: ${place(f)}: ${f.message}`, next: nextStep(f)}
  }
  if (errors[0]) return {summary: `✗ ${id}: ${errors[0].message}`, next: nextStep(errors[0])}
  const readable = d.context.nodes.length
  const warnings = findings.filter((f) => f.severity === 'warning').length
  if (svc.notProxied) return {summary: `✓ ${id}: ${svc.notProxied}`, next: null}
  // Nodes read whose Services another implementer serves are read: what was not checked there is said below.
  const servedByOthers = d.context.implementers.some((i) => !i.kubeProxyJudged)
  if (readable === 0 && !servedByOthers)
    return {summary: `? ${id}: no node could be read, the packet path is unchecked`, next: nextStep(findings[0])}
  const required = d.notChecked.filter((n) => n.required).length
  if (required > 0) {
    const also = [
      warnings ? `${warnings} warning(s)` : '',
      d.ignored.length > 0 ? `${d.ignored.length} ignored` : '',
    ].filter(Boolean)
    return {
      summary: `? ${id}: no fault found in what was checked, but ${required} check(s) could not run (see Not checked)${also.length ? `; ${also.join(', ')}` : ''}`,
      next: nextStep(findings[0]),
    }
  }
  const silenced = [...new Set(d.ignoredBreaks.values())]
  const unfollowed = [...new Set(d.paths.flatMap((p) => p.remote.filter((h) => !h.followed).map((h) => h.node)))].sort()
  const halves = unfollowed.length > 0 ? ` (the second halves on ${unfollowed.join(', ')} not followed: not read)` : ''
  const sources = [...new Set(d.paths.flatMap((p) => (p.source ? [p.source] : [])))]
  const walked =
    sources.length > 0
      ? `every traced path from ${sources.join(', ')} works${halves}`
      : `every traced path works on ${readable} node(s)${halves}`
  const traced =
    silenced.length > 0 ? `${walked} except breaks silenced by ignore rules (${silenced.join(', ')})` : walked
  // Nodes judged in another implementer's own state (Cilium's agent) are said as such, not as traced paths.
  const cilium = d.context.cilium.length
  const agrees = cilium > 0 ? `Cilium's Service state agrees with the EndpointSlices on ${cilium} node(s)` : ''
  const works = readable === 0 && agrees ? agrees : [traced, agrees].filter(Boolean).join('; ')
  const ignoredCount = d.ignored.length > 0 ? `, ${d.ignored.length} ignored` : ''
  return {
    summary: `✓ ${id}: ${works}${probesAnswered(d)}${warnings ? `, ${warnings} warning(s)` : ''}${ignoredCount}`,
    next: null,
  }
}

/** ", every live probe connected (N targets from M nodes)" when probes ran and all connected. */
function probesAnswered(d: Diagnosis): string {
  if (!d.probes.ran) return ''
  const tallies = d.probes.nodes.flatMap((n) => n.tallies).filter((t) => t.attempts > 0)
  const nodes = d.probes.nodes.filter((n) => n.tallies.some((t) => t.attempts > 0)).length
  if (tallies.length === 0 || tallies.some((t) => t.connected < t.attempts)) return ''
  return `, every live probe connected (${tallies.length} targets from ${nodes} node(s))`
}

const pathFamily = (p: PathResult): 'IPv4' | 'IPv6' => (familyOf(p.packet.dst) === 6 ? 'IPv6' : 'IPv4')

export function buildReport(d: Diagnosis, opts: ReportOptions = {}): Report {
  const svc = d.cluster.service
  const expected = d.context.service
  const endpoints = expected.ports[0]?.allEndpoints ?? []
  const {summary, next} = firstLine(d, d.findings)
  const meta = opts.meta ?? {toolVersion: 'unknown', time: new Date().toISOString(), context: null}
  return {
    apiVersion: API_VERSION,
    kind: 'ServiceReport',
    toolVersion: meta.toolVersion,
    time: meta.time,
    context: meta.context,
    service: {
      namespace: expected.namespace,
      name: expected.name,
      type: svc.spec?.type ?? 'ClusterIP',
      clusterIP: expected.clusterIP ?? null,
      clusterIPs: serviceFamilies(svc).map((f) => f.clusterIP),
      ports: (svc.spec?.ports ?? []).map((p) => ({
        name: p.name ?? '',
        port: p.port,
        targetPort: String(p.targetPort ?? p.port),
        protocol: p.protocol ?? 'TCP',
        nodePort: p.nodePort ?? null,
      })),
    },
    ok: d.ok,
    summary,
    next,
    proxy: {
      mode: d.cluster.proxyConfig.mode || 'iptables',
      source: d.cluster.proxyConfig.source,
      masqueradeMark: `0x${expected.masqueradeMark.toString(16)}`,
    },
    endpoints: {
      ready: endpoints.filter((e) => e.ready).length,
      notReady: endpoints.filter((e) => !e.ready).length,
      source: d.cluster.endpointsSource,
    },
    findings: d.findings,
    nodes: d.context.observations.map((o) => {
      const view = d.context.nodes.find((n) => n.name === o.name)
      return {
        name: o.name,
        reachable: o.reachable,
        error: o.error ?? null,
        mode: view?.mode.mode ?? null,
        modeSource: view?.mode.source ?? null,
        implementer: reportImplementer(d.context.implementers.find((i) => i.node === o.name)),
      }
    }),
    paths: d.paths.map((p) => ({
      node: p.node,
      entry: p.entry,
      port: p.port,
      ok: p.ok,
      breaksAt: p.breaksAt,
      family: pathFamily(p),
      destination: joinHostPort(p.packet.dst, p.packet.dport),
      breaksOn: p.breaksOn,
      detail: p.detail,
      remote: p.remote.map(({trace, ...h}) => ({...h, ...(opts.explain && trace ? {trace} : {})})),
      ignoredBy: d.ignoredBreaks.get(p) ?? null,
      ...(p.source ? {source: p.source} : {}),
      ...(opts.explain ? {trace: p.trace} : {}),
    })),
    ignored: d.ignored.map((f) => ({
      code: f.code,
      node: f.node,
      source: f.ignoredBy.source,
      reason: f.ignoredBy.reason ?? null,
    })),
    probes: probeReport(d.probes),
    kernelTrace: kernelTrace(d.kernel),
    dns: d.context.observations.flatMap((o): Array<Report['dns'][number]> => {
      const q = o.dns
      if (!q) return []
      const base = {node: o.name, name: q.name, server: q.server, method: q.method}
      if (q.answers.length === 0) return [{...base, type: null, addresses: [], rcode: null, error: q.error ?? null}]
      return q.answers.map((a) => ({
        ...base,
        type: a.type,
        addresses: a.addresses,
        rcode: a.rcode ?? null,
        error: a.error ?? null,
      }))
    }),
    notChecked: d.notChecked,
    notes: opts.notes ?? [],
  }
}

/**
 * The exit code of a run whose diagnosis was made, as --fail-on says: 1 when a finding fails it (an error with
 * `error`, an error or a warning with `warning`), else 3 when it is incomplete (a required check could not run: a node
 * not read, a family's rules not judged) and `incomplete` is asked for, else 0. (2: the diagnosis could not be made.)
 */
export function exitCode(r: Pick<Report, 'findings' | 'notChecked'>, failOn: FailOn = DEFAULT_FAIL_ON): number {
  if (fails(r, failOn)) return 1
  return failOn.incomplete && isIncomplete(r) ? 3 : 0
}

/** A required check could not run: the run cannot say the Service works. */
function isIncomplete(r: Pick<Report, 'notChecked'>): boolean {
  return r.notChecked.some((n) => n.required)
}

/**
 * What makes a run fail (`--fail-on`): findings of this severity or worse (none: no finding) exit 1; with
 * `incomplete`, a required check that could not run exits 3.
 */
export interface FailOn {
  severity: 'none' | 'error' | 'warning'
  incomplete: boolean
}

/** `--fail-on`'s default: what CI should trust. */
export const FAIL_ON_DEFAULT = 'error,incomplete'
const DEFAULT_FAIL_ON: FailOn = {severity: 'error', incomplete: true}
const FAIL_ON_WORDS = ['none', 'error', 'warning', 'incomplete']

/**
 * `--fail-on`: a comma list of what fails the run, replacing the default `error,incomplete`: `error` (an error
 * finding, exit 1), `warning` (a warning or an error, exit 1), `incomplete` (a required check that could not run,
 * exit 3), or `none` alone (only exit 0 or 2). A string is the error message.
 */
export function parseFailOn(value: string): FailOn | string {
  const words = value
    .split(',')
    .map((w) => w.trim())
    .filter(Boolean)
  if (words.includes('skipped'))
    return `--fail-on skipped is now --fail-on incomplete (a required check that could not run exits 3; the default is ${FAIL_ON_DEFAULT})`
  const bad = words.find((w) => !FAIL_ON_WORDS.includes(w))
  if (bad !== undefined || words.length === 0 || (words.includes('none') && words.length > 1))
    return `--fail-on takes a comma list of error, warning, incomplete, or none alone (got "${value}"; the default is ${FAIL_ON_DEFAULT})`
  const severity = words.includes('warning') ? 'warning' : words.includes('error') ? 'error' : 'none'
  return {severity, incomplete: words.includes('incomplete')}
}

/** Whether one Service's findings fail the run under --fail-on (exit 1). */
export function fails(r: Pick<Report, 'findings'>, failOn: FailOn): boolean {
  if (failOn.severity === 'none') return false
  return r.findings.some((f) => f.severity === 'error' || (failOn.severity === 'warning' && f.severity === 'warning'))
}

/** `nodes[].implementer`: the implementer judged on the node, what said so, and any other active beside it. */
interface ReportImplementer {
  name: string
  evidence: string[]
  source: string
  /** The other implementers active on the node (KPD-TWO-IMPLEMENTERS), by name. */
  others: string[]
  /** Where kube-proxy does not implement Services: what a person runs to look at the implementer's state. */
  look: string | null
}

function reportImplementer(i: NodeImplementer | undefined): ReportImplementer | null {
  if (!i) return null
  return {
    name: i.name,
    evidence: i.evidence,
    source: i.source,
    others: i.active.filter((a) => a.name !== i.name).map((a) => a.name),
    look: i.look,
  }
}
