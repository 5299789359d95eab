import type {V1Node, V1Pod} from '@kubernetes/client-node'
import type {ClusterState, PolicyState} from '../../cluster/types.js'
import type {ExpectedService} from '../../model/expected.js'
import type {PolicyDestination, PolicySource} from '../../model/network-policy.js'

/** A client NetworkPolicies are judged for, and how the report names it. */
export interface JudgedSource {
  source: PolicySource
  /** "Pod client/curl", "any Pod of namespace shop", "node node-a (192.168.1.10)". */
  label: string
}

/**
 * The clients judged: the --from Pod and/or --from-namespace; else any Pod of the Service's own namespace and, for a
 * Service reached on node ports with externalTrafficPolicy Cluster, each node (the traffic is masqueraded to the node's
 * address before it reaches an endpoint).
 */
export function judgedSources(cluster: ClusterState, policy: PolicyState): JudgedSource[] {
  const out: JudgedSource[] = []
  const pod = policy.clientPod
  if (pod) out.push({source: podSource(pod, cluster), label: `Pod ${pod.metadata?.namespace}/${pod.metadata?.name}`})
  if (policy.clients.namespace) out.push(namespaceSource(policy.clients.namespace))
  if (policy.clients.pod || policy.clients.namespace) return out
  out.push(namespaceSource(cluster.service.metadata?.namespace ?? ''))
  if (masqueradedToNodes(cluster))
    for (const node of cluster.nodes) {
      const name = node.metadata?.name ?? ''
      const ip = nodeInternalAddress(node)
      out.push({source: {kind: 'host', node: name, ...(ip ? {ip} : {})}, label: `node ${name}${ip ? ` (${ip})` : ''}`})
    }
  return out
}

/** The node's first InternalIP: the address its masqueraded traffic leaves with. */
function nodeInternalAddress(node: V1Node): string | undefined {
  return node.status?.addresses?.find((a) => a.type === 'InternalIP')?.address
}

function namespaceSource(namespace: string): JudgedSource {
  return {source: {kind: 'namespace', namespace}, label: `any Pod of namespace ${namespace}`}
}

function masqueradedToNodes(cluster: ClusterState): boolean {
  const spec = cluster.service.spec
  return (
    (spec?.type === 'NodePort' || spec?.type === 'LoadBalancer') &&
    (spec.externalTrafficPolicy ?? 'Cluster') === 'Cluster'
  )
}

function podSource(pod: V1Pod, cluster: ClusterState): PolicySource {
  const hostNetwork = pod.spec?.hostNetwork ?? false
  const node = cluster.nodes.find((n) => n.metadata?.name === pod.spec?.nodeName)
  const ip = pod.status?.podIP ?? (hostNetwork && node ? nodeInternalAddress(node) : undefined)
  return {
    kind: 'pod',
    namespace: pod.metadata?.namespace ?? '',
    name: pod.metadata?.name ?? '',
    ...(ip ? {ip} : {}),
    labels: pod.metadata?.labels ?? {},
    hostNetwork,
  }
}

/** A Pod as the destination of a connection: its address, labels and containers' ports. */
export function podDestination(pod: V1Pod, ip: string): PolicyDestination {
  return {
    namespace: pod.metadata?.namespace ?? '',
    name: pod.metadata?.name ?? '',
    ip,
    labels: pod.metadata?.labels ?? {},
    containerPorts: (pod.spec?.containers ?? []).flatMap((c) => c.ports ?? []),
  }
}

/** Each ready endpoint of each Service port, with its Pod (an endpoint without a known Pod is not judged). */
export function policyEndpoints(
  cluster: ClusterState,
  service: ExpectedService,
): Array<{servicePort: number; protocol: string; port: number; destination: PolicyDestination}> {
  const pods = new Map(cluster.pods.map((p) => [p.metadata?.name ?? '', p]))
  return service.ports.flatMap((p) =>
    p.allEndpoints
      .filter((e) => e.ready && e.podName !== undefined && pods.has(e.podName))
      .map((e) => ({
        servicePort: p.port,
        protocol: p.protocol.toUpperCase(),
        port: e.port,
        destination: podDestination(pods.get(e.podName!)!, e.ip),
      })),
  )
}

/** What the report says about the clients judged (svc's notes). */
export function policySourcesNote(cluster: ClusterState): string | undefined {
  const policy = cluster.policy
  if (!policy || policy.unread) return undefined
  const asked = policy.clients.pod || policy.clients.namespace
  const admin = policy.admin
  const admins = (admin?.anps.length ?? 0) + (admin?.banp ? 1 : 0)
  // No policy at all and no client asked for: nothing to say beyond the absence of findings.
  if (policy.policies.length === 0 && admins === 0 && !asked) return undefined
  const sources = judgedSources(cluster, policy).map((s) => s.label)
  const adminText =
    admins === 0
      ? ''
      : `, with ${admin!.anps.length} AdminNetworkPolic${admin!.anps.length === 1 ? 'y' : 'ies'}${admin?.banp ? ' and the baseline' : ''}`
  return `NetworkPolicies (${policy.policies.length} in ${policy.namespaces.join(', ')})${adminText} judged for ${sources.join(', ')}${asked ? '' : ' (--from POD or --from-namespace NS asks for another client)'}`
}
