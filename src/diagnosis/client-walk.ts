import type {ClusterState} from '../cluster/types.js'
import type {ExpectedService} from '../model/expected.js'
import {clientAddress, type PathClient, type PathResult} from '../model/paths.js'

/** svc --from POD: the Pod the walks start from, as the paths take it; undefined without --from POD. */
export function pathClient(cluster: ClusterState): PathClient | undefined {
  const pod = cluster.policy?.clientPod
  if (!pod) return undefined
  return {
    pod: `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`,
    node: pod.spec?.nodeName ?? '',
    ips: (pod.status?.podIPs ?? []).map((a) => a.ip).filter((ip) => !!ip),
    hostNetwork: pod.spec?.hostNetwork ?? false,
  }
}

/**
 * Why no walk of this family starts from the --from Pod (a required gap: the headline must not say its path works),
 * or undefined when its node walked it (or the Service has no path to walk).
 */
export function clientNotWalked(
  client: PathClient,
  service: ExpectedService,
  paths: PathResult[],
  judged: ReadonlyArray<{name: string; address?: string}>,
): string | undefined {
  if (service.notProxied || !service.clusterIP || paths.some((p) => p.source !== undefined)) return undefined
  const walk = `no walk starts from ${client.pod}`
  if (!client.node) return `${walk}: it is not scheduled on a node`
  const node = judged.find((n) => n.name === client.node)
  if (!node) return `${walk}: its node ${client.node}'s rules were not read or not judged`
  if (!clientAddress(client, service.clusterIP, node.address))
    return `${walk}: it has no address of the ClusterIP's family (${service.clusterIP}) yet`
  return undefined
}
