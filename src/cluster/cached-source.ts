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
import type {ClusterSource, CustomObjects, CustomResource} from './cluster-source.js'

const SERVICE_NAME_LABEL = 'kubernetes.io/service-name'

/** Where a cache's uses differ. */
export interface CacheOptions {
  /**
   * 'namespace lists': a Service and a Service's EndpointSlices are answered from their namespace's list, read once (a
   * scan asks for every Service of a namespace); 'as asked': each is asked of the source as it is asked (a watch asks
   * for one Service and the DNS Service, and a namespace's list would be more than both).
   */
  lookups: 'namespace lists' | 'as asked'
  /** 'kept': a failed call answers with its failure for as long as the cache is kept; 'forgotten': it is asked again. */
  failures: 'kept' | 'forgotten'
}

/**
 * A ClusterSource that asks its source once per question and answers again from memory for as long as it is kept
 * (concurrent askers share one request): a scan keeps one for its run, diagnosing many Services; `svc --watch` keeps
 * one between its full refreshes, so the objects it does not watch (Nodes, ConfigMaps, the DNS Service,
 * NetworkPolicies) are read once per refresh, not once per change.
 */
export class CachedClusterSource implements ClusterSource {
  private readonly memo = new Map<string, Promise<unknown>>()

  constructor(
    private readonly source: ClusterSource,
    private readonly opts: CacheOptions = {lookups: 'namespace lists', failures: 'kept'},
  ) {}

  describe(): string {
    return this.source.describe()
  }

  async getService(namespace: string, name: string): Promise<V1Service | undefined> {
    if (this.opts.lookups === 'as asked')
      return this.once(['getService', namespace, name], () => this.source.getService(namespace, name))
    // Indexed once (the first of a name, as a search would find): a scan asks for every Service of the namespace.
    const byName = await this.once(['services-by-name', namespace], async () => {
      const index = new Map<string, V1Service>()
      for (const s of await this.listServices(namespace))
        if (!index.has(s.metadata?.name ?? '')) index.set(s.metadata?.name ?? '', s)
      return index
    })
    return byName.get(name)
  }

  listServices(namespace: string | undefined): Promise<V1Service[]> {
    return this.once(['listServices', namespace], () => this.source.listServices(namespace))
  }

  async listEndpointSlices(namespace: string, serviceName: string): Promise<V1EndpointSlice[] | undefined> {
    if (this.opts.lookups === 'as asked')
      return this.once(['listEndpointSlices', namespace, serviceName], () =>
        this.source.listEndpointSlices(namespace, serviceName),
      )
    const byService = await this.once(['endpointslices-by-service', namespace], async () => {
      const slices = await this.listNamespaceEndpointSlices(namespace)
      if (!slices) return undefined
      // Indexed once: a scan asks for every Service of the namespace, and a filter per Service would be quadratic.
      const index = new Map<string, V1EndpointSlice[]>()
      for (const s of slices) {
        const name = s.metadata?.labels?.[SERVICE_NAME_LABEL]
        if (name === undefined) continue
        const list = index.get(name)
        if (list) list.push(s)
        else index.set(name, [s])
      }
      return index
    })
    return byService && [...(byService.get(serviceName) ?? [])]
  }

  listNamespaceEndpointSlices(namespace: string): Promise<V1EndpointSlice[] | undefined> {
    return this.once(['listNamespaceEndpointSlices', namespace], () =>
      this.source.listNamespaceEndpointSlices(namespace),
    )
  }

  getEndpoints(namespace: string, name: string): Promise<V1Endpoints | undefined> {
    return this.once(['getEndpoints', namespace, name], () => this.source.getEndpoints(namespace, name))
  }

  listPods(namespace: string): Promise<V1Pod[]> {
    return this.once(['listPods', namespace], () => this.source.listPods(namespace))
  }

  listNodes(): Promise<V1Node[]> {
    return this.once(['listNodes'], () => this.source.listNodes())
  }

  listNetworkPolicies(namespace: string): Promise<V1NetworkPolicy[] | undefined> {
    return this.once(['listNetworkPolicies', namespace], () => this.source.listNetworkPolicies(namespace))
  }

  listNamespaces(): Promise<V1Namespace[] | undefined> {
    return this.once(['listNamespaces'], () => this.source.listNamespaces())
  }

  getConfigMap(namespace: string, name: string): Promise<V1ConfigMap | undefined> {
    return this.once(['getConfigMap', namespace, name], () => this.source.getConfigMap(namespace, name))
  }

  listCustomObjects(resource: CustomResource): Promise<CustomObjects> {
    return this.once(['listCustomObjects', resource.plural], () => this.source.listCustomObjects(resource))
  }

  private once<T>(question: unknown[], read: () => Promise<T>): Promise<T> {
    const key = JSON.stringify(question)
    let pending = this.memo.get(key) as Promise<T> | undefined
    if (!pending) {
      pending = read()
      if (this.opts.failures === 'forgotten') pending.catch(() => this.memo.delete(key))
      this.memo.set(key, pending)
    }
    return pending
  }
}
