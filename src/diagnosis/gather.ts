import {existsSync, lstatSync, readdirSync} from 'node:fs'
import {join} from 'node:path'
import {readClusterState} from '../cluster/read-cluster.js'
import {SnapshotClusterSource} from '../cluster/snapshot-source.js'
import type {ClusterState} from '../cluster/types.js'
import type {V1Node} from '@kubernetes/client-node'
import {DiagnosisError} from '../errors.js'
import {readNodeBundle, type NodeObservation, type NodeRecording} from '../node/bundle.js'
import {mapBounded, selectNodes} from '../node/select-nodes.js'
import {transportConnector, type NodeConnector} from '../node/transports.js'
import type {PathTargets} from '../node/collect-node.js'
import {nodeAddress} from './node-address.js'
import {isNodeName} from '../model/names.js'

export interface Gathered {
  cluster: ClusterState
  observations: NodeObservation[]
  selectionNote?: string
  warnings: string[]
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
}

export interface GatheredLive extends Gathered {
  namespace: string
  /** Each node's raw reads by node name, for `collect` to write as a bundle. */
  recordings: Map<string, NodeRecording>
}

export const NODES_DIR = 'nodes'

/** The API client and SSH are loaded only for live reads: offline diagnosis starts faster without them. */
async function liveModules() {
  const [{LiveClusterSource, loadKubeConfig}, {collectNode}] = await Promise.all([import('../cluster/live-source.js'), import('../node/collect-node.js')])
  return {LiveClusterSource, loadKubeConfig, collectNode}
}

async function sshConnector(opts: {sshConfig?: string; insecureIgnoreHostKey: boolean; timeoutMs: number}): Promise<NodeConnector> {
  try {
    return await transportConnector('ssh', opts)
  } catch (e) {
    throw new DiagnosisError((e as Error).message)
  }
}

export async function gatherLive(opts: LiveOptions): Promise<GatheredLive> {
  const {LiveClusterSource, loadKubeConfig} = await liveModules()
  const {kc, namespace: ctxNamespace} = loadKubeConfig(opts)
  const namespace = opts.namespace ?? ctxNamespace
  const source = new LiveClusterSource(kc, opts.timeoutMs)
  const cluster = await readClusterState(source, namespace, opts.name)
  const endpointNodes = new Set(cluster.slices.flatMap((s) => (s.endpoints ?? []).map((e) => e.nodeName ?? '')))
  const selection = selectNodes(cluster.nodes, endpointNodes, {only: opts.nodes, all: opts.allNodes})
  const dnsIP = cluster.dns.service?.spec?.clusterIP
  const dns = dnsIP && dnsIP !== 'None' ? {name: `${opts.name}.${namespace}.svc.${cluster.clusterDomain}`, server: dnsIP} : undefined
  const {observations, recordings} = await readNodesLive(cluster.nodes, selection.names, opts, dns, pathTargets(cluster))
  return {cluster, observations, recordings, selectionNote: selection.note, warnings: hostKeyWarnings(opts), namespace}
}

/** What the packet-path reads look at: the endpoints' addresses, and each ClusterIP with each port protocol. */
function pathTargets(cluster: ClusterState): PathTargets {
  const spec = cluster.service.spec
  const clusterIPs = (spec?.clusterIPs ?? (spec?.clusterIP ? [spec.clusterIP] : [])).filter((ip) => ip !== 'None')
  const protocols = [...new Set((spec?.ports ?? []).map((p) => (p.protocol ?? 'TCP').toLowerCase()))].filter((p) => p === 'tcp' || p === 'udp' || p === 'sctp').sort()
  return {
    endpointAddresses: cluster.slices.flatMap((s) => (s.endpoints ?? []).flatMap((e) => e.addresses ?? [])),
    serviceAddresses: clusterIPs.flatMap((address) => protocols.map((protocol) => ({address, protocol}))),
  }
}

