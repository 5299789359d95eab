import {existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {readClusterState} from '../cluster/read-cluster.js'
import {MANIFEST_FILE, SNAPSHOT_FILES, SnapshotClusterSource, type SnapshotManifest} from '../cluster/snapshot-source.js'
import type {ClusterState} from '../cluster/types.js'
import type {V1Node} from '@kubernetes/client-node'
import {DiagnosisError} from '../errors.js'
import {readNodeBundle, type NodeObservation} from '../node/bundle.js'
import {loadSshConfig, resolveHost} from '../node/ssh-config.js'
import {mapBounded, selectNodes} from '../node/select-nodes.js'
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
  /** Keep the bundle here (collect); otherwise a temporary folder removed afterwards. */
  outDir?: string
}

const NODES_DIR = 'nodes'

/** The API client and SSH are loaded only for live reads: offline diagnosis starts faster without them. */
async function liveModules() {
  const [{LiveClusterSource, loadKubeConfig}, {collectNode}] = await Promise.all([import('../cluster/live-source.js'), import('../node/collect-node.js')])
  return {LiveClusterSource, loadKubeConfig, collectNode}
}

export async function gatherLive(opts: LiveOptions): Promise<Gathered & {namespace: string}> {
  const {LiveClusterSource, loadKubeConfig} = await liveModules()
  const {kc, namespace: ctxNamespace} = loadKubeConfig(opts)
  const namespace = opts.namespace ?? ctxNamespace
  const source = new LiveClusterSource(kc, opts.timeoutMs)
  const cluster = await readClusterState(source, namespace, opts.name)
  const endpointNodes = new Set(cluster.slices.flatMap((s) => (s.endpoints ?? []).map((e) => e.nodeName ?? '')))
  const selection = selectNodes(cluster.nodes, endpointNodes, {only: opts.nodes, all: opts.allNodes})
  const dnsIP = cluster.dns.service?.spec?.clusterIP
  const dns = dnsIP && dnsIP !== 'None' ? {name: `${opts.name}.${namespace}.svc.${cluster.clusterDomain}`, server: dnsIP} : undefined
  const observations = await readNodesLive(cluster.nodes, selection.names, opts, dns, opts.outDir)
  if (opts.outDir) {
    writeClusterBundle(opts.outDir, cluster)
    writeManifest(opts.outDir, {
      apiVersion: 'kproxy-doctor/v1',
      kind: 'Bundle',
      services: [`${namespace}/${opts.name}`],
      recordedAt: new Date().toISOString(),
      ...(opts.context ? {context: opts.context} : {}),
      nodes: observations.map((o) => ({name: o.name, read: o.reachable, ...(o.error ? {error: o.error} : {})})),
    })
  }
  return {cluster, observations, selectionNote: selection.note, warnings: hostKeyWarnings(opts), namespace}
}

export function hostKeyWarnings(opts: {insecureIgnoreHostKey: boolean}): string[] {
  return opts.insecureIgnoreHostKey ? ['host keys are NOT checked (--insecure-ignore-host-key): a man-in-the-middle would go unnoticed'] : []
}

/** Reads the named nodes live, at most `concurrency` at once; each node's failure stays on that node. */
export async function readNodesLive(
  nodes: V1Node[],
  names: string[],
  opts: Pick<LiveOptions, 'sshConfig' | 'insecureIgnoreHostKey' | 'timeoutMs' | 'concurrency'>,
  dns: {name: string; server: string} | undefined,
  outDir?: string,
): Promise<NodeObservation[]> {
  const {collectNode} = await liveModules()
  let blocks
  try {
    blocks = loadSshConfig(opts.sshConfig)
  } catch (e) {
    throw new DiagnosisError((e as Error).message)
  }
  const bundle = outDir ?? mkdtempSync(join(tmpdir(), 'kproxy-doctor-'))
  try {
    await mapBounded(names, opts.concurrency, async (name) => {
      const node = nodes.find((n) => n.metadata?.name === name)
      const host = resolveHost(blocks, name, (node && nodeAddress(node)) ?? name)
      await collectNode(host, join(bundle, NODES_DIR, name), {insecureIgnoreHostKey: opts.insecureIgnoreHostKey, timeoutMs: opts.timeoutMs}, dns)
    })
    return names.map((n) => readNodeBundle(join(bundle, NODES_DIR, n), n))
  } finally {
    if (!outDir) rmSync(bundle, {recursive: true, force: true})
  }
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

function list(kind: string, items: unknown[]) {
  return JSON.stringify({apiVersion: 'v1', kind: 'List', items}, null, 2) + '\n'
}

/** Writes the API objects of a diagnosis as a snapshot bundle (one List file per kind). */
function writeClusterBundle(dir: string, cluster: ClusterState): void {
  mkdirSync(dir, {recursive: true})
  const services = [cluster.service, ...(cluster.dns.service ? [cluster.dns.service] : [])]
  writeFileSync(join(dir, SNAPSHOT_FILES.services), list('Service', services))
  writeFileSync(join(dir, SNAPSHOT_FILES.endpointslices), list('EndpointSlice', [...cluster.slices, ...cluster.dns.slices]))
  writeFileSync(join(dir, SNAPSHOT_FILES.pods), list('Pod', [...cluster.pods, ...cluster.kubeProxyPods.filter((p) => !cluster.pods.includes(p))]))
  writeFileSync(join(dir, SNAPSHOT_FILES.nodes), list('Node', cluster.nodes))
  writeFileSync(
    join(dir, SNAPSHOT_FILES.configmaps),
    list(
      'ConfigMap',
      [cluster.proxyConfigMap, cluster.corednsConfigMap].filter((c) => c !== undefined),
    ),
  )
}

function writeManifest(dir: string, manifest: SnapshotManifest): void {
  writeFileSync(join(dir, MANIFEST_FILE), JSON.stringify(manifest, null, 2) + '\n')
}

export interface NodeLiveOptions {
  kubeconfig?: string
  context?: string
  sshConfig?: string
  insecureIgnoreHostKey: boolean
  timeoutMs: number
}

/** One node's dumps, read live over SSH, with the node's addresses from the cluster; `close` removes them. */
export async function readNodeLive(name: string, opts: NodeLiveOptions): Promise<{obs: NodeObservation; addresses: string[]; close(): void}> {
  const {LiveClusterSource, loadKubeConfig, collectNode} = await liveModules()
  const {kc} = loadKubeConfig(opts)
  const nodes = await new LiveClusterSource(kc, opts.timeoutMs).listNodes()
  const node = nodes.find((n) => n.metadata?.name === name)
  if (!node) throw new DiagnosisError(`node "${name}" not found in the cluster`)
  let blocks
  try {
    blocks = loadSshConfig(opts.sshConfig)
  } catch (e) {
    throw new DiagnosisError((e as Error).message)
  }
  const dir = mkdtempSync(join(tmpdir(), 'kproxy-doctor-'))
  const close = () => rmSync(dir, {recursive: true, force: true})
  try {
    await collectNode(resolveHost(blocks, name, nodeAddress(node) ?? name), dir, {insecureIgnoreHostKey: opts.insecureIgnoreHostKey, timeoutMs: opts.timeoutMs})
    const obs = readNodeBundle(dir, name)
    if (!obs.reachable) throw new DiagnosisError(`${name}: ${obs.error ?? 'unreadable'}`)
    const addresses = (node.status?.addresses ?? []).filter((a) => a.type === 'InternalIP' || a.type === 'ExternalIP').map((a) => a.address)
    return {obs, addresses, close}
  } catch (e) {
    close()
    throw e
  }
}
