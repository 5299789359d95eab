import {existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {readClusterState} from '../cluster/read-cluster.js'
import {SNAPSHOT_FILES, SnapshotClusterSource} from '../cluster/snapshot-source.js'
import type {ClusterState} from '../cluster/types.js'
import {DiagnosisError} from '../errors.js'
import {readNodeBundle, type NodeObservation} from '../node/bundle.js'
import {loadSshConfig, resolveHost} from '../node/ssh-config.js'
import {mapBounded, selectNodes} from '../node/select-nodes.js'
import {nodeAddress} from './node-address.js'

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
  const {LiveClusterSource, loadKubeConfig, collectNode} = await liveModules()
  const {kc, namespace: ctxNamespace} = loadKubeConfig(opts)
  const namespace = opts.namespace ?? ctxNamespace
  const source = new LiveClusterSource(kc, opts.timeoutMs)
  const cluster = await readClusterState(source, namespace, opts.name)
  let blocks
  try {
    blocks = loadSshConfig(opts.sshConfig)
  } catch (e) {
    throw new DiagnosisError((e as Error).message)
  }
  const endpointNodes = new Set(cluster.slices.flatMap((s) => (s.endpoints ?? []).map((e) => e.nodeName ?? '')))
  const selection = selectNodes(cluster.nodes, endpointNodes, {only: opts.nodes, all: opts.allNodes})
  const bundle = opts.outDir ?? mkdtempSync(join(tmpdir(), 'kproxy-doctor-'))
  const warnings = opts.insecureIgnoreHostKey ? ['host keys are NOT checked (--insecure-ignore-host-key): a man-in-the-middle would go unnoticed'] : []
  const dnsIP = cluster.dns.service?.spec?.clusterIP
  const svcName = `${opts.name}.${namespace}.svc.${cluster.clusterDomain}`
  try {
    await mapBounded(selection.names, opts.concurrency, async (name) => {
      const node = cluster.nodes.find((n) => n.metadata?.name === name)
      const host = resolveHost(blocks, name, (node && nodeAddress(node)) ?? name)
      await collectNode(
        host,
        join(bundle, NODES_DIR, name),
        {insecureIgnoreHostKey: opts.insecureIgnoreHostKey, timeoutMs: opts.timeoutMs},
        dnsIP && dnsIP !== 'None' ? {name: svcName, server: dnsIP} : undefined,
      )
    })
    if (opts.outDir) writeClusterBundle(opts.outDir, cluster)
    const observations = selection.names.map((n) => readNodeBundle(join(bundle, NODES_DIR, n), n))
    return {cluster, observations, selectionNote: selection.note, warnings, namespace}
  } finally {
    if (!opts.outDir) rmSync(bundle, {recursive: true, force: true})
  }
}

export async function gatherSnapshot(dir: string, namespace: string, name: string, only?: string[]): Promise<Gathered> {
  const cluster = await readClusterState(new SnapshotClusterSource(dir), namespace, name)
  const nodesDir = join(dir, NODES_DIR)
  const recorded = existsSync(nodesDir) ? readdirSync(nodesDir).sort() : []
  const names = only && only.length > 0 ? only : recorded
  if (names.length === 0) throw new DiagnosisError(`snapshot ${dir} holds no node folder under ${NODES_DIR}/`)
  return {cluster, observations: names.map((n) => readNodeBundle(join(nodesDir, n), n)), warnings: []}
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
  writeFileSync(join(dir, SNAPSHOT_FILES.configmaps), list('ConfigMap', [cluster.proxyConfigMap, cluster.corednsConfigMap].filter((c) => c !== undefined)))
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
