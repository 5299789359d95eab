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
import type {AdminPolicyKind, AdminPolicyObject} from './admin-policy-objects.js'

const SERVICE_NAME_LABEL = 'kubernetes.io/service-name'

/**
 * A ClusterSource that asks its source once per namespace and kind, for diagnosing many Services in one run: Services,
 * EndpointSlices and Pods are listed per namespace and served from memory (concurrent askers share one request).
 */
export class CachedClusterSource implements ClusterSource {
  private readonly memo = new Map<string, Promise<unknown>>()

  constructor(private readonly source: ClusterSource) {}

  describe(): string {
    return this.source.describe()
  }

  async getService(namespace: string, name: string): Promise<V1Service | undefined> {
    // Indexed once (the first of a name, as a search would find): a scan asks for every Service of the namespace.
    const byName = await this.once(`services-by-name/${namespace}`, async () => {
      const index = new Map<string, V1Service>()
      for (const s of await this.listServices(namespace))
        if (!index.has(s.metadata?.name ?? '')) index.set(s.metadata?.name ?? '', s)
      return index
    })
    return byName.get(name)
  }

  listServices(namespace: string | undefined): Promise<V1Service[]> {
    return this.once(`services/${namespace ?? '*'}`, () => this.source.listServices(namespace))
  }

  async listEndpointSlices(namespace: string, serviceName: string): Promise<V1EndpointSlice[] | undefined> {
    const byService = await this.once(`endpointslices-by-service/${namespace}`, async () => {
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
    return this.once(`endpointslices/${namespace}`, () => this.source.listNamespaceEndpointSlices(namespace))
  }

  getEndpoints(namespace: string, name: string): Promise<V1Endpoints | undefined> {
    return this.once(`endpoints/${namespace}/${name}`, () => this.source.getEndpoints(namespace, name))
  }

  listPods(namespace: string): Promise<V1Pod[]> {
    return this.once(`pods/${namespace}`, () => this.source.listPods(namespace))
  }

  listNodes(): Promise<V1Node[]> {
    return this.once('nodes', () => this.source.listNodes())
  }

  listNetworkPolicies(namespace: string): Promise<V1NetworkPolicy[] | undefined> {
    return this.once(`networkpolicies/${namespace}`, () => this.source.listNetworkPolicies(namespace))
  }

  listNamespaces(): Promise<V1Namespace[] | undefined> {
    return this.once('namespaces', () => this.source.listNamespaces())
  }

  listAdminPolicies<K extends AdminPolicyKind>(kind: K): Promise<AdminPolicyObject<K>[] | undefined> {
    return this.once(`admin-policies/${kind}`, () => this.source.listAdminPolicies(kind))
  }

  getConfigMap(namespace: string, name: string): Promise<V1ConfigMap | undefined> {
    return this.once(`configmaps/${namespace}/${name}`, () => this.source.getConfigMap(namespace, name))
  }

  listCustomObjects(resource: CustomResource): Promise<CustomObjects> {
    return this.once(`custom/${resource.plural}`, () => this.source.listCustomObjects(resource))
  }

  private once<T>(key: string, read: () => Promise<T>): Promise<T> {
    let pending = this.memo.get(key) as Promise<T> | undefined
    if (!pending) {
      pending = read()
      this.memo.set(key, pending)
    }
    return pending
  }
}
