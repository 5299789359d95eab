import {existsSync, lstatSync, readdirSync} from 'node:fs'
import {join} from 'node:path'
import {readClusterState} from '../cluster/read-cluster.js'
import {IMPLEMENTER_READS} from '../model/implementers/index.js'
import {SnapshotClusterSource} from '../cluster/snapshot-source.js'
import {ValidatedClusterSource} from '../cluster/validated-source.js'
import type {ClusterState} from '../cluster/types.js'
import type {KubeConfig, V1EndpointSlice, V1Node} from '@kubernetes/client-node'
import {DiagnosisError} from '../errors.js'
import {errorRecording, type NodeFile, type NodeRecording} from '../node/read/node-files.js'
import {loadNodeBundle, type DumpMemoryBudget} from '../node/read/bundle.js'
import {parseNodeRecording} from '../node/read/recording.js'
import type {NodeObservation} from '../node/observation.js'
import type {DumpSource} from '../parse/dump-source.js'
import {selectNodes} from '../node/read/select-nodes.js'
import {transport, transportConnector, type NodeConnector, type NodeTarget} from '../node/transport/transports.js'
import {
  closeEarlyOpens,
  openEarly,
  readNodesThrough,
  type ChoiceContext,
  type EarlyOpens,
  type NodeReadVia,
  type NodeReads,
} from './choose-transport.js'
import type {CollectOptions, NodeCollection, PathTargets} from '../node/read/collect-node.js'
import type {ClusterSource} from '../cluster/cluster-source.js'
import type {NodeRead} from './watch-round.js'
import {agentStateReader} from './agent-state.js'
import {nodeAddress} from './node-address.js'
import {PROBES_SNAPSHOT, probeNodes, probeSettings, startProbes, type StartedProbes} from './probe-stage.js'
import type {NodeProbes, ProbeRun, RecordedProbes} from '../node/probe/tcp-probe.js'
import {readRecordedEvidence} from '../node/probe/recorded-evidence.js'
import {closingAfter, type NodeAccess} from '../node/transport/node-access.js'
import {isNodeName} from '../model/names.js'
import type {Reach} from '../model/reach.js'
import {serviceFamilies} from '../model/expected.js'
import {kubectlOf, liveReach, snapshotReach} from './reach.js'
import {policyClients, type ClientFlags, type LiveOptions} from './live-options.js'
import {predictedChains, rulesScopeOf} from '../model/rules-scope.js'
import type {RulesScope} from '../node/read/scoped-rules.js'

export interface Gathered {
  cluster: ClusterState
  observations: NodeObservation[]
  selectionNote?: string
  /** Which nodes' rules were read chain by chain, when any were. */
  rulesNote?: string
  warnings: string[]
  /** The live probe stage, when it was asked for. */
  probes?: ProbeRun
  /** How the user reaches the cluster and each node, for the commands the report prints. */
  reach: Reach
}

export interface GatheredLive extends Gathered {
  namespace: string
  /** Each node's raw reads by node name, for `collect` to write as a bundle. */
  recordings: Map<string, NodeRecording>
  /** How each selected node was read, or why it was left API-only. */
  readVia: Map<string, NodeReadVia>
}

export const NODES_DIR = 'nodes'

/** A node as a round of `svc --watch` left it: what the next round may keep. */
export interface KeptNode {
  collection: NodeCollection
  readVia: NodeReadVia
}

/** `svc --watch`: what one round reads again (diagnosis/watch-round.ts decides) and where it keeps the rest. */
export interface LiveRound {
  /** Where the cluster's objects are read (the watch's store over the objects kept); default: the API. */
  source?: ClusterSource
  /** How each node is read; a node with nothing kept is read in full whatever it says. */
  nodeRead: (name: string) => NodeRead
  /** The round before's nodes. */
  previous: Map<string, KeptNode>
}

/** The API client and SSH are loaded only for live reads: offline diagnosis starts faster without them. */
async function liveModules() {
  const [{LiveClusterSource, loadKubeConfig}, {collectNode}] = await Promise.all([
    import('../cluster/live-source.js'),
    import('../node/read/collect-node.js'),
  ])
  return {LiveClusterSource, loadKubeConfig, collectNode}
}

