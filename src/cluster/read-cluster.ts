import type {V1ConfigMap, V1EndpointSlice, V1Node, V1Pod, V1Service} from '@kubernetes/client-node'
import {DiagnosisError} from '../errors.js'
import type {ClusterSource} from './cluster-source.js'
import {slicesFromEndpoints} from './endpoints-fallback.js'
import {defaultKubeProxyConfig, parseKubeProxyConfig} from './kube-proxy-config.js'
import {chooseClusterDomain, type ClusterDomain} from './cluster-domain.js'
import type {
  ClusterState,
  DnsState,
  ImplementerObjects,
  ImplementerReads,
  KubeProxyConfig,
  PolicyClients,
  UnreadApiData,
} from './types.js'
import {readPolicyState} from './read-policy.js'
import {similarNames} from './similar-names.js'

const DNS_SERVICE_NAMES = ['kube-dns', 'coredns', 'rke2-coredns-rke2-coredns']
const COREDNS_CONFIGMAP_NAMES = ['coredns', 'rke2-coredns-rke2-coredns']

export interface ReadClusterOptions {
  /** The user's --cluster-domain, which wins over what the cluster says. */
  clusterDomain?: string
  /** The Service implementers' objects to read (their agents' Pods and ConfigMaps); none when undefined. */
  implementers?: ImplementerReads
  /** Judge NetworkPolicies for these clients (svc, collect); absent: policies are not read (a scan). */
  policy?: PolicyClients
  /**
   * Told the nodes and the Service's EndpointSlices as soon as both are read, before the rest of the API is (svc starts
   * connecting to the nodes then). Not told when either read fails (the whole read fails with it).
   */
  onNodesKnown?: (nodes: V1Node[], slices: V1EndpointSlice[]) => void
}

export async function readClusterState(
  source: ClusterSource,
  namespace: string,
  name: string,
  options: ReadClusterOptions = {},
): Promise<ClusterState> {
  const service = await source.getService(namespace, name)
  if (!service) {
    const others = (await source.listServices(namespace).catch(() => [])).map((s) => s.metadata?.name ?? '')
    const near = similarNames(name, others)
    const hint =
      near.length > 0
        ? ` Did you mean: ${near.join(', ')}?`
        : others.length === 0
          ? ` Namespace "${namespace}" has no Services.`
          : ''
    throw new DiagnosisError(`Service "${namespace}/${name}" not found (${source.describe()}).${hint}`)
  }
  const unread: UnreadApiData[] = []
  const endpointsRead = readEndpointSlices(source, namespace, name)
  const nodesRead = source.listNodes()
  const known = options.onNodesKnown
  if (known)
    Promise.all([nodesRead, endpointsRead])
      .then(([nodes, {slices}]) => known(nodes, slices))
      .catch(() => undefined)
  const [endpoints, pods, nodes, proxy, dns, systemPods, domain] = await Promise.all([
    endpointsRead,
    source.listPods(namespace),
    nodesRead,
    readProxyConfig(source),
    readDns(source),
    namespace === 'kube-system'
      ? Promise.resolve(undefined)
      : source.listPods('kube-system').catch((e: Error) => {
          unread.push({what: 'kube-proxy Pods (kube-system)', reason: e.message})
          return []
        }),
    readClusterDomain(source, options.clusterDomain),
  ])
  const kubeProxyPods = (systemPods ?? pods).filter((p) => p.metadata?.labels?.['k8s-app'] === 'kube-proxy')
  const implementerObjects = options.implementers
    ? await readImplementerObjects(source, options.implementers, {namespace, pods}, systemPods, unread)
    : undefined
  const policy = options.policy
    ? await readPolicyState(source, options.policy, {
        namespace,
        pods,
        systemPods: namespace === 'kube-system' ? pods : systemPods,
        dnsSlices: dns.slices,
      })
    : undefined
  return {
    service,
    ...endpoints,
    pods,
    nodes,
    kubeProxyPods,
    proxyConfig: proxy.config,
    proxyConfigMap: proxy.configMap,
    dns,
    clusterDomain: domain.domain,
    clusterDomainSource: domain.source,
    corednsConfigMap: domain.configMap,
    unread,
    ...(implementerObjects ? {implementerObjects} : {}),
    ...(policy ? {policy} : {}),
  }
}

/**
 * The Pods of the implementers' namespaces (those already read are not asked again) and their ConfigMaps. A namespace
 * or ConfigMap that does not exist is nothing found; one that cannot be read is said in `unread`.
 */
