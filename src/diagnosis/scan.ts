import type {V1Service} from '@kubernetes/client-node'
import {CachedClusterSource} from '../cluster/cached-source.js'
import type {ClusterSource} from '../cluster/cluster-source.js'
import {parseLabelSelector} from '../cluster/label-selector.js'
import {readClusterState} from '../cluster/read-cluster.js'
import {IMPLEMENTER_READS} from '../model/implementers/index.js'
import {SnapshotClusterSource} from '../cluster/snapshot-source.js'
import {ValidatedClusterSource, type SkippedObject} from '../cluster/validated-source.js'
import type {ClusterState} from '../cluster/types.js'
import {DiagnosisError} from '../errors.js'
import {notProxiedReason} from '../model/expected.js'
import {parseNodeRecording} from '../node/read/recording.js'
import type {NodeObservation} from '../node/observation.js'
import type {PathTargets} from '../node/read/collect-node.js'
import {selectNodes} from '../node/read/select-nodes.js'
import {shareNodeReads, type SharedNodeReads} from '../node/read/shared-reads.js'
import type {DiagnoseOptions} from './diagnose.js'
import {agentStateReader} from './agent-state.js'
import {hostKeyWarnings, readNodesLive, readSnapshotRecordings, recordedProbes} from './gather.js'
import type {LiveOptions, ProgressEvent} from './live-options.js'
import {judgeService, type ServiceOutcome, type ServiceState, type Summarise} from './judge-services.js'
import {liveReachData, reachOf, snapshotReachData, type ReachData} from './reach.js'
import {PROBES_SNAPSHOT} from './probe-stage.js'
import {judgeOnThreads, scanThreads, type SummariseRecipe} from './scan-threads.js'
import type {ProbeRun} from '../node/probe/tcp-probe.js'

export interface ScanTarget {
  /** One namespace, or every namespace when undefined (-A). */
  namespace: string | undefined
  /** A label selector on the Services (-l). */
  selector?: string
  /** Only these Service names (--services). */
  services?: string[]
}

/** What a scan keeps of each Service's diagnosis, and how its worker threads make the same (without: one thread). */
export interface Keep<R> {
  summarise: Summarise<R>
  recipe?: SummariseRecipe
}

export interface ScanResult<R> {
  outcomes: Array<ServiceOutcome<R>>
  observations: NodeObservation[]
  selectionNote?: string
  warnings: string[]
  notes: string[]
}

/**
 * Per-Service DNS lookups are not made by a scan (they would be one lookup per Service per node): the scan asks the
 * cluster DNS Service's own name from each node instead, and each Service's DNS checks see no per-Service answer.
 */
const SCAN_NOTES = [
  "a scan asks cluster DNS for its own Service name from each node, not each Service's name (use `svc` for that)",
]

/** A scan opens no connection from the nodes: each Service is judged on what was read. */
const PROBES_NOT_RUN_BY_SCAN: ProbeRun = {
  ran: false,
  reason: 'a scan runs no live probes (svc runs them): the diagnosis is static only',
}

/**
 * A scan reads each Service's own chains from every node's dump: dumps up to this many bytes in all are loaded into
 * memory (one read each) rather than read from disk chain by chain (one read per chain per Service per node).
 */
const SCAN_DUMPS_IN_MEMORY_BYTES = 1 << 30

export interface ScanThreadOptions {
  /** Threads to judge the Services on (--threads); by default one per core (up to 4) when there are many. */
  threads?: number
}

