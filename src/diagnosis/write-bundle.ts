import {IMPLEMENTER_READS} from '../model/implementers/index.js'
import {lstatSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmdirSync, rmSync, writeFileSync} from 'node:fs'
import {basename, dirname, join, resolve} from 'node:path'
import type {V1ConfigMap, V1EndpointSlice, V1Node, V1Pod, V1Service} from '@kubernetes/client-node'
import {ADMIN_POLICY_RESOURCES} from '../cluster/admin-policy-objects.js'
import {customObjectsFile, MANIFEST_FILE, SNAPSHOT_FILES, type SnapshotManifest} from '../cluster/snapshot-source.js'
import type {ClusterState, ImplementerCustomResource} from '../cluster/types.js'
import {DiagnosisError} from '../errors.js'
import {isNodeName} from '../model/names.js'
import {writeNodeRecording} from '../node/read/bundle.js'
import type {NodeObservation} from '../node/observation.js'
import type {NodeRecording} from '../node/read/node-files.js'
import {writeRecordedEvidence} from '../node/probe/recorded-evidence.js'
import type {ProbeRun} from '../node/probe/tcp-probe.js'
import {NODES_DIR} from './gather.js'

export interface BundleSubject {
  namespace: string
  name: string
  context?: string
  observations: NodeObservation[]
  /** collect --probe: the probes, their kernel evidence and any trace, recorded beside each node's reads. */
  probes?: ProbeRun
}

export interface BundleWriteOptions {
  /** Replace a folder that is not empty (it is swapped out whole, never written into). */
  force?: boolean
}

function list(items: unknown[]) {
  return JSON.stringify({apiVersion: 'v1', kind: 'List', items}, null, 2) + '\n'
}

type Meta = NonNullable<V1Pod['metadata']>

/** A Pod's identity and ownership; its annotations are left out (nothing the diagnosis reads is there). */
function podMetadata(m: Meta | undefined): Meta {
  return {
    name: m?.name,
    namespace: m?.namespace,
    uid: m?.uid,
    labels: m?.labels,
    ...(m?.ownerReferences ? {ownerReferences: m.ownerReferences} : {}),
    ...(m?.creationTimestamp ? {creationTimestamp: m.creationTimestamp} : {}),
    ...(m?.deletionTimestamp ? {deletionTimestamp: m.deletionTimestamp} : {}),
  }
}

type ContainerState = NonNullable<NonNullable<NonNullable<V1Pod['status']>['containerStatuses']>[number]['state']>

/** A container's state as the diagnosis reads it: reason and exit code, never the termination message it wrote. */
function containerState(st: ContainerState | undefined): ContainerState | undefined {
  if (!st) return undefined
  return {
    ...(st.waiting ? {waiting: {reason: st.waiting.reason}} : {}),
    ...(st.running ? {running: {startedAt: st.running.startedAt}} : {}),
    ...(st.terminated
      ? {terminated: {reason: st.terminated.reason, exitCode: st.terminated.exitCode} as ContainerState['terminated']}
      : {}),
  }
}

/** What the diagnosis reads of a Pod: where it runs, its addresses, ports and health. Never env, command, volumes. */
function podFields(p: V1Pod): V1Pod {
  const containers = (p.spec?.containers ?? []).map((c) => ({name: c.name, ...(c.ports ? {ports: c.ports} : {})}))
  const s = p.status
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: podMetadata(p.metadata),
    spec: {
      containers,
      ...(p.spec?.nodeName ? {nodeName: p.spec.nodeName} : {}),
      ...(p.spec?.hostNetwork ? {hostNetwork: true} : {}),
    },
    status: {
      phase: s?.phase,
      podIP: s?.podIP,
      podIPs: s?.podIPs,
      hostIP: s?.hostIP,
      conditions: s?.conditions,
      containerStatuses: s?.containerStatuses?.map((c) => ({
        name: c.name,
        ready: c.ready,
        restartCount: c.restartCount,
        image: c.image,
        imageID: c.imageID,
        state: containerState(c.state),
        lastState: containerState(c.lastState),
        started: c.started,
      })),
      startTime: s?.startTime,
    },
  }
}

/**
 * Other objects whole, less their annotations (nothing the diagnosis reads is there; kubectl's last-applied copy can
 * hold whatever the manifest held) and the API server's bookkeeping (managedFields).
 */
function withoutBookkeeping<T extends {metadata?: Meta}>(o: T): T {
  const {managedFields: _managedFields, annotations: _annotations, ...meta} = o.metadata ?? {}
  return {...o, metadata: meta}
}