async function readImplementerObjects(
  source: ClusterSource,
  reads: ImplementerReads,
  service: {namespace: string; pods: V1Pod[]},
  systemPods: V1Pod[] | undefined,
  unread: UnreadApiData[],
): Promise<ImplementerObjects> {
  const known = new Map<string, V1Pod[]>([[service.namespace, service.pods]])
  if (systemPods) known.set('kube-system', systemPods)
  const namespaces = [...new Set(reads.namespaces)]
  const pods = await Promise.all(
    namespaces.map(
      (ns) =>
        known.get(ns) ??
        source.listPods(ns).catch((e: Error) => {
          unread.push({what: `Service implementers' Pods (${ns})`, reason: e.message})
          return []
        }),
    ),
  )
  const configMaps = await Promise.all(
    reads.configMaps.map(({namespace, name}) =>
      source.getConfigMap(namespace, name).catch((e: Error) => {
        unread.push({what: `ConfigMap ${namespace}/${name}`, reason: e.message})
        return undefined
      }),
    ),
  )
  const labelled = (p: V1Pod, labels: Record<string, string>) =>
    Object.entries(labels).every(([k, v]) => p.metadata?.labels?.[k] === v)
  const agents = pods.flat().filter((p) => reads.agentLabels.some((labels) => labelled(p, labels)))
  const customObjects: Record<string, unknown[]> = {}
  for (const resource of reads.customResources) {
    if (!agents.some((p) => labelled(p, resource.agentLabels))) continue
    const what = `${resource.kind}s (${resource.versions.map((v) => `${v.group}/${v.version}`).join(', ')})`
    try {
      const objects = await source.listCustomObjects(resource)
      if (objects === 'not-recorded') unread.push({what, reason: `not recorded (${source.describe()})`})
      else customObjects[resource.kind] = objects === 'not-served' ? [] : objects
    } catch (e) {
      unread.push({what, reason: (e as Error).message})
    }
  }
  return {pods: agents, configMaps: configMaps.filter((c): c is V1ConfigMap => !!c), customObjects}
}

async function readClusterDomain(
  source: ClusterSource,
  override: string | undefined,
): Promise<ClusterDomain & {configMap?: V1ConfigMap}> {
  if (override) return chooseClusterDomain(override, undefined)
  try {
    for (const name of COREDNS_CONFIGMAP_NAMES) {
      const configMap = await source.getConfigMap('kube-system', name)
      if (configMap) return {...chooseClusterDomain(undefined, configMap), configMap}
    }
    return chooseClusterDomain(undefined, undefined)
  } catch (e) {
    return chooseClusterDomain(undefined, undefined, `CoreDNS ConfigMap unreadable: ${(e as Error).message}`)
  }
}

async function readEndpointSlices(source: ClusterSource, namespace: string, name: string) {
  const slices = await source.listEndpointSlices(namespace, name)
  if (slices) return {slices, endpointsSource: 'EndpointSlice' as const}
  const ep = await source.getEndpoints(namespace, name)
  return {slices: ep ? slicesFromEndpoints(ep) : [], endpointsSource: 'Endpoints' as const}
}

async function readProxyConfig(source: ClusterSource): Promise<{config: KubeProxyConfig; configMap?: V1ConfigMap}> {
  try {
    const configMap = await source.getConfigMap('kube-system', 'kube-proxy')
    if (!configMap) return {config: defaultKubeProxyConfig('no ConfigMap kube-system/kube-proxy')}
    const text = configMap.data?.['config.conf'] ?? Object.values(configMap.data ?? {})[0]
    if (!text) return {config: defaultKubeProxyConfig('ConfigMap kube-system/kube-proxy has no config.conf'), configMap}
    return {config: parseKubeProxyConfig(text, 'ConfigMap kube-system/kube-proxy'), configMap}
  } catch (e) {
    return {config: defaultKubeProxyConfig(`ConfigMap kube-system/kube-proxy unreadable: ${(e as Error).message}`)}
  }
}

async function readDns(source: ClusterSource): Promise<DnsState> {
  try {
    let service: V1Service | undefined
    for (const candidate of DNS_SERVICE_NAMES) {
      service = await source.getService('kube-system', candidate)
      if (service) break
    }
    if (!service) return {slices: []}
    const name = service.metadata?.name ?? ''
    const {slices} = await readEndpointSlices(source, 'kube-system', name)
    return {service, slices}
  } catch (e) {
    return {slices: [], error: (e as Error).message}
  }
}
