import {existsSync, lstatSync, readdirSync} from 'node:fs'
import {join} from 'node:path'
import {readClusterState} from '../cluster/read-cluster.js'
import {SnapshotClusterSource} from '../cluster/snapshot-source.js'
import type {ClusterState} from '../cluster/types.js'
import type {V1Node} from '@kubernetes/client-node'
import {DiagnosisError} from '../errors.js'
import {errorRecording, type NodeFile, type NodeRecording} from '../node/read/node-files.js'
import {loadNodeBundle, type DumpMemoryBudget} from '../node/read/bundle.js'
import {parseNodeRecording} from '../node/read/recording.js'
import type {NodeObservation} from '../node/observation.js'
import type {DumpSource} from '../parse/dump-source.js'
import {selectNodes} from '../node/read/select-nodes.js'
import {transportConnector, type NodeConnector} from '../node/transport/transports.js'
import {readNodesThrough, type NodeReadVia, type Via} from './choose-transport.js'
import type {CollectOptions, PathTargets} from '../node/read/collect-node.js'
import {nodeAddress} from './node-address.js'
import {probeNodes, probeSettings, startProbes, type StartedProbes} from './probe-stage.js'
import type {ProbeRun} from '../node/probe/tcp-probe.js'
import {closingAfter, type NodeAccess} from '../node/transport/node-access.js'
import {isNodeName} from '../model/names.js'
import type {VerboseLog} from '../node/transport/logged-access.js'
import type {Reach} from '../model/reach.js'
import {serviceFamilies} from '../model/expected.js'
import {liveReach, snapshotReach} from './reach.js'
import {rulesScopeOf} from '../model/rules-scope.js'
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

export interface LiveOptions {
  namespace?: string
  name: string
  kubeconfig?: string
  context?: string
  sshConfig?: string
  nodes?: string[]
  allNodes?: boolean
  insecureIgnoreHostKey: boolean
  timeoutMs: number
  concurrency: number
  /** --via, and which Pods are kube-proxy's (for the kube-proxy transport). */
  via?: Via
  kubeProxyNamespace?: string
  kubeProxySelector?: string
  /** --debug-image and --debug-namespace (--via debug-pod). */
  debugImage?: string
  debugNamespace?: string
  /** What the run will create in the cluster, said before it does (stderr). */
  announce?: (line: string) => void
  /** --proxy-mode: trusted over kube-proxy's /proxyMode when deciding how much of nft to read. */
  proxyMode?: string
  /** Live probes from each node after it is read (svc); off unless asked. */
  probe?: boolean
  /** Read only the iptables chains the Service's packets can reach (svc); off: every node's whole dump (collect). */
  scopeRules?: boolean
  /** --verbose: every API request and node operation, on stderr. */
  log?: VerboseLog
  /** What the run has done so far (nodes read, Services diagnosed), for a progress line; never written anywhere here. */
  onProgress?: (e: ProgressEvent) => void
}

/** A step of a long run, reported through `onProgress`: the cli layer decides whether and how to show it. */
export type ProgressEvent =
  | {kind: 'node-read-started'; node: string; total: number}
  | {kind: 'node-read-finished'; node: string; ms: number; ok: boolean}
  | {kind: 'service-diagnosed'; service: string; index: number; total: number}

export interface GatheredLive extends Gathered {
  namespace: string
  /** Each node's raw reads by node name, for `collect` to write as a bundle. */
  recordings: Map<string, NodeRecording>
  /** How each selected node was read, or why it was left API-only. */
  readVia: Map<string, NodeReadVia>
}

export const NODES_DIR = 'nodes'

/** The API client and SSH are loaded only for live reads: offline diagnosis starts faster without them. */
async function liveModules() {
  const [{LiveClusterSource, loadKubeConfig}, {collectNode}] = await Promise.all([
    import('../cluster/live-source.js'),
    import('../node/read/collect-node.js'),
  ])
  return {LiveClusterSource, loadKubeConfig, collectNode}
}

async function sshConnector(opts: {
  sshConfig?: string
  insecureIgnoreHostKey: boolean
  timeoutMs: number
  log?: VerboseLog
}): Promise<NodeConnector> {
  try {
    return await transportConnector('ssh', opts)
  } catch (e) {
    throw new DiagnosisError((e as Error).message, {cause: e})
  }
}