/** Every matching Service of a live cluster (`target`), each node read once and shared by all of them. */
export async function scanLive<R>(
  live: LiveOptions,
  target: ScanTarget,
  opts: DiagnoseOptions & ScanThreadOptions,
  keep: Keep<R>,
): Promise<ScanResult<R>> {
  const [{LiveClusterSource, loadKubeConfig}] = await Promise.all([import('../cluster/live-source.js')])
  const {kc} = loadKubeConfig(live.cluster)
  const validated = new ValidatedClusterSource(new LiveClusterSource(kc, live.cluster.timeoutMs, live.output.log))
  const source = new CachedClusterSource(validated)
  const states = await readStates(source, target, () => validated.skipped())
  const nodes = await source.listNodes()
  const endpointNodes = new Set(
    states.flatMap((s) =>
      s.state ? s.state.slices.flatMap((sl) => (sl.endpoints ?? []).map((e) => e.nodeName ?? '')) : [],
    ),
  )
  const selection = selectNodes(nodes, endpointNodes, {only: live.access.nodes, all: live.access.allNodes})
  const dns = dnsSelfLookup(states.find((s) => s.state)?.state)
  const cluster = states.find((s) => s.state)?.state
  const {observations, recordings, reads} = await readNodesLive(
    nodes,
    selection.names,
    live,
    dns,
    scanPathTargets(states),
    undefined,
    undefined,
    cluster && agentStateReader(cluster, () => kc, live.cluster.timeoutMs, live.output.log),
  )
  const readVia = reads.readVia
  const reach = await liveReachData({...live.cluster, sshConfig: live.access.sshConfig}, readVia, nodes)
  const sharedNodes = () => observations.map((o) => shareNodeReads(o.name, recordings.get(o.name)!))
  return {
    outcomes: await judge(
      states,
      {observations, sharedNodes},
      {...opts, readVia, probes: PROBES_NOT_RUN_BY_SCAN, onProgress: live.output.onProgress},
      reach,
      keep,
      opts,
    ),
    observations,
    selectionNote: selection.note,
    warnings: [...validated.warnings(), ...hostKeyWarnings(live.access), ...reads.warnings],
    notes: SCAN_NOTES,
  }
}

/** Every matching Service recorded in a snapshot bundle. */
export async function scanSnapshot<R>(
  dir: string,
  target: ScanTarget,
  keep: Keep<R>,
  opts: DiagnoseOptions & ScanThreadOptions & {nodes?: string[]; onProgress?: (e: ProgressEvent) => void} = {},
): Promise<ScanResult<R>> {
  const snapshot = new SnapshotClusterSource(dir)
  const recorded = snapshot.manifest()?.services
  const validated = new ValidatedClusterSource(snapshot)
  const source = new CachedClusterSource(validated)
  const states = await readStates(source, target, () => validated.skipped(), recorded)
  const recordings = readSnapshotRecordings(dir, opts.nodes, {bytes: SCAN_DUMPS_IN_MEMORY_BYTES})
  const observations = recordings.map((r) => parseNodeRecording(r.name, r.rec, r.onDisk))
  const sharedNodes = () => recordings.map((r) => shareNodeReads(r.name, r.rec, r.onDisk))
  // The same replay as svc --snapshot gives each Service (the evidence is of the Service collected).
  const evidence = recordedProbes(dir, observations)
  const reach = snapshotReachData(snapshot.manifest()?.context)
  return {
    outcomes: await judge(
      states,
      {observations, sharedNodes},
      {...opts, probes: {...PROBES_SNAPSHOT, recorded: evidence.probes}},
      reach,
      keep,
      opts,
    ),
    observations,
    warnings: [...validated.warnings(), ...evidence.warnings],
    notes: SCAN_NOTES,
  }
}

/**
 * The matching Services; of a snapshot, only those it was recorded for (the others lack their Pods). A Service left
 * out of the list for a wrong-typed field (`skipped`) is one of them, unreadable, when its name is known: it is not
 * judged, and the others are.
 */
async function readStates(
  source: ClusterSource,
  target: ScanTarget,
  skipped: () => SkippedObject[],
  recorded?: string[],
): Promise<ServiceState[]> {
  const selects = target.selector ? parseLabelSelector(target.selector) : () => true
  const listed = await source.listServices(target.namespace)
  const unreadable = new Map<V1Service, string>()
  for (const s of skipped())
    if (s.kind === 'Service' && s.name !== undefined && s.namespace !== undefined) {
      const service: V1Service = {metadata: {namespace: s.namespace, name: s.name}}
      unreadable.set(service, `the Service cannot be read: ${s.problem}`)
    }
  const all = [...listed, ...unreadable.keys()].filter(
    (s) => !recorded || recorded.includes(`${s.metadata?.namespace}/${s.metadata?.name}`),
  )
  const wanted = all
    .filter((s) => selects(s.metadata?.labels))
    .filter((s) => !target.services || target.services.includes(s.metadata?.name ?? ''))
    .sort((a, b) =>
      `${a.metadata?.namespace}/${a.metadata?.name}`.localeCompare(`${b.metadata?.namespace}/${b.metadata?.name}`),
    )
  const missing = (target.services ?? []).filter((name) => !all.some((s) => s.metadata?.name === name))
  if (missing.length > 0)
    throw new DiagnosisError(
      `--services names Service(s) not found in ${target.namespace ? `namespace "${target.namespace}"` : 'any namespace'}: ${missing.join(', ')}`,
    )
  if (wanted.length === 0)
    throw new DiagnosisError(
      `no Service matches in ${target.namespace ? `namespace "${target.namespace}"` : 'any namespace'}${target.selector ? ` with -l ${target.selector}` : ''}`,
    )
  return Promise.all(
    wanted.map(async (service): Promise<ServiceState> => {
      const problem = unreadable.get(service)
      if (problem) return {service, unreadable: problem}
      if (notProxiedReason(service)) return {service}
      try {
        return {
          service,
          state: await readClusterState(source, service.metadata?.namespace ?? '', service.metadata?.name ?? '', {
            implementers: IMPLEMENTER_READS,
          }),
        }
      } catch (e) {
        return {service, unreadable: (e as Error).message}
      }
    }),
  )
}

