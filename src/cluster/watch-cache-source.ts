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
import {parseLabelSelector} from './label-selector.js'
import type {WatchStore, WatchTarget} from './watch-objects.js'

const SERVICE_NAME_LABEL = 'kubernetes.io/service-name'

/**
 * A ClusterSource that answers from `svc --watch`'s store (watch-objects.ts) what the watches hold, and asks `rest`
 * for everything else: the Service (watched by its name), its EndpointSlices (by their Service label) and the Pods the
 * watches select. A namespace's Pods are the watched ones as they are now, beside the others as `rest` answers (the
 * watches select only some of a namespace's Pods). The watches keep raw API JSON, which is what the checks read of
 * these kinds (the client's models name their fields as the API does).
 */
export class WatchCacheSource implements ClusterSource {
  constructor(
    private readonly store: WatchStore,
    private readonly targets: WatchTarget[],
    private readonly rest: ClusterSource,
  ) {}

  describe(): string {
    return this.rest.describe()
  }

  private held(resource: WatchTarget['resource'], namespace: string, match: (t: WatchTarget) => boolean) {
    for (const t of this.targets) {
      if (t.resource !== resource || t.namespace !== namespace || !match(t)) continue
      const objects = this.store.objects(t)
      if (objects) return objects
    }
    return undefined
  }

  async getService(namespace: string, name: string): Promise<V1Service | undefined> {
    const held = this.held(
      'services',
      namespace,
      (t) => t.fieldSelector === `metadata.name=${name}` && !t.labelSelector,
    )
    if (!held) return this.rest.getService(namespace, name)
    return held.find((o) => o.metadata?.name === name) as V1Service | undefined
  }

  async listEndpointSlices(namespace: string, serviceName: string): Promise<V1EndpointSlice[] | undefined> {
    const held = this.held(
      'endpointslices',
      namespace,
      (t) => t.labelSelector === `${SERVICE_NAME_LABEL}=${serviceName}` && !t.fieldSelector,
    )
    return held ? (held as V1EndpointSlice[]) : this.rest.listEndpointSlices(namespace, serviceName)
  }

  async listPods(namespace: string): Promise<V1Pod[]> {
    const whole = this.held('pods', namespace, (t) => !t.labelSelector && !t.fieldSelector)
    if (whole) return whole as V1Pod[]
    const watched = this.targets.filter(
      (t) => t.resource === 'pods' && t.namespace === namespace && t.labelSelector && !t.fieldSelector,
    )
    const listed = watched.flatMap((t) => {
      const objects = this.store.objects(t)
      return objects ? [{selects: parseLabelSelector(t.labelSelector!), objects: objects as V1Pod[]}] : []
    })
    const others = await this.rest.listPods(namespace)
    if (listed.length === 0) return others
    const now = new Map<string, V1Pod>()
    for (const {objects} of listed) for (const p of objects) now.set(p.metadata?.name ?? '', p)
    // A Pod a watch selects is as the watch has it now (or gone), in the order `rest` read them; the rest as read.
    const selected = (p: V1Pod) => listed.some(({selects}) => selects(p.metadata?.labels))
    const pods = others.flatMap((p) => {
      const name = p.metadata?.name ?? ''
      const watchedNow = now.get(name)
      now.delete(name)
      return watchedNow ? [watchedNow] : selected(p) ? [] : [p]
    })
    return [...pods, ...now.values()]
  }

  listServices(namespace: string | undefined): Promise<V1Service[]> {
    return this.rest.listServices(namespace)
  }
  listNamespaceEndpointSlices(namespace: string): Promise<V1EndpointSlice[] | undefined> {
    return this.rest.listNamespaceEndpointSlices(namespace)
  }
  getEndpoints(namespace: string, name: string): Promise<V1Endpoints | undefined> {
    return this.rest.getEndpoints(namespace, name)
  }
  listNodes(): Promise<V1Node[]> {
    return this.rest.listNodes()
  }
  getConfigMap(namespace: string, name: string): Promise<V1ConfigMap | undefined> {
    return this.rest.getConfigMap(namespace, name)
  }
  listNetworkPolicies(namespace: string): Promise<V1NetworkPolicy[] | undefined> {
    return this.rest.listNetworkPolicies(namespace)
  }
  listNamespaces(): Promise<V1Namespace[] | undefined> {
    return this.rest.listNamespaces()
  }
  listCustomObjects(resource: CustomResource): Promise<CustomObjects> {
    return this.rest.listCustomObjects(resource)
  }
}
