import type {V1EndpointSlice, V1ServicePort} from '@kubernetes/client-node'

export interface EndpointInfo {
  ip: string
  port: number
  nodeName?: string
  podName?: string
  ready: boolean
  serving: boolean
  terminating: boolean
  /** Topology hints the EndpointSlice controller set (trafficDistribution / topology-mode Auto). */
  zoneHints: string[]
  nodeHints: string[]
}

/** The endpoints an EndpointSlice set gives one service port, as kube-proxy reads them (deduplicated by ip:port). */
export function endpointsForPort(
  slices: V1EndpointSlice[],
  port: V1ServicePort,
  family: 'IPv4' | 'IPv6',
): EndpointInfo[] {
  const seen = new Map<string, EndpointInfo>()
  const protocol = port.protocol ?? 'TCP'
  for (const slice of slices) {
    if (slice.addressType !== family) continue
    const slicePort = (slice.ports ?? []).find(
      (p) => (p.name ?? '') === (port.name ?? '') && (p.protocol ?? 'TCP') === protocol,
    )
    if (!slicePort || slicePort.port === undefined) continue
    for (const ep of slice.endpoints ?? []) {
      const ip = ep.addresses?.[0]
      if (!ip) continue
      const key = `${ip}:${slicePort.port}`
      if (seen.has(key)) continue
      const ready = ep.conditions?.ready ?? true
      seen.set(key, {
        ip,
        port: slicePort.port,
        nodeName: ep.nodeName,
        podName: ep.targetRef?.kind === 'Pod' || ep.targetRef?.kind === undefined ? ep.targetRef?.name : undefined,
        ready,
        serving: ep.conditions?.serving ?? ready,
        terminating: ep.conditions?.terminating ?? false,
        zoneHints: (ep.hints?.forZones ?? []).map((z) => z.name),
        nodeHints: ((ep.hints as {forNodes?: Array<{name: string}>} | undefined)?.forNodes ?? []).map((n) => n.name),
      })
    }
  }
  return [...seen.values()]
}

export interface TrafficPolicyView {
  internalLocal: boolean
  externalLocal: boolean
  externallyAccessible: boolean
}

export interface CategorizedEndpoints {
  cluster: EndpointInfo[]
  local: EndpointInfo[]
  allReachable: EndpointInfo[]
  hasAny: boolean
}

/**
 * kube-proxy's topologyModeFromHints: when every ready endpoint carries node (or zone) hints and one names this node
 * (or its zone), cluster traffic goes only to the endpoints hinted for it.
 */
function topologyFilter(
  endpoints: EndpointInfo[],
  nodeName: string,
  zone: string | undefined,
): ((e: EndpointInfo) => boolean) | undefined {
  const ready = endpoints.filter((e) => e.ready)
  if (ready.length === 0) return undefined
  if (ready.every((e) => e.nodeHints.length > 0) && ready.some((e) => e.nodeHints.includes(nodeName)))
    return (e) => e.nodeHints.includes(nodeName)
  if (zone && ready.every((e) => e.zoneHints.length > 0) && ready.some((e) => e.zoneHints.includes(zone)))
    return (e) => e.zoneHints.includes(zone)
  return undefined
}

/** kube-proxy's CategorizeEndpoints for one node, topology hints included. */
export function categorizeEndpoints(
  endpoints: EndpointInfo[],
  policy: TrafficPolicyView,
  nodeName: string,
  zone?: string,
): CategorizedEndpoints {
  const usesCluster = !policy.internalLocal || (policy.externallyAccessible && !policy.externalLocal)
  const usesLocal = policy.internalLocal || (policy.externallyAccessible && policy.externalLocal)
  let cluster: EndpointInfo[] = []
  let hasAny = false
  if (usesCluster) {
    const topology = topologyFilter(endpoints, nodeName, zone)
    cluster = endpoints.filter((e) => e.ready && (!topology || topology(e)))
    if (cluster.length === 0) cluster = endpoints.filter((e) => e.serving && e.terminating)
    hasAny = cluster.length > 0
  }
  if (!usesLocal) return {cluster, local: [], allReachable: cluster, hasAny}
  for (const e of endpoints) if (e.ready || (e.serving && e.terminating)) hasAny = true
  const isLocal = (e: EndpointInfo) => e.nodeName === nodeName
  let local = endpoints.filter((e) => isLocal(e) && e.ready)
  if (local.length === 0) local = endpoints.filter((e) => isLocal(e) && e.serving && e.terminating)
  if (!usesCluster) return {cluster, local, allReachable: local, hasAny}
  const union = new Map(cluster.map((e) => [`${e.ip}:${e.port}`, e]))
  for (const e of local) union.set(`${e.ip}:${e.port}`, e)
  return {cluster, local, allReachable: [...union.values()], hasAny}
}
