import {mkdirSync, mkdtempSync, readdirSync, existsSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {LiveClusterSource, loadKubeConfig} from '../cluster/live-source.js'
import {readClusterState} from '../cluster/read-cluster.js'
import {SNAPSHOT_FILES, SnapshotClusterSource} from '../cluster/snapshot-source.js'
import type {ClusterState} from '../cluster/types.js'
import {DiagnosisError} from '../errors.js'
import {readNodeBundle, type NodeObservation} from '../node/bundle.js'
import {collectNode} from '../node/collect-node.js'
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

export async function gatherLive(opts: LiveOptions): Promise<Gathered & {namespace: string}> {
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
      await collectNode(host, join(bundle, NODES_DIR, name), {insecureIgnoreHostKey: opts.insecureIgnoreHostKey, timeoutMs: opts.timeoutMs}, dnsIP && dnsIP !== 'None' ? {name: svcName, server: dnsIP} : undefined)
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
export function writeClusterBundle(dir: string, cluster: ClusterState): void {
  mkdirSync(dir, {recursive: true})
  const services = [cluster.service, ...(cluster.dns.service ? [cluster.dns.service] : [])]
  writeFileSync(join(dir, SNAPSHOT_FILES.services), list('Service', services))
  writeFileSync(join(dir, SNAPSHOT_FILES.endpointslices), list('EndpointSlice', [...cluster.slices, ...cluster.dns.slices]))
  writeFileSync(join(dir, SNAPSHOT_FILES.pods), list('Pod', cluster.pods))
  writeFileSync(join(dir, SNAPSHOT_FILES.nodes), list('Node', cluster.nodes))
  writeFileSync(join(dir, SNAPSHOT_FILES.configmaps), list('ConfigMap', cluster.proxyConfigMap ? [cluster.proxyConfigMap] : []))
}