/** The ConfigMap entries the diagnosis reads: kube-proxy's config.conf (else its one entry), CoreDNS's Corefile. */
/**
 * A Service implementer's agent Pod as a bundle keeps it: what podFields keeps, and of its containers only the
 * environment variables (literal values) and arguments the implementers' registry reads: never the rest, which may
 * hold secrets.
 */
function agentPodFields(p: V1Pod): V1Pod {
  const kept = podFields(p)
  const containers = (p.spec?.containers ?? []).map((c) => {
    const env = (c.env ?? []).filter((e) => IMPLEMENTER_READS.env.includes(e.name) && e.value !== undefined)
    const args = [...(c.command ?? []), ...(c.args ?? [])].filter((a) =>
      IMPLEMENTER_READS.argPrefixes.some((prefix) => a.startsWith(prefix)),
    )
    return {
      name: c.name,
      ...(env.length > 0 ? {env: env.map((e) => ({name: e.name, value: e.value}))} : {}),
      ...(args.length > 0 ? {args} : {}),
    }
  })
  return {...kept, spec: {...kept.spec, containers}}
}

/** A Service implementer's ConfigMap as a bundle keeps it: only the keys the implementers' registry reads. */
function implementerConfigFields(c: V1ConfigMap): V1ConfigMap {
  const wanted = IMPLEMENTER_READS.configMaps.find(
    (w) => w.namespace === c.metadata?.namespace && w.name === c.metadata?.name,
  )
  const data = c.data ?? {}
  const {binaryData: _binaryData, ...rest} = withoutBookkeeping(c)
  return {...rest, data: Object.fromEntries((wanted?.keys ?? []).filter((k) => k in data).map((k) => [k, data[k]]))}
}

/** A Service implementer's custom object as a bundle keeps it: what names it and the keys of its spec it reads. */
function customObjectFields(resource: ImplementerCustomResource, o: unknown) {
  const object = o as {apiVersion?: string; kind?: string; metadata?: {name?: string}; spec?: Record<string, unknown>}
  const spec = object.spec ?? {}
  return {
    apiVersion: object.apiVersion,
    kind: object.kind,
    metadata: {name: object.metadata?.name},
    spec: Object.fromEntries(resource.specKeys.filter((k) => k in spec).map((k) => [k, spec[k]])),
  }
}

const CONFIG_KEYS = ['config.conf', 'Corefile']

function configMapFields(c: V1ConfigMap): V1ConfigMap {
  const data = c.data ?? {}
  const read = CONFIG_KEYS.filter((k) => k in data)
  const keys = read.length > 0 ? read : Object.keys(data).slice(0, 1)
  const {binaryData: _binaryData, ...rest} = withoutBookkeeping(c)
  return {...rest, data: Object.fromEntries(keys.map((k) => [k, data[k]]))}
}

/**
 * Refuses an --out that is a symbolic link, not a folder, or (without `force`) a folder with anything in it: a bundle
 * is never written into place, so no stale file from an earlier run can give a false finding later.
 */
export function checkBundleOut(out: string, force: boolean): 'absent' | 'empty' | 'replace' {
  let stat
  try {
    stat = lstatSync(out)
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return 'absent'
    throw new DiagnosisError(`cannot use --out ${out}: ${(e as Error).message}`, {cause: e})
  }
  if (stat.isSymbolicLink())
    throw new DiagnosisError(
      `--out ${out} is a symbolic link: a bundle is written only to a real folder (links are not followed)`,
    )
  if (!stat.isDirectory()) throw new DiagnosisError(`--out ${out} exists and is not a folder`)
  if (readdirSync(out).length === 0) return 'empty'
  if (!force) throw new DiagnosisError(`--out ${out} is not empty: give a new folder, or --force to replace it`)
  return 'replace'
}

/**
 * Writes what a diagnosis read as a snapshot bundle (one List file per API kind, one folder per node), built in a
 * temporary sibling folder (0700, files 0600) and renamed into place whole. A node whose name is no Kubernetes node
 * name (a hostile API server's) gets no folder, never a path of its own: it is returned, for a warning, and the other
 * nodes are written (one bad Node never ends the run).
 */
export function writeBundle(
  out: string,
  cluster: ClusterState,
  recordings: Map<string, NodeRecording>,
  subject: BundleSubject,
  opts: BundleWriteOptions = {},
): {leftOut: string[]} {
  const leftOut = [...recordings.keys()].filter((name) => !isNodeName(name))
  const written = new Map([...recordings].filter(([name]) => isNodeName(name)))
  const state = checkBundleOut(out, opts.force ?? false)
  const target = resolve(out)
  let building: string
  try {
    building = mkdtempSync(join(dirname(target), `.${basename(target)}.kpd-tmp-`))
  } catch (e) {
    throw new DiagnosisError(`cannot create a folder next to ${out}: ${(e as Error).message}`, {cause: e})
  }
  try {
    writeContent(building, cluster, written, subject)
    if (state === 'empty') rmdirSync(target)
    if (state === 'replace') {
      const old = `${building}.old`
      renameSync(target, old)
      renameSync(building, target)
      rmSync(old, {recursive: true, force: true})
    } else renameSync(building, target)
  } catch (e) {
    rmSync(building, {recursive: true, force: true})
    throw e instanceof DiagnosisError
      ? e
      : new DiagnosisError(`cannot write the bundle ${out}: ${(e as Error).message}`, {cause: e})
  }
  return {leftOut}
}

