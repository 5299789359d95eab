import {existsSync, statSync} from 'node:fs'
import {join} from 'node:path'
import type {
  V1ConfigMap,
  V1EndpointSlice,
  V1Endpoints,
  V1Namespace,
  V1NetworkPolicy,
  V1Node,
  V1Pod,
  V1Service,
} from '@kubernetes/client-node'
import {DiagnosisError} from '../errors.js'
import {nestsDeeperThan} from '../parse/json-depth.js'
import {readRegularFile} from '../parse/regular-file.js'
import type {ClusterSource, CustomObjects, CustomResource} from './cluster-source.js'

/** Deeper than any Kubernetes object nests (a Pod's spec about 12 levels). */
const MAX_NESTING = 64

/** The files of a snapshot bundle, one per kind, each a List as `kubectl get -o json` prints it. */
export const SNAPSHOT_FILES = {
  services: 'services.json',
  endpointslices: 'endpointslices.json',
  endpoints: 'endpoints.json',
  pods: 'pods.json',
  nodes: 'nodes.json',
  configmaps: 'configmaps.json',
  networkpolicies: 'networkpolicies.json',
  namespaces: 'namespaces.json',
} as const

/** A custom resource's file in a bundle: its plural (felixconfigurations.json), a List of the objects read. */
export function customObjectsFile(resource: CustomResource): string {
  if (!/^[a-z][a-z0-9-]*$/.test(resource.plural)) throw new Error(`not a resource name: ${resource.plural}`)
  return `${resource.plural}.json`
}

/** What a bundle was recorded for: written by `collect`, read so that a bundle is never asked what it does not hold. */
export const MANIFEST_FILE = 'manifest.json'

export interface SnapshotManifest {
  apiVersion: 'kproxy-doctor/v1'
  kind: 'Bundle'
  /** The Services diagnosed when the bundle was recorded, as namespace/name. */
  services: string[]
  recordedAt: string
  context?: string
  /** Each node asked, and why it could not be read when it could not. */
  nodes: Array<{name: string; read: boolean; error?: string}>
}

/** Whether the path is a folder, something else, or nothing (statSync follows a symlink to a folder, as cd does). */
function folderState(path: string): 'folder' | 'other' | 'missing' {
  try {
    return statSync(path).isDirectory() ? 'folder' : 'other'
  } catch {
    return 'missing'
  }
}

interface Meta {
  metadata?: {name?: string; namespace?: string; labels?: Record<string, string>}
}

export class SnapshotClusterSource implements ClusterSource {
  constructor(private readonly dir: string) {
    const what = folderState(dir)
    if (what !== 'folder')
      throw new DiagnosisError(
        `--snapshot ${dir}: ${what === 'missing' ? 'no such folder' : 'not a folder'} (a bundle is the folder \`collect svc --out\` writes)`,
      )
    if (!existsSync(join(dir, SNAPSHOT_FILES.services)))
      throw new DiagnosisError(`${dir} is not a snapshot bundle: ${SNAPSHOT_FILES.services} is missing`)
  }

  describe(): string {
    return `snapshot ${this.dir}`
  }

  /** The bundle's manifest; undefined for bundles recorded before manifests existed. */
  manifest(): SnapshotManifest | undefined {
    const path = join(this.dir, MANIFEST_FILE)
    if (!existsSync(path)) return undefined
    try {
      const parsed = JSON.parse(readRegularFile(path, 1 << 20).toString('utf8')) as SnapshotManifest | null
      if (parsed?.kind !== 'Bundle' || !Array.isArray(parsed.services) || !Array.isArray(parsed.nodes))
        throw new Error('not a kproxy-doctor bundle manifest')
      return parsed
    } catch (e) {
      throw new DiagnosisError(`cannot read ${path}: ${withoutContent(e as Error)}`, {cause: e})
    }
  }

  /** Refuses a Service the bundle was not recorded for: its Pods and DNS answers are not in it. */
  requireRecorded(namespace: string, name: string): void {
    const manifest = this.manifest()
    if (manifest && !manifest.services.includes(`${namespace}/${name}`))
      throw new DiagnosisError(
        `snapshot ${this.dir} was recorded for ${manifest.services.join(', ')}, not ${namespace}/${name}`,
      )
  }

