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
import type {AdminPolicyKind, AdminPolicyObject} from './admin-policy-objects.js'
import type {ClusterSource, CustomObjects, CustomResource} from './cluster-source.js'

/**
 * A ClusterSource that asks its source once per question (the same call with the same arguments) and answers again
 * from memory for as long as it is kept: `svc --watch` keeps one between its full refreshes, so the objects it does not
 * watch (Nodes, ConfigMaps, the DNS Service, NetworkPolicies) are read once per refresh, not once per change. A failed
 * call is not kept: the next round asks again.
 */
export class MemoClusterSource implements ClusterSource {
  private readonly memo = new Map<string, Promise<unknown>>()

  constructor(private readonly source: ClusterSource) {}

  describe(): string {
    return this.source.describe()
  }
  getService(namespace: string, name: string): Promise<V1Service | undefined> {
    return this.once(['getService', namespace, name], () => this.source.getService(namespace, name))
  }
  listServices(namespace: string | undefined): Promise<V1Service[]> {
    return this.once(['listServices', namespace], () => this.source.listServices(namespace))
  }
  listEndpointSlices(namespace: string, serviceName: string): Promise<V1EndpointSlice[] | undefined> {
    return this.once(['listEndpointSlices', namespace, serviceName], () =>
      this.source.listEndpointSlices(namespace, serviceName),
    )
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
  getConfigMap(namespace: string, name: string): Promise<V1ConfigMap | undefined> {
    return this.once(['getConfigMap', namespace, name], () => this.source.getConfigMap(namespace, name))
  }
  listNetworkPolicies(namespace: string): Promise<V1NetworkPolicy[] | undefined> {
    return this.once(['listNetworkPolicies', namespace], () => this.source.listNetworkPolicies(namespace))
  }
  listNamespaces(): Promise<V1Namespace[] | undefined> {
    return this.once(['listNamespaces'], () => this.source.listNamespaces())
  }
  listCustomObjects(resource: CustomResource): Promise<CustomObjects> {
    return this.once(['listCustomObjects', resource.plural], () => this.source.listCustomObjects(resource))
  }
  listAdminPolicies<K extends AdminPolicyKind>(kind: K): Promise<AdminPolicyObject<K>[] | undefined> {
    return this.once(['listAdminPolicies', kind], () => this.source.listAdminPolicies(kind))
  }

  private once<T>(question: unknown[], read: () => Promise<T>): Promise<T> {
    const key = JSON.stringify(question)
    let pending = this.memo.get(key) as Promise<T> | undefined
    if (!pending) {
      pending = read()
      pending.catch(() => this.memo.delete(key))
      this.memo.set(key, pending)
    }
    return pending
  }
}