/** One Service live: the cluster's objects, its nodes read (and probed, when asked), and how the user reaches them. */
export async function gatherLive(name: string, opts: LiveOptions, round?: LiveRound): Promise<GatheredLive> {
  const {LiveClusterSource, loadKubeConfig} = await liveModules()
  const {kc, namespace: ctxNamespace} = loadKubeConfig(opts.cluster)
  const namespace = opts.cluster.namespace ?? ctxNamespace
  const source = new ValidatedClusterSource(
    round?.source ?? new LiveClusterSource(kc, opts.cluster.timeoutMs, opts.output.log),
  )
  const select = (nodes: V1Node[], slices: V1EndpointSlice[]) =>
    selectNodes(nodes, new Set(slices.flatMap((s) => (s.endpoints ?? []).map((e) => e.nodeName ?? ''))), {
      only: opts.access.nodes,
      all: opts.access.allNodes,
    })
  // The nodes' ways in (SSH: the configuration, the connection, `id -u`) start as soon as the nodes and the Service's
  // endpoints are known, while the rest of the API is read; a failure there is the node's, said by its read as before.
  let early: EarlyOpens | undefined
  let over = false
  const onNodesKnown = (nodes: V1Node[], slices: V1EndpointSlice[]) => {
    // Told after the run ended (another API read failed first): nothing is opened that nothing would close.
    if (over) return
    early = openEarly(nodeTargets(nodes, select(nodes, slices).names), choiceContext(opts, loadKubeConfig))
  }
  try {
    return await gatherLiveFrom({
      source,
      namespace,
      name,
      opts,
      round,
      kc,
      select,
      onNodesKnown: round ? undefined : onNodesKnown,
      early: () => early,
    })
  } finally {
    over = true
    await closeEarlyOpens(early)
  }
}

/** What gatherLive has made before the API is read. */
interface LiveStart {
  source: ValidatedClusterSource
  namespace: string
  name: string
  opts: LiveOptions
  round: LiveRound | undefined
  kc: KubeConfig
  /** The nodes read: where the Service has endpoints, or as --node and --all-nodes say. */
  select: (nodes: V1Node[], slices: V1EndpointSlice[]) => ReturnType<typeof selectNodes>
  /** Told the nodes and the Service's EndpointSlices while the rest of the API is read (readClusterState). */
  onNodesKnown: ((nodes: V1Node[], slices: V1EndpointSlice[]) => void) | undefined
  /** The nodes opened while the API was read, by the time it has been. */
  early: () => EarlyOpens | undefined
}

/** gatherLive once the API source is made. */
async function gatherLiveFrom({
  source,
  namespace,
  name,
  opts,
  round,
  kc,
  select,
  onNodesKnown,
  early,
}: LiveStart): Promise<GatheredLive> {
  const cluster = await readClusterState(source, namespace, name, {
    implementers: IMPLEMENTER_READS,
    policy: policyClients(opts.cluster.client, namespace),
    onNodesKnown,
  })
  const selection = select(cluster.nodes, cluster.slices)
  const dnsIP = cluster.dns.service?.spec?.clusterIP
  // A record for the IPv4 ClusterIP, AAAA for the IPv6 one: each family of the Service is judged on its own answer.
  const types = serviceFamilies(cluster.service).map((f) => (f.family === 'IPv6' ? ('AAAA' as const) : ('A' as const)))
  const dns =
    dnsIP && dnsIP !== 'None'
      ? {name: `${name}.${namespace}.svc.${cluster.clusterDomain}`, server: dnsIP, types}
      : undefined
  // Each node read through a transport that probes is probed on the read's own access while it reads.
  const probing = new Map<string, StartedProbes>()
  const settings = probeSettings(opts.cluster)
  const kernelTrace = opts.probes.kernelTrace && {
    dryRun: opts.probes.kernelTrace.dryRun,
    announce: opts.output.announce ?? (() => undefined),
  }
  const probeBeside = opts.probes.run
    ? (node: string, access: NodeAccess) => {
        const started = startProbes(cluster, node, access, settings, kernelTrace)
        probing.set(node, started)
        return started.probes
      }
    : undefined
  const rulesScope = opts.reads.scopeRules
    ? {...rulesScopeOf(cluster.service), predicted: predictedChains(cluster)}
    : undefined
  const {observations, recordings, reads} = await readNodesLive(
    cluster.nodes,
    selection.names,
    {...opts, reads: {...opts.reads, configuredProxyMode: cluster.proxyConfigMap && cluster.proxyConfig.mode}},
    dns,
    pathTargets(cluster),
    probeBeside,
    rulesScope,
    agentStateReader(cluster, () => kc, opts.cluster.timeoutMs, opts.output.log),
    round,
    early(),
  )
  const probes = opts.probes.run
    ? await probeNodes(
        cluster,
        observations,
        await probeConnector(reads.readVia, opts),
        {timeoutMs: opts.cluster.timeoutMs, concurrency: opts.access.concurrency},
        probing,
        kernelTrace,
      )
    : undefined
  const reach = await liveReach({...opts.cluster, sshConfig: opts.access.sshConfig}, reads.readVia, cluster.nodes)
  return {
    cluster,
    observations,
    recordings,
    readVia: reads.readVia,
    selectionNote: selection.note,
    rulesNote: chainByChainNote(observations),
    warnings: [...source.warnings(), ...hostKeyWarnings(opts.access), ...reads.warnings],
    namespace,
    probes,
    reach,
  }
}