export function hostKeyWarnings(opts: {insecureIgnoreHostKey: boolean}): string[] {
  return opts.insecureIgnoreHostKey ? ['host keys are NOT checked (--insecure-ignore-host-key): a man-in-the-middle would go unnoticed'] : []
}

/** Reads the named nodes live, at most `concurrency` at once, kept in memory; each node's failure stays on that node. */
export async function readNodesLive(
  nodes: V1Node[],
  names: string[],
  opts: Pick<LiveOptions, 'sshConfig' | 'insecureIgnoreHostKey' | 'timeoutMs' | 'concurrency'>,
  dns: {name: string; server: string} | undefined,
  path?: PathTargets,
): Promise<{observations: NodeObservation[]; recordings: Map<string, NodeRecording>}> {
  const {collectNode} = await liveModules()
  const connect = await sshConnector(opts)
  const collected = await mapBounded(names, opts.concurrency, (name) => {
    const node = nodes.find((n) => n.metadata?.name === name)
    return collectNode(name, () => connect({name, address: node && nodeAddress(node)}), {timeoutMs: opts.timeoutMs, dns, path})
  })
  return {observations: collected.map((c) => c.observation), recordings: new Map(names.map((n, i) => [n, collected[i].recording]))}
}

export async function gatherSnapshot(dir: string, namespace: string, name: string, only?: string[]): Promise<Gathered> {
  const source = new SnapshotClusterSource(dir)
  source.requireRecorded(namespace, name)
  const cluster = await readClusterState(source, namespace, name)
  return {cluster, observations: readSnapshotNodes(dir, only), warnings: []}
}

/** The nodes recorded in a snapshot (or only those named). */
export function readSnapshotNodes(dir: string, only?: string[]): NodeObservation[] {
  const nodesDir = join(dir, NODES_DIR)
  const recorded = existsSync(nodesDir) ? readdirSync(nodesDir).sort() : []
  const names = only && only.length > 0 ? only : recorded
  if (names.length === 0) throw new DiagnosisError(`snapshot ${dir} holds no node folder under ${NODES_DIR}/`)
  const invalid = names.filter((n) => !isNodeName(n))
  if (invalid.length > 0) throw new DiagnosisError(`not a node name (RFC 1123 subdomain): ${invalid.map((n) => JSON.stringify(n)).join(', ')}`)
  const unknown = names.filter((n) => !recorded.includes(n))
  if (unknown.length > 0) throw new DiagnosisError(`snapshot ${dir} holds no node ${unknown.join(', ')} (it holds ${recorded.join(', ') || 'none'})`)
  return names.map((n) => {
    const nodeDir = join(nodesDir, n)
    if (!lstatSync(nodeDir).isDirectory()) return {name: n, reachable: false, error: `${NODES_DIR}/${n} is not a folder (symbolic links are not followed)`}
    return readNodeBundle(nodeDir, n)
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
export async function readNodeLive(name: string, opts: NodeLiveOptions): Promise<{obs: NodeObservation; addresses: string[]}> {
  const {LiveClusterSource, loadKubeConfig, collectNode} = await liveModules()
  const {kc} = loadKubeConfig(opts)
  const nodes = await new LiveClusterSource(kc, opts.timeoutMs).listNodes()
  const node = nodes.find((n) => n.metadata?.name === name)
  if (!node) throw new DiagnosisError(`node "${name}" not found in the cluster`)
  const connect = await sshConnector(opts)
  const {observation: obs} = await collectNode(name, () => connect({name, address: nodeAddress(node)}), {timeoutMs: opts.timeoutMs})
  if (!obs.reachable) throw new DiagnosisError(`${name}: ${obs.error ?? 'unreadable'}`)
  const addresses = (node.status?.addresses ?? []).filter((a) => a.type === 'InternalIP' || a.type === 'ExternalIP').map((a) => a.address)
  return {obs, addresses}
}