  async getService(namespace: string, name: string): Promise<V1Service | undefined> {
    return this.items<V1Service>('services').find((s) => matches(s, namespace, name))
  }
  async listServices(namespace: string | undefined): Promise<V1Service[]> {
    return this.items<V1Service>('services').filter(
      (s) => namespace === undefined || s?.metadata?.namespace === namespace,
    )
  }
  /**
   * A file `collect` always writes, missing from a bundle it wrote (one with a manifest): the bundle is damaged, and
   * reading on would judge the Service on nothing (no Pods: every endpoint "gone"). Hand-made bundles without a
   * manifest keep their missing files as empty.
   */
  private present(kind: 'endpointslices' | 'pods' | 'nodes'): boolean {
    if (existsSync(join(this.dir, SNAPSHOT_FILES[kind]))) return true
    if (this.manifest())
      throw new DiagnosisError(
        `snapshot ${this.dir} is damaged: ${SNAPSHOT_FILES[kind]} is missing (every bundle collect writes has it)`,
      )
    return false
  }

  async listNamespaceEndpointSlices(namespace: string): Promise<V1EndpointSlice[] | undefined> {
    if (!this.present('endpointslices')) return undefined
    return this.items<V1EndpointSlice>('endpointslices').filter((s) => s?.metadata?.namespace === namespace)
  }
  async listEndpointSlices(namespace: string, serviceName: string): Promise<V1EndpointSlice[] | undefined> {
    if (!this.present('endpointslices')) return undefined
    return this.items<V1EndpointSlice>('endpointslices').filter(
      (s) => s?.metadata?.namespace === namespace && s.metadata?.labels?.['kubernetes.io/service-name'] === serviceName,
    )
  }
  async getEndpoints(namespace: string, name: string): Promise<V1Endpoints | undefined> {
    return this.items<V1Endpoints>('endpoints').find((e) => matches(e, namespace, name))
  }
  async listPods(namespace: string): Promise<V1Pod[]> {
    if (!this.present('pods')) return []
    return this.items<V1Pod>('pods').filter((p) => p?.metadata?.namespace === namespace)
  }
  async listNodes(): Promise<V1Node[]> {
    if (!this.present('nodes')) return []
    return this.items<V1Node>('nodes')
  }
  /** A bundle recorded before policies were read has no networkpolicies.json: undefined, not "none". */
  async listNetworkPolicies(namespace: string): Promise<V1NetworkPolicy[] | undefined> {
    if (!existsSync(join(this.dir, SNAPSHOT_FILES.networkpolicies))) return undefined
    return this.items<V1NetworkPolicy>('networkpolicies').filter((p) => p.metadata?.namespace === namespace)
  }
  async listNamespaces(): Promise<V1Namespace[] | undefined> {
    if (!existsSync(join(this.dir, SNAPSHOT_FILES.namespaces))) return undefined
    return this.items<V1Namespace>('namespaces')
  }
  async getConfigMap(namespace: string, name: string): Promise<V1ConfigMap | undefined> {
    return this.items<V1ConfigMap>('configmaps').find((c) => matches(c, namespace, name))
  }
  /** A custom resource's objects from its file (customObjectsFile); a bundle without the file did not record them. */
  async listCustomObjects(resource: CustomResource): Promise<CustomObjects> {
    const file = customObjectsFile(resource)
    if (!existsSync(join(this.dir, file))) return 'not-recorded'
    return this.listFile(file)
  }

  private readonly parsed = new Map<string, unknown[]>()

  private items<T>(kind: keyof typeof SNAPSHOT_FILES): T[] {
    return this.listFile<T>(SNAPSHOT_FILES[kind])
  }

  private listFile<T>(file: string): T[] {
    const cached = this.parsed.get(file)
    if (cached) return cached as T[]
    const path = join(this.dir, file)
    if (!existsSync(path)) return []
    try {
      const parsed = JSON.parse(readRegularFile(path).toString('utf8')) as {items?: T[]} | null
      if (!Array.isArray(parsed?.items)) throw new Error('no "items" list')
      // No API object nests this deep; a value that does overflows the stack wherever it is turned into text.
      if (nestsDeeperThan(parsed, MAX_NESTING)) throw new Error(`nested deeper than ${MAX_NESTING} levels`)
      this.parsed.set(file, parsed.items)
      return parsed.items
    } catch (e) {
      throw new DiagnosisError(`cannot read ${path}: ${withoutContent(e as Error)}`, {cause: e})
    }
  }
}

/** JSON.parse quotes the text it could not read: never echo a file's content (it may be anything the link pointed at). */
function withoutContent(e: Error): string {
  return e instanceof SyntaxError ? 'not valid JSON' : e.message
}

/** An item of a list may be anything (null included): cluster/validated-source.ts refuses what is no object. */
function matches(o: Meta | null, namespace: string, name: string): boolean {
  return o?.metadata?.namespace === namespace && o.metadata?.name === name
}