/** What the report says of the nodes whose rules were read chain by chain (see readScopedRules). */
function chainByChainNote(observations: NodeObservation[]): string | undefined {
  const nodes = observations
    .filter((o) => o.iptables?.readChainByChain() || o.ip6tables?.readChainByChain())
    .map((o) => o.name)
  if (nodes.length === 0) return undefined
  return `rules read chain by chain on ${nodes.join(', ')}: only the chains this Service's packets can reach ("line N" counts lines of that read); --all-rules reads every rule`
}

/**
 * How probes reach each node: through the transport that read it, where that transport opens connections from the node
 * to other addresses (SSH). A node read another way (kube-proxy's Pod: a port-forward reaches only the node's loopback;
 * the debug Pod is gone by then) is not probed: its probe entry says so.
 */
async function probeConnector(readVia: Map<string, NodeReadVia>, opts: LiveOptions): Promise<NodeConnector> {
  const connectors = new Map<string, Promise<NodeConnector>>()
  return async (target) => {
    const via = readVia.get(target.name)?.transport
    if (!via || !transport(via).probes)
      throw new Error(
        `not probed: read through ${via ?? 'no transport'}, which cannot open connections from the node to other addresses`,
      )
    let connector = connectors.get(via)
    if (!connector) {
      connector = transportConnector(via, {
        access: opts.access,
        timeoutMs: opts.cluster.timeoutMs,
        kubectl: kubectlOf(opts.cluster),
        nodes: [],
        log: opts.output.log,
      }).catch((e: unknown) => {
        throw new DiagnosisError((e as Error).message, {cause: e})
      })
      connectors.set(via, connector)
    }
    return (await connector)(target)
  }
}

/**
 * What the packet-path reads look at: the endpoints' addresses, each ClusterIP with each port protocol, and the cluster
 * DNS Service's ClusterIPs over UDP (clients find the Service by its name: a stale DNS entry breaks its path too).
 */
function pathTargets(cluster: ClusterState): PathTargets {
  const spec = cluster.service.spec
  const clusterIPs = (spec?.clusterIPs ?? (spec?.clusterIP ? [spec.clusterIP] : [])).filter((ip) => ip !== 'None')
  const protocols = [...new Set((spec?.ports ?? []).map((p) => (p.protocol ?? 'TCP').toLowerCase()))]
    .filter((p) => p === 'tcp' || p === 'udp' || p === 'sctp')
    .sort()
  const dns = cluster.dns.service?.spec
  const dnsIPs = (dns?.clusterIPs ?? (dns?.clusterIP ? [dns.clusterIP] : [])).filter((ip) => ip !== 'None')
  const dnsUdp = (dns?.ports ?? []).some((p) => (p.protocol ?? 'TCP') === 'UDP')
  return {
    endpointAddresses: cluster.slices.flatMap((s) => (s.endpoints ?? []).flatMap((e) => e.addresses ?? [])),
    serviceAddresses: [
      ...clusterIPs.flatMap((address) => protocols.map((protocol) => ({address, protocol}))),
      ...(dnsUdp ? dnsIPs.map((address) => ({address, protocol: 'udp' as const})) : []),
    ],
  }
}

export function hostKeyWarnings(opts: {insecureIgnoreHostKey: boolean}): string[] {
  return opts.insecureIgnoreHostKey
    ? ['host keys are NOT checked (--insecure-ignore-host-key): a man-in-the-middle would go unnoticed']
    : []
}

/**
 * Reads the named nodes live, at most `concurrency` at once, kept in memory; each node's failure stays on that node.
 * Nodes left API-only (--via none, or no way in) have no observation; `reads.readVia` says why.
 */