function writeContent(
  dir: string,
  cluster: ClusterState,
  recordings: Map<string, NodeRecording>,
  subject: BundleSubject,
): void {
  // O_EXCL: a file is only ever created, never opened through something already there.
  const write = (file: string, text: string) => writeFileSync(join(dir, file), text, {mode: 0o600, flag: 'wx'})
  const recordedAt = new Date().toISOString()
  mkdirSync(join(dir, NODES_DIR), {mode: 0o700})
  for (const [name, rec] of recordings) {
    mkdirSync(join(dir, NODES_DIR, name), {mode: 0o700})
    writeNodeRecording(join(dir, NODES_DIR, name), rec)
    const probed = subject.probes?.ran ? subject.probes.nodes.find((n) => n.node === name) : undefined
    if (probed) writeRecordedEvidence(join(dir, NODES_DIR, name), probed, recordedAt)
  }
  const services: V1Service[] = [cluster.service, ...(cluster.dns.service ? [cluster.dns.service] : [])]
  write(SNAPSHOT_FILES.services, list(services.map(withoutBookkeeping)))
  const slices: V1EndpointSlice[] = [...cluster.slices, ...cluster.dns.slices]
  write(SNAPSHOT_FILES.endpointslices, list(slices.map(withoutBookkeeping)))
  const policy = cluster.policy
  const pods: V1Pod[] = [
    ...new Set([
      ...cluster.pods,
      ...cluster.kubeProxyPods,
      ...(policy?.dnsPods ?? []),
      ...(policy?.clientPod ? [policy.clientPod] : []),
    ]),
  ]
  const agents = (cluster.implementerObjects?.pods ?? []).filter((p) => !pods.includes(p))
  write(SNAPSHOT_FILES.pods, list([...pods.map(podFields), ...agents.map(agentPodFields)]))
  write(SNAPSHOT_FILES.nodes, list((cluster.nodes as V1Node[]).map(withoutBookkeeping)))
  const configMaps = [cluster.proxyConfigMap, cluster.corednsConfigMap].filter((c): c is V1ConfigMap => c !== undefined)
  const implementerConfigs = (cluster.implementerObjects?.configMaps ?? []).map(implementerConfigFields)
  write(SNAPSHOT_FILES.configmaps, list([...configMaps.map(configMapFields), ...implementerConfigs]))
  // Custom objects not read are left out too: a replay says they were not recorded. None served: an empty list.
  for (const resource of IMPLEMENTER_READS.customResources) {
    const objects = cluster.implementerObjects?.customObjects?.[resource.kind]
    if (objects) write(customObjectsFile(resource), list(objects.map((o) => customObjectFields(resource, o))))
  }
  // Policies that were not read are left out, so that a replay says they were not recorded rather than that none exist.
  if (policy && !policy.unread) {
    write(SNAPSHOT_FILES.networkpolicies, list(policy.policies.map(withoutBookkeeping)))
    if (policy.namespaceLabels)
      write(
        SNAPSHOT_FILES.namespaces,
        list(Object.entries(policy.namespaceLabels).map(([name, labels]) => ({metadata: {name, labels}}))),
      )
  }
  const admin = policy?.admin
  if (admin && !admin.unread) {
    write(customObjectsFile(ADMIN_POLICY_RESOURCES.AdminNetworkPolicy), list(admin.anps.map(withoutBookkeeping)))
    write(
      customObjectsFile(ADMIN_POLICY_RESOURCES.BaselineAdminNetworkPolicy),
      list(admin.banp ? [withoutBookkeeping(admin.banp)] : []),
    )
  }
  const manifest: SnapshotManifest = {
    apiVersion: 'kproxy-doctor/v1',
    kind: 'Bundle',
    services: [`${subject.namespace}/${subject.name}`],
    recordedAt,
    ...(subject.context ? {context: subject.context} : {}),
    nodes: subject.observations.map((o) => ({name: o.name, read: o.reachable, ...(o.error ? {error: o.error} : {})})),
  }
  write(MANIFEST_FILE, JSON.stringify(manifest, null, 2) + '\n')
}
