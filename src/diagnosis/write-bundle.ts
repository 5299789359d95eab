import {mkdirSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {MANIFEST_FILE, SNAPSHOT_FILES, type SnapshotManifest} from '../cluster/snapshot-source.js'
import type {ClusterState} from '../cluster/types.js'
import {DiagnosisError} from '../errors.js'
import {isNodeName} from '../model/names.js'
import {writeNodeRecording, type NodeObservation, type NodeRecording} from '../node/bundle.js'
import {NODES_DIR} from './gather.js'

export interface BundleSubject {
  namespace: string
  name: string
  context?: string
  observations: NodeObservation[]
}

function list(kind: string, items: unknown[]) {
  return JSON.stringify({apiVersion: 'v1', kind: 'List', items}, null, 2) + '\n'
}

/** Writes what a diagnosis read as a snapshot bundle: one List file per API kind, one folder per node. */
export function writeBundle(dir: string, cluster: ClusterState, recordings: Map<string, NodeRecording>, subject: BundleSubject): void {
  mkdirSync(dir, {recursive: true})
  for (const name of recordings.keys()) if (!isNodeName(name)) throw new DiagnosisError(`refusing to write a bundle folder for node "${name}": not a Kubernetes node name`)
  for (const [name, rec] of recordings) writeNodeRecording(join(dir, NODES_DIR, name), rec)
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
  const manifest: SnapshotManifest = {
    apiVersion: 'kproxy-doctor/v1',
    kind: 'Bundle',
    services: [`${subject.namespace}/${subject.name}`],
    recordedAt: new Date().toISOString(),
    ...(subject.context ? {context: subject.context} : {}),
    nodes: subject.observations.map((o) => ({name: o.name, read: o.reachable, ...(o.error ? {error: o.error} : {})})),
  }
  writeFileSync(join(dir, MANIFEST_FILE), JSON.stringify(manifest, null, 2) + '\n')
}
