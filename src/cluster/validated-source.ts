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
import type {ClusterSource, CustomObjects, CustomResource} from './cluster-source.js'
import {customObjectKind, objectProblem, type ObjectKind} from './object-shapes.js'

/** An object left out of a list because a field the doctor reads has the wrong type. */
export interface SkippedObject {
  kind: ObjectKind
  /** Undefined when the object has no string namespace (or is no object at all). */
  namespace?: string
  name?: string
  problem: string
}

/**
 * A ClusterSource whose every object has the shape the doctor reads (cluster/object-shapes.ts), checked as it is read:
 * a wrong-typed object in a list is left out and remembered (`skipped`, one warning each), a wrong-typed object asked
 * for by name is one clear error naming it and the field.
 */
export class ValidatedClusterSource implements ClusterSource {
  private readonly skippedObjects = new Map<string, SkippedObject>()

  constructor(private readonly source: ClusterSource) {}

  describe(): string {
    return this.source.describe()
  }

  /** The objects left out so far. */
  skipped(): SkippedObject[] {
    return [...this.skippedObjects.values()]
  }

  /** One line per object left out, for the run's warnings. */
  warnings(): string[] {
    return this.skipped().map((s) => `${describeObject(s)} skipped: ${s.problem}`)
  }

  async getService(namespace: string, name: string): Promise<V1Service | undefined> {
    return this.one('Service', await this.source.getService(namespace, name))
  }
  async listServices(namespace: string | undefined): Promise<V1Service[]> {
    return this.list('Service', await this.source.listServices(namespace))
  }
  async listEndpointSlices(namespace: string, serviceName: string): Promise<V1EndpointSlice[] | undefined> {
    const slices = await this.source.listEndpointSlices(namespace, serviceName)
    return slices && this.list('EndpointSlice', slices)
  }
  async listNamespaceEndpointSlices(namespace: string): Promise<V1EndpointSlice[] | undefined> {
    const slices = await this.source.listNamespaceEndpointSlices(namespace)
    return slices && this.list('EndpointSlice', slices)
  }
  async getEndpoints(namespace: string, name: string): Promise<V1Endpoints | undefined> {
    return this.one('Endpoints', await this.source.getEndpoints(namespace, name))
  }
  async listPods(namespace: string): Promise<V1Pod[]> {
    return this.list('Pod', await this.source.listPods(namespace))
  }
  async listNodes(): Promise<V1Node[]> {
    return this.list('Node', await this.source.listNodes())
  }
  async getConfigMap(namespace: string, name: string): Promise<V1ConfigMap | undefined> {
    return this.one('ConfigMap', await this.source.getConfigMap(namespace, name))
  }

  async listNetworkPolicies(namespace: string): Promise<V1NetworkPolicy[] | undefined> {
    const policies = await this.source.listNetworkPolicies(namespace)
    return policies && this.list('NetworkPolicy', policies)
  }
  async listNamespaces(): Promise<V1Namespace[] | undefined> {
    const namespaces = await this.source.listNamespaces()
    return namespaces && this.list('Namespace', namespaces)
  }

  async listCustomObjects(resource: CustomResource): Promise<CustomObjects> {
    const objects = await this.source.listCustomObjects(resource)
    return typeof objects === 'string' ? objects : this.list(customObjectKind(resource.kind), objects)
  }

  private one<T>(kind: ObjectKind, object: T | undefined): T | undefined {
    if (object === undefined) return undefined
    const problem = objectProblem(kind, object)
    if (problem)
      throw new DiagnosisError(`${describeObject(identify(kind, object, problem))} cannot be read: ${problem}`)
    return object
  }

  private list<T>(kind: ObjectKind, objects: T[]): T[] {
    if (!Array.isArray(objects)) throw new DiagnosisError(`the ${kind} list is ${typeof objects}, not a list`)
    return objects.filter((object, index) => {
      const problem = objectProblem(kind, object)
      if (!problem) return true
      const skipped = identify(kind, object, problem)
      this.skippedObjects.set(`${kind}/${skipped.namespace ?? ''}/${skipped.name ?? `#${index}`}`, skipped)
      return false
    })
  }
}

function identify(kind: ObjectKind, object: unknown, problem: string): SkippedObject {
  const meta = (object as {metadata?: {namespace?: unknown; name?: unknown}} | null)?.metadata
  const text = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined)
  return {kind, namespace: text(meta?.namespace), name: text(meta?.name), problem}
}

/** "Pod shop/web-1", "Node node-a", "Pod without a name". */
function describeObject(o: SkippedObject): string {
  if (o.name === undefined) return `${o.kind} without a name${o.namespace ? ` in namespace ${o.namespace}` : ''}`
  return `${o.kind} ${o.namespace ? `${o.namespace}/` : ''}${o.name}`
}