export async function readNodesLive(
  nodes: V1Node[],
  names: string[],
  opts: Pick<LiveOptions, 'cluster' | 'access' | 'reads' | 'output'>,
  dns: CollectOptions['dns'],
  path?: PathTargets,
  /** Work to run on each node's access while it is read (the live probes), where its transport probes. */
  beside?: (name: string, access: NodeAccess) => Promise<unknown>,
  /** Only these chains of each node's iptables rules (see readScopedRules). */
  rulesScope?: RulesScope,
  /** What is read after each node (its implementer's agent: agent-state.ts), added to its recording. */
  afterRead?: (name: string, collection: NodeCollection) => Promise<NodeCollection>,
  /** svc --watch: the nodes kept whole from the round before, and those whose rules alone are read again. */
  round?: Pick<LiveRound, 'nodeRead' | 'previous'>,
  /** The nodes opened while the API was read (openEarly). */
  early?: EarlyOpens,
): Promise<{
  observations: NodeObservation[]
  recordings: Map<string, NodeRecording>
  reads: NodeReads
}> {
  const {collectNode, loadKubeConfig} = await liveModules()
  const kept = (name: string) => {
    const before = round?.previous.get(name)
    const how = round?.nodeRead(name) ?? 'full'
    // A node whose read failed has nothing to keep: it is read in full.
    return before?.collection.observation.reachable && how !== 'full' ? {how, before} : undefined
  }
  const keptWhole = names.filter((name) => kept(name)?.how === 'kept')
  const targets = nodeTargets(
    nodes,
    names.filter((name) => !keptWhole.includes(name)),
  )
  const progress = opts.output.onProgress
  const reads = await readNodesThrough(
    targets,
    choiceContext(opts, loadKubeConfig),
    async (name, connect, via) => {
      const startedAt = performance.now()
      progress?.({kind: 'node-read-started', node: name, total: names.length})
      const open =
        beside && transport(via).probes
          ? async () => {
              const access = await connect()
              return closingAfter(access, beside(name, access))
            }
          : connect
      const read = await collectNode(name, open, {
        timeoutMs: opts.cluster.timeoutMs,
        dns,
        path,
        proxyMode: opts.reads.proxyMode,
        configuredProxyMode: opts.reads.configuredProxyMode,
        rulesScope,
        keep: kept(name)?.before.collection.recording,
      })
      const collection = afterRead ? await afterRead(name, read) : read
      progress?.({
        kind: 'node-read-finished',
        node: name,
        ms: performance.now() - startedAt,
        ok: collection.observation.reachable,
      })
      return collection
    },
    early,
  )
  for (const name of keptWhole) {
    const {before} = kept(name)!
    reads.collected.set(name, before.collection)
    reads.readVia.set(name, before.readVia)
  }
  const read = names.filter((n) => reads.collected.has(n))
  return {
    observations: read.map((n) => reads.collected.get(n)!.observation),
    recordings: new Map(
      names.map((n) => [
        n,
        reads.collected.get(n)?.recording ?? errorRecording(reads.readVia.get(n)?.why ?? 'API-only'),
      ]),
    ),
    reads,
  }
}

/** The named nodes with the address the API gives each (where it gives one). */
function nodeTargets(nodes: V1Node[], names: string[]): NodeTarget[] {
  return names.map((name) => {
    const node = nodes.find((n) => n.metadata?.name === name)
    return {name, address: node && nodeAddress(node)}
  })
}

/** What the choice of each node's way in needs of a live run. */
function choiceContext(
  opts: Pick<LiveOptions, 'cluster' | 'access' | 'output'>,
  loadKubeConfig: (cluster: LiveOptions['cluster']) => {kc: KubeConfig},
): ChoiceContext {
  return {
    access: opts.access,
    timeoutMs: opts.cluster.timeoutMs,
    kubeConfig: () => loadKubeConfig(opts.cluster).kc,
    kubectl: kubectlOf(opts.cluster),
    announce: opts.output.announce,
    log: opts.output.log,
  }
}

export async function gatherSnapshot(
  dir: string,
  namespace: string,
  name: string,
  only?: string[],
  client?: ClientFlags,
): Promise<Gathered> {
  const snapshot = new SnapshotClusterSource(dir)
  snapshot.requireRecorded(namespace, name)
  const source = new ValidatedClusterSource(snapshot)
  const cluster = await readClusterState(source, namespace, name, {
    implementers: IMPLEMENTER_READS,
    policy: policyClients(client, namespace),
  })
  const observations = readSnapshotNodes(dir, only)
  const recorded = recordedProbes(dir, observations)
  return {
    cluster,
    observations,
    warnings: [...source.warnings(), ...recorded.warnings],
    reach: snapshotReach(snapshot.manifest()?.context),
    probes: {...PROBES_SNAPSHOT, recorded: recorded.probes},
  }
}

