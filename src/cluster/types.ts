import type {V1ConfigMap, V1EndpointSlice, V1NetworkPolicy, V1Node, V1Pod, V1Service} from '@kubernetes/client-node'
import type {CustomResource} from './cluster-source.js'
import type {AdminNetworkPolicy, BaselineAdminNetworkPolicy} from './admin-policy-objects.js'

export interface KubeProxyConfig {
  /** "iptables", "ipvs", "nftables", or "" when unset (iptables on Linux). */
  mode: string
  clusterCIDR?: string
  masqueradeBit: number
  masqueradeAll: boolean
  /**
   * iptables mode, IPv4: NodePorts answer on 127.0.0.1 too (iptables.localhostNodePorts, default true, and
   * nodePortAddresses empty or holding a 127.0.0.0/8 address); kube-proxy then sets conf.all.route_localnet=1.
   */
  localhostNodePorts: boolean
  /** IPVS mode: the scheduler (default rr) and strictARP. */
  ipvsScheduler?: string
  ipvsStrictARP?: boolean
  /** Where these values came from, for the report. */
  source: string
}

export interface DnsState {
  service?: V1Service
  slices: V1EndpointSlice[]
  /** Why the DNS Service could not be read, when it could not. */
  error?: string
}

/** Everything the diagnosis reads from the Kubernetes API. */
export interface ClusterState {
  service: V1Service
  slices: V1EndpointSlice[]
  endpointsSource: 'EndpointSlice' | 'Endpoints'
  /** All Pods of the Service's namespace (selector analysis, who owns an IP). */
  pods: V1Pod[]
  nodes: V1Node[]
  /** kube-proxy's Pods (kube-system, k8s-app=kube-proxy), when it runs as a DaemonSet. */
  kubeProxyPods: V1Pod[]
  proxyConfig: KubeProxyConfig
  /** The ConfigMap proxyConfig was read from, kept for snapshots. */
  proxyConfigMap?: V1ConfigMap
  dns: DnsState
  clusterDomain: string
  /** Where clusterDomain was read, or why it is assumed. */
  clusterDomainSource: string
  /** The CoreDNS ConfigMap clusterDomain was read from, kept for snapshots. */
  corednsConfigMap?: V1ConfigMap
  /** API reads that could not be made, with the reason: the checks that need them are reported as not done. */
  unread: UnreadApiData[]
  /**
   * The objects that say who implements Services on each node (the agents' Pods and their configuration, as the
   * registry of Service implementers asks for them); undefined when they were not read (an older bundle).
   */
  implementerObjects?: ImplementerObjects
  /** What NetworkPolicies are judged with; absent when the run does not judge them (a scan). */
  policy?: PolicyState
}

/** The clients NetworkPolicies are judged for (svc --from, --from-namespace); neither: the default sources. */
export interface PolicyClients {
  /** --from: one Pod. */
  pod?: {namespace: string; name: string}
  /** --from-namespace: any Pod of this namespace. */
  namespace?: string
}

/** The NetworkPolicies (networking.k8s.io/v1) on the Service's path and what judging them needs. */
export interface PolicyState {
  clients: PolicyClients
  /** The NetworkPolicies of every namespace in `namespaces`. */
  policies: V1NetworkPolicy[]
  /** The namespaces whose policies were read: the Service's and its clients'. */
  namespaces: string[]
  /** Each Namespace's labels by name; undefined when they could not be read (a namespaceSelector is then undecided). */
  namespaceLabels?: Record<string, Record<string, string>>
  /** Why the Namespaces could not be read, when they could not. */
  namespacesUnread?: string
  /** The --from Pod, as read. */
  clientPod?: V1Pod
  /** The cluster DNS Service's Pods (its EndpointSlices' targets), for a client's DNS egress. */
  dnsPods: V1Pod[]
  /** Why the policies were not read (a 403, the API group not served, a bundle recorded without them): not judged. */
  unread?: {reason: string; required: boolean}
  /** The AdminNetworkPolicies and the baseline, judged around the NetworkPolicies; absent: not read by this run. */
  admin?: AdminPolicyState
}

/** The cluster's AdminNetworkPolicies (judged before NetworkPolicies) and BaselineAdminNetworkPolicy (after them). */
export interface AdminPolicyState {
  /** Every AdminNetworkPolicy; none where the API group is not served (no CRD). */
  anps: AdminNetworkPolicy[]
  /** The baseline: the one named `default` (the only name the API accepts). */
  banp?: BaselineAdminNetworkPolicy
  /** Why they were not read (a 403 where the group is served, a bundle recorded without them): verdicts unsure. */
  unread?: {reason: string; required: boolean}
}

/** The API objects of the Service implementers other than kube-proxy: their agents' Pods and ConfigMaps. */
export interface ImplementerObjects {
  pods: V1Pod[]
  configMaps: V1ConfigMap[]
  /**
   * Their custom objects by kind (FelixConfiguration), where read: none when the cluster does not serve the kind; a
   * kind not asked for (none of its agents runs) or not read (refused, not recorded: said in `unread`) is absent.
   */
  customObjects?: Record<string, unknown[]>
}

/** A custom resource an implementer reads where one of its agents' Pods runs, and what of its spec a bundle keeps. */
export interface ImplementerCustomResource extends CustomResource {
  /** Read only when a Pod with these labels was found (no request on a cluster without that implementer). */
  agentLabels: Record<string, string>
  specKeys: string[]
}

/**
 * Which API objects to read for the Service implementers: the Pods of these namespaces that carry one of these label
 * sets (their agents), these ConfigMaps; and what of them a bundle keeps (the ConfigMaps' keys, the agents' environment
 * variables by name and arguments by prefix: nothing else of them, which may hold secrets).
 */
export interface ImplementerReads {
  namespaces: string[]
  agentLabels: Array<Record<string, string>>
  configMaps: Array<{namespace: string; name: string; keys: string[]}>
  env: string[]
  argPrefixes: string[]
  customResources: ImplementerCustomResource[]
}

export interface UnreadApiData {
  /** What could not be read, e.g. "kube-proxy Pods (kube-system)". */
  what: string
  reason: string
}

export const DEFAULT_MASQUERADE_BIT = 14