/**
 * Judges every Service on the nodes' shared observations, in order of `states`; on several threads when asked or when
 * there are many (each worker thread parses the nodes' reads itself, from memory shared with this one).
 */
async function judge<R>(
  states: ServiceState[],
  nodes: {observations: NodeObservation[]; sharedNodes: () => SharedNodeReads[]},
  opts: DiagnoseOptions & {onProgress?: (e: ProgressEvent) => void},
  reach: ReachData,
  keep: Keep<R>,
  {threads: requested}: ScanThreadOptions,
): Promise<Array<ServiceOutcome<R>>> {
  const {onProgress, ...diagnoseOptions} = opts
  // The cluster DNS Service is one of the Services a scan judges (when it selects it): its own faults stay on it.
  const withReach = {...diagnoseOptions, reach: reachOf(reach), dnsJudgedApart: true}
  const outcomes: Array<ServiceOutcome<R>> = new Array(states.length)
  let judged = 0
  const onJudged = (index: number, outcome: ServiceOutcome<R>) => {
    outcomes[index] = outcome
    judged++
    onProgress?.({
      kind: 'service-diagnosed',
      service: `${outcome.namespace}/${outcome.name}`,
      index: judged,
      total: states.length,
    })
  }
  const diagnosable = states.filter((s) => s.state).length
  const threads = keep.recipe ? scanThreads(requested, diagnosable) : 1
  opts.log?.(`${diagnosable} of ${states.length} Service(s) to diagnose, on ${threads} thread(s)`)
  if (threads > 1) {
    const perThread = await judgeOnThreads({
      states,
      observations: nodes.observations,
      sharedNodes: nodes.sharedNodes,
      opts: withReach,
      reach,
      summarise: keep.summarise,
      recipe: keep.recipe!,
      threads,
      onJudged,
    })
    opts.log?.(`Services judged per thread: ${perThread.join(', ')}`)
  } else states.forEach((s, i) => onJudged(i, judgeService(s, nodes.observations, withReach, keep.summarise)))
  return outcomes
}

/**
 * The packet-path reads of a scan, made once per node for every Service: the sysctls and routes of every endpoint
 * (the per-node cap of route lookups applies; the rest are listed as skipped), and conntrack only for the UDP and SCTP
 * ClusterIPs: a TCP entry to an old address is never judged (a new connection takes a new entry), so reading conntrack
 * for each TCP Service would cost one read per Service and find nothing.
 */
function scanPathTargets(states: ServiceState[]): PathTargets {
  const diagnosed = states.flatMap((s) => (s.state ? [s.state] : []))
  const endpointAddresses = [
    ...new Set(
      diagnosed.flatMap((c) => c.slices.flatMap((sl) => (sl.endpoints ?? []).flatMap((e) => e.addresses ?? []))),
    ),
  ].sort()
  const serviceAddresses = diagnosed.flatMap((c) => {
    const spec = c.service.spec
    const ips = (spec?.clusterIPs ?? (spec?.clusterIP ? [spec.clusterIP] : [])).filter((ip) => ip !== 'None')
    const protocols = [...new Set((spec?.ports ?? []).map((p) => (p.protocol ?? 'TCP').toLowerCase()))]
      .filter((p) => p === 'udp' || p === 'sctp')
      .sort() as Array<'udp' | 'sctp'>
    return ips.flatMap((address) => protocols.map((protocol) => ({address, protocol})))
  })
  return {endpointAddresses, serviceAddresses}
}

/** The cluster DNS Service's own name, asked from each node once. */
function dnsSelfLookup(state: ClusterState | undefined): {name: string; server: string} | undefined {
  const dns = state?.dns.service
  const server = dns?.spec?.clusterIP
  if (!dns || !server || server === 'None') return undefined
  return {name: `${dns.metadata?.name}.${dns.metadata?.namespace}.svc.${state.clusterDomain}`, server}
}