/**
 * The probes `collect --probe` recorded beside each read node's files, replayed as recorded (the earliest time is the
 * collection's); a file that is not one is a warning, and that node has none.
 */
export function recordedProbes(
  dir: string,
  observations: NodeObservation[],
): {probes: RecordedProbes; warnings: string[]} {
  const warnings: string[] = []
  const found: Array<{recordedAt: string; probes: NodeProbes}> = []
  for (const o of observations.filter((x) => x.reachable)) {
    try {
      const r = readRecordedEvidence(join(dir, NODES_DIR, o.name), o.name)
      if (r) found.push(r)
    } catch (e) {
      warnings.push(`${(e as Error).message}: its kernel evidence is not replayed`)
    }
  }
  const recordedAt = found.map((f) => f.recordedAt).sort()[0] ?? null
  return {probes: {recordedAt, nodes: found.map((f) => f.probes)}, warnings}
}

/** The nodes recorded in a snapshot (or only those named). */
function readSnapshotNodes(dir: string, only?: string[], budget?: DumpMemoryBudget): NodeObservation[] {
  return readSnapshotRecordings(dir, only, budget).map((r) => parseNodeRecording(r.name, r.rec, r.onDisk))
}

/** A snapshot node's files: in memory, or (large iptables dumps over the budget) left on disk. */
export interface SnapshotRecording {
  name: string
  rec: NodeRecording
  onDisk: Map<NodeFile, DumpSource>
}

/** The recordings of the nodes in a snapshot (or only those named); a node folder that cannot be read is its error. */
export function readSnapshotRecordings(dir: string, only?: string[], budget?: DumpMemoryBudget): SnapshotRecording[] {
  const nodesDir = join(dir, NODES_DIR)
  // A node is a folder (or a link where one was, refused below); a stray file (.DS_Store, notes) is no node.
  const recorded = existsSync(nodesDir)
    ? readdirSync(nodesDir, {withFileTypes: true})
        .filter((e) => (e.isDirectory() || e.isSymbolicLink()) && isNodeName(e.name))
        .map((e) => e.name)
        .sort()
    : []
  const names = only && only.length > 0 ? only : recorded
  if (names.length === 0) throw new DiagnosisError(`snapshot ${dir} holds no node folder under ${NODES_DIR}/`)
  const invalid = names.filter((n) => !isNodeName(n))
  if (invalid.length > 0)
    throw new DiagnosisError(
      `not a node name (RFC 1123 subdomain): ${invalid.map((n) => JSON.stringify(n)).join(', ')}`,
    )
  const unknown = names.filter((n) => !recorded.includes(n))
  if (unknown.length > 0)
    throw new DiagnosisError(
      `snapshot ${dir} holds no node ${unknown.join(', ')} (it holds ${recorded.join(', ') || 'none'})`,
    )
  return names.map((name) => {
    const nodeDir = join(nodesDir, name)
    if (!lstatSync(nodeDir).isDirectory())
      return {
        name,
        rec: errorRecording(`${NODES_DIR}/${name} is not a folder (symbolic links are not followed)`),
        onDisk: new Map(),
      }
    return {name, ...loadNodeBundle(nodeDir, budget)}
  })
}

/**
 * One node's reads, live and kept in memory, with the node's addresses from the cluster: read the way `svc` would read
 * it (--via and the access flags), or an error saying why it could not be.
 */
export async function readNodeLive(
  name: string,
  opts: Pick<LiveOptions, 'cluster' | 'access' | 'reads' | 'output'>,
): Promise<{obs: NodeObservation; addresses: string[]; warnings: string[]}> {
  const {LiveClusterSource, loadKubeConfig} = await liveModules()
  const {kc} = loadKubeConfig(opts.cluster)
  const nodes = await new ValidatedClusterSource(new LiveClusterSource(kc, opts.cluster.timeoutMs)).listNodes()
  const node = nodes.find((n) => n.metadata?.name === name)
  if (!node) throw new DiagnosisError(`node "${name}" not found in the cluster`)
  const {observations, reads} = await readNodesLive(nodes, [name], opts, undefined)
  const obs = observations[0]
  if (!obs) throw new DiagnosisError(`${name}: not read: ${reads.readVia.get(name)?.why ?? 'API-only'}`)
  if (!obs.reachable) throw new DiagnosisError(`${name}: ${obs.error ?? 'unreadable'}`)
  const addresses = (node.status?.addresses ?? [])
    .filter((a) => a.type === 'InternalIP' || a.type === 'ExternalIP')
    .map((a) => a.address)
  return {obs, addresses, warnings: [...hostKeyWarnings(opts.access), ...reads.warnings]}
}