export async function gatherLive(opts: LiveOptions): Promise<GatheredLive> {
  const {LiveClusterSource, loadKubeConfig} = await liveModules()
  const {kc, namespace: ctxNamespace} = loadKubeConfig(opts)
  const namespace = opts.namespace ?? ctxNamespace
  const source = new LiveClusterSource(kc, opts.timeoutMs, opts.log)
  const cluster = await readClusterState(source, namespace, opts.name)
  const endpointNodes = new Set(cluster.slices.flatMap((s) => (s.endpoints ?? []).map((e) => e.nodeName ?? '')))
  const selection = selectNodes(cluster.nodes, endpointNodes, {only: opts.nodes, all: opts.allNodes})
  const dnsIP = cluster.dns.service?.spec?.clusterIP
  // A record for the IPv4 ClusterIP, AAAA for the IPv6 one: each family of the Service is judged on its own answer.
  const types = serviceFamilies(cluster.service).map((f) => (f.family === 'IPv6' ? ('AAAA' as const) : ('A' as const)))
  const dns =
    dnsIP && dnsIP !== 'None'
      ? {name: `${opts.name}.${namespace}.svc.${cluster.clusterDomain}`, server: dnsIP, types}
      : undefined
  // Each node read over SSH is probed on the read's own connection while it reads: the probes need only the cluster.
  const probing = new Map<string, StartedProbes>()
  const settings = probeSettings(opts)
  const probeBeside = opts.probe
    ? (name: string, access: NodeAccess) => {
        const started = startProbes(cluster, name, access, settings)
        probing.set(name, started)
        return started.probes
      }
    : undefined
  const rulesScope = opts.scopeRules ? rulesScopeOf(cluster.service) : undefined
  const {observations, recordings, readVia, warnings} = await readNodesLive(
    cluster.nodes,
    selection.names,
    opts,
    dns,
    pathTargets(cluster),
    probeBeside,
    rulesScope,
  )
  const probes = opts.probe
    ? await probeNodes(cluster, observations, await probeConnector(readVia, opts), opts, probing)
    : undefined
  const reach = await liveReach(opts, readVia, cluster.nodes)
  return {
    cluster,
    observations,
    recordings,
    readVia,
    selectionNote: selection.note,
    rulesNote: chainByChainNote(observations),
    warnings: [...hostKeyWarnings(opts), ...warnings],
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
 * How probes reach each node: over SSH for the nodes SSH read. A node read through kube-proxy's Pod or a debug Pod is
 * not probed (a port-forward reaches only the node's loopback, not the Service's or the endpoints' addresses; the debug
 * Pod is gone by then): its probe entry says so.
 */
async function probeConnector(
  readVia: Map<string, NodeReadVia>,
  opts: {sshConfig?: string; insecureIgnoreHostKey: boolean; timeoutMs: number; log?: VerboseLog},
): Promise<NodeConnector> {
  const viaSsh = [...readVia.values()].some((v) => v.transport === 'ssh')
  const ssh = viaSsh ? await sshConnector(opts) : undefined
  return async (target) => {
    const via = readVia.get(target.name)
    if (via?.transport === 'ssh' && ssh) return ssh(target)
    throw new Error(
      `not probed: read through ${via?.transport ?? 'no transport'}, which cannot open connections from the node to other addresses`,
    )
  }
}

/** What the packet-path reads look at: the endpoints' addresses, and each ClusterIP with each port protocol. */
function pathTargets(cluster: ClusterState): PathTargets {
  const spec = cluster.service.spec
  const clusterIPs = (spec?.clusterIPs ?? (spec?.clusterIP ? [spec.clusterIP] : [])).filter((ip) => ip !== 'None')
  const protocols = [...new Set((spec?.ports ?? []).map((p) => (p.protocol ?? 'TCP').toLowerCase()))]
    .filter((p) => p === 'tcp' || p === 'udp' || p === 'sctp')
    .sort()
  return {
    endpointAddresses: cluster.slices.flatMap((s) => (s.endpoints ?? []).flatMap((e) => e.addresses ?? [])),
    serviceAddresses: clusterIPs.flatMap((address) => protocols.map((protocol) => ({address, protocol}))),
  }
}

export function hostKeyWarnings(opts: {insecureIgnoreHostKey: boolean}): string[] {
  return opts.insecureIgnoreHostKey
    ? ['host keys are NOT checked (--insecure-ignore-host-key): a man-in-the-middle would go unnoticed']
    : []
}

/**
 * Reads the named nodes live, at most `concurrency` at once, kept in memory; each node's failure stays on that node.
 * Nodes left API-only (--via none, or no way in) have no observation; `readVia` says why.
 */
export async function readNodesLive(
  nodes: V1Node[],
  names: string[],
  opts: Pick<
    LiveOptions,
    | 'sshConfig'
    | 'insecureIgnoreHostKey'
    | 'timeoutMs'
    | 'concurrency'
    | 'kubeconfig'
    | 'context'
    | 'via'
    | 'kubeProxyNamespace'
    | 'kubeProxySelector'
    | 'debugImage'
    | 'debugNamespace'
    | 'announce'
    | 'log'
    | 'onProgress'
    | 'proxyMode'
  >,
  dns: CollectOptions['dns'],
  path?: PathTargets,
  /** Work to run on each SSH-read node's access while it is read (the live probes); closing waits for it. */
  beside?: (name: string, access: NodeAccess) => Promise<unknown>,
  /** Only these chains of each node's iptables rules (see readScopedRules). */
  rulesScope?: RulesScope,
): Promise<{
  observations: NodeObservation[]
  recordings: Map<string, NodeRecording>
  readVia: Map<string, NodeReadVia>
  warnings: string[]
}> {
  const {collectNode, loadKubeConfig} = await liveModules()
  const targets = names.map((name) => {
    const node = nodes.find((n) => n.metadata?.name === name)
    return {name, address: node && nodeAddress(node)}
  })
  const progress = opts.onProgress
  const reads = await readNodesThrough(
    targets,
    {...opts, kubeConfig: () => loadKubeConfig(opts).kc},
    opts.concurrency,
    async (name, connect, transport) => {
      const startedAt = performance.now()
      progress?.({kind: 'node-read-started', node: name, total: names.length})
      const open =
        beside && transport === 'ssh'
          ? async () => {
              const access = await connect()
              return closingAfter(access, beside(name, access))
            }
          : connect
      const collection = await collectNode(name, open, {
        timeoutMs: opts.timeoutMs,
        dns,
        path,
        proxyMode: opts.proxyMode,
        rulesScope,
      })
      progress?.({
        kind: 'node-read-finished',
        node: name,
        ms: performance.now() - startedAt,
        ok: collection.observation.reachable,
      })
      return collection
    },
  )
  const read = names.filter((n) => reads.collected.has(n))
  return {
    observations: read.map((n) => reads.collected.get(n)!.observation),
    recordings: new Map(
      names.map((n) => [
        n,
        reads.collected.get(n)?.recording ?? errorRecording(`not read: ${reads.readVia.get(n)?.why ?? 'API-only'}`),
      ]),
    ),
    readVia: reads.readVia,
    warnings: reads.warnings,
  }
}

export async function gatherSnapshot(dir: string, namespace: string, name: string, only?: string[]): Promise<Gathered> {
  const source = new SnapshotClusterSource(dir)
  source.requireRecorded(namespace, name)
  const cluster = await readClusterState(source, namespace, name)
  return {
    cluster,
    observations: readSnapshotNodes(dir, only),
    warnings: [],
    reach: snapshotReach(source.manifest()?.context),
  }
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
  const recorded = existsSync(nodesDir) ? readdirSync(nodesDir).sort() : []
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

export interface NodeLiveOptions {
  kubeconfig?: string
  context?: string
  sshConfig?: string
  insecureIgnoreHostKey: boolean
  timeoutMs: number
}

/** One node's reads, live over SSH and kept in memory, with the node's addresses from the cluster. */
export async function readNodeLive(
  name: string,
  opts: NodeLiveOptions,
): Promise<{obs: NodeObservation; addresses: string[]}> {
  const {LiveClusterSource, loadKubeConfig, collectNode} = await liveModules()
  const {kc} = loadKubeConfig(opts)
  const nodes = await new LiveClusterSource(kc, opts.timeoutMs).listNodes()
  const node = nodes.find((n) => n.metadata?.name === name)
  if (!node) throw new DiagnosisError(`node "${name}" not found in the cluster`)
  const connect = await sshConnector(opts)
  const {observation: obs} = await collectNode(name, () => connect({name, address: nodeAddress(node)}), {
    timeoutMs: opts.timeoutMs,
  })
  if (!obs.reachable) throw new DiagnosisError(`${name}: ${obs.error ?? 'unreadable'}`)
  const addresses = (node.status?.addresses ?? [])
    .filter((a) => a.type === 'InternalIP' || a.type === 'ExternalIP')
    .map((a) => a.address)
  return {obs, addresses}
}
