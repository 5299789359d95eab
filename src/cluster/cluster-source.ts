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

/**
 * A cluster-scoped custom resource (a CRD's objects), under each API version that may serve it, in the order asked:
 * the first the cluster serves is read (a 404: the group or resource is not served, the next is asked; none served:
 * 'not-served'). One row per resource: Calico's FelixConfiguration (model/implementers), AdminNetworkPolicy and its
 * baseline (admin-policy-objects.ts).
 */
export interface CustomResource {
  kind: string
  /** Its resource name in URLs, e.g. felixconfigurations; also its file in a bundle (`<plural>.json`). */
  plural: string
  versions: Array<{group: string; version: string}>
  /**
   * What a refusal (403) of one version means. 'stands': it is kept while another version is asked (a user may be
   * granted the other group), and thrown when none answers. 'unless not discovered': RBAC answers 403 before it looks
   * for the resource, so discovery (readable by every authenticated user) is asked: a version it does not serve counts
   * as a 404; else (or where discovery fails otherwise: that proves nothing) the refusal stands.
   */
  refused: 'stands' | 'unless not discovered'
}

/**
 * The objects of a custom resource as read, each as the API gave it; 'not-served' when the cluster serves none of its
 * versions (the CRD is not installed), 'not-recorded' when a bundle holds no record of it (recorded before it was read).
 */
export type CustomObjects = unknown[] | 'not-served' | 'not-recorded'

/** What the diagnosis asks of a cluster; served by the live API or by a recorded snapshot. */
export interface ClusterSource {
  /** undefined when the Service does not exist. */
  getService(namespace: string, name: string): Promise<V1Service | undefined>
  /** The Services of one namespace, or of every namespace when namespace is undefined. */
  listServices(namespace: string | undefined): Promise<V1Service[]>
  /** undefined when discovery.k8s.io/v1 is not served. */
  listEndpointSlices(namespace: string, serviceName: string): Promise<V1EndpointSlice[] | undefined>
  /** Every EndpointSlice of a namespace (one request for many Services); undefined when discovery.k8s.io/v1 is not served. */
  listNamespaceEndpointSlices(namespace: string): Promise<V1EndpointSlice[] | undefined>
  getEndpoints(namespace: string, name: string): Promise<V1Endpoints | undefined>
  listPods(namespace: string): Promise<V1Pod[]>
  listNodes(): Promise<V1Node[]>
  getConfigMap(namespace: string, name: string): Promise<V1ConfigMap | undefined>
  /** The NetworkPolicies (networking.k8s.io/v1) of a namespace; undefined when the group is not served or not recorded. */
  listNetworkPolicies(namespace: string): Promise<V1NetworkPolicy[] | undefined>
  /** Every Namespace (their labels, for namespaceSelector); undefined when not recorded. */
  listNamespaces(): Promise<V1Namespace[] | undefined>
  /**
   * The objects of a cluster-scoped custom resource (a Service implementer's configuration: Calico's
   * FelixConfigurations; the cluster's AdminNetworkPolicies), by the resource's own rules (CustomResource).
   */
  listCustomObjects(resource: CustomResource): Promise<CustomObjects>
  /** Where this source reads from, for messages. */
  describe(): string
}
