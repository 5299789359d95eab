import type {V1Service} from '@kubernetes/client-node'
import type {ClusterState} from '../cluster/types.js'
import {familyOf as addressFamily} from '../net/address.js'
import {joinHostPort} from '../net/host-port.js'
import {servicePortName} from './chain-names.js'
import {categorizeEndpoints, endpointsForPort, type EndpointInfo} from './endpoints.js'

export interface ExpectedEndpoint extends EndpointInfo {
  /** "ip:port" as kube-proxy writes it in DNAT and comments. */
  address: string
}

/** What kube-proxy should program on one node for one service port. */
export interface ExpectedPort {
  /** The Service's ClusterIP (same for every port). */
  clusterIP: string
  portName: string
  svcPortName: string
  /** The Service this port belongs to: each mode derives its own chain names from it. */
  serviceNamespace: string
  serviceName: string
  protocol: 'tcp' | 'udp' | 'sctp'
  port: number
  targetPort: string
  nodePort?: number
  allEndpoints: ExpectedEndpoint[]
  hasEndpoints: boolean
  /** Endpoints reached from a ClusterIP (internalTrafficPolicy), local ones only when the policy is Local. */
  internal: {endpoints: ExpectedEndpoint[]; local: boolean}
  /** Endpoints reached from NodePort/LB/externalIP (externalTrafficPolicy), local ones only when the policy is Local. */
  external: {endpoints: ExpectedEndpoint[]; local: boolean}
  clusterEndpoints: ExpectedEndpoint[]
  localEndpoints: ExpectedEndpoint[]
  /** Every endpoint that gets a KUBE-SEP chain on this node. */
  reachable: ExpectedEndpoint[]
  usesExternalChain: boolean
  usesFirewallChain: boolean
}

export interface ExpectedService {
  namespace: string
  name: string
  /** Why kube-proxy programs nothing for this Service, when it programs nothing by design. */
  notProxied?: string
  clusterIP?: string
  externalIPs: string[]
  loadBalancerIPs: string[]
  /** spec.loadBalancerSourceRanges of this family: the sources the LoadBalancer IPs take new connections from (none: any). */
  loadBalancerSourceRanges?: string[]
  externallyAccessible: boolean
  sessionAffinitySeconds?: number
  masqueradeMark: number
  masqueradeAll: boolean
  clusterCIDR?: string
  ports: ExpectedPort[]
}

export function notProxiedReason(svc: V1Service): string | undefined {
  const type = svc.spec?.type ?? 'ClusterIP'
  if (type === 'ExternalName')
    return `ExternalName Service: DNS answers with a CNAME to ${svc.spec?.externalName ?? '?'}; kube-proxy programs nothing`
  if (svc.metadata?.labels?.['service.kubernetes.io/service-proxy-name'])
    return `labelled service.kubernetes.io/service-proxy-name=${svc.metadata.labels['service.kubernetes.io/service-proxy-name']}: another proxy owns it, kube-proxy programs nothing`
  const ip = svc.spec?.clusterIP
  if (!ip || ip === 'None')
    return 'headless Service (clusterIP: None): DNS returns the Pod IPs directly; kube-proxy programs nothing'
  return undefined
}

export type IpFamily = 'IPv4' | 'IPv6'

function familyOf(ip: string): IpFamily {
  return addressFamily(ip) === 6 ? 'IPv6' : 'IPv4'
}

/**
 * The Service's address families, each with its ClusterIP, the primary (spec.clusterIP) first: spec.clusterIPs, else
 * spec.clusterIP. A dual-stack Service has one of each; kube-proxy programs each family in its own tables.
 */
export function serviceFamilies(svc: V1Service): Array<{family: IpFamily; clusterIP: string}> {
  const primary = svc.spec?.clusterIP
  if (!primary || primary === 'None' || addressFamily(primary) === undefined) return []
  const out = [{family: familyOf(primary), clusterIP: primary}]
  for (const ip of svc.spec?.clusterIPs ?? []) {
    if (typeof ip !== 'string' || addressFamily(ip) === undefined) continue
    if (!out.some((f) => f.family === familyOf(ip))) out.push({family: familyOf(ip), clusterIP: ip})
  }
  return out
}

/**
 * kube-proxy's desired state for one Service on the node `nodeName`, for one of its address families (default: the
 * primary, spec.clusterIP's): that family's ClusterIP, externalIPs, LoadBalancer IPs and EndpointSlices.
 */
export function expectedService(cluster: ClusterState, nodeName: string, ipFamily?: IpFamily): ExpectedService {
  const svc = cluster.service
  const namespace = svc.metadata?.namespace ?? 'default'
  const name = svc.metadata?.name ?? ''
  const base: ExpectedService = {
    namespace,
    name,
    externalIPs: [],
    loadBalancerIPs: [],
    externallyAccessible: false,
    masqueradeMark: 1 << cluster.proxyConfig.masqueradeBit,
    masqueradeAll: cluster.proxyConfig.masqueradeAll,
    clusterCIDR: cluster.proxyConfig.clusterCIDR,
    ports: [],
  }
  const reason = notProxiedReason(svc)
  if (reason) return {...base, notProxied: reason}
  const clusterIP = serviceFamilies(svc).find((f) => f.family === ipFamily)?.clusterIP ?? svc.spec!.clusterIP!
  const family = familyOf(clusterIP)
  const externalIPs = (svc.spec?.externalIPs ?? []).filter((ip) => familyOf(ip) === family)
  const loadBalancerIPs =
    svc.spec?.type === 'LoadBalancer'
      ? (svc.status?.loadBalancer?.ingress ?? [])
          .map((i) => i.ip ?? '')
          .filter((ip) => ip && familyOf(ip) === family && ingressIpMode(svc, ip) !== 'Proxy')
      : []
  const hasNodePorts = (svc.spec?.ports ?? []).some((p) => p.nodePort)
  const externallyAccessible = hasNodePorts || externalIPs.length > 0 || loadBalancerIPs.length > 0
  const zone = cluster.nodes.find((n) => n.metadata?.name === nodeName)?.metadata?.labels?.[
    'topology.kubernetes.io/zone'
  ]
  const policy = {
    internalLocal: svc.spec?.internalTrafficPolicy === 'Local',
    externalLocal: externallyAccessible && svc.spec?.externalTrafficPolicy === 'Local',
    externallyAccessible,
  }
  const ports = (svc.spec?.ports ?? []).map((p): ExpectedPort => {
    const protocol = (p.protocol ?? 'TCP').toLowerCase() as ExpectedPort['protocol']
    const spn = servicePortName(namespace, name, p.name)
    const all = endpointsForPort(cluster.slices, p, family).map(toExpected)
    // categorizeEndpoints picks among the objects it is given: each is already its expected endpoint (a copy of the
    // list, as each category is an array of its own).
    const pick = (list: EndpointInfo[]) => list.slice() as ExpectedEndpoint[]
    const cat = categorizeEndpoints(all, policy, nodeName, zone)
    const clusterEndpoints = pick(cat.cluster)
    const localEndpoints = pick(cat.local)
    const usesLocalChain = policy.internalLocal || policy.externalLocal
    return {
      clusterIP,
      portName: p.name ?? '',
      svcPortName: spn,
      serviceNamespace: namespace,
      serviceName: name,
      protocol,
      port: p.port,
      targetPort: String(p.targetPort ?? p.port),
      nodePort: p.nodePort || undefined,
      allEndpoints: all,
      hasEndpoints: cat.hasAny,
      internal: policy.internalLocal
        ? {endpoints: localEndpoints, local: true}
        : {endpoints: clusterEndpoints, local: false},
      external: policy.externalLocal
        ? {endpoints: localEndpoints, local: true}
        : {endpoints: clusterEndpoints, local: false},
      clusterEndpoints,
      localEndpoints: usesLocalChain ? localEndpoints : [],
      reachable: pick(cat.allReachable),
      usesExternalChain: cat.hasAny && externallyAccessible,
      usesFirewallChain:
        cat.hasAny && loadBalancerIPs.length > 0 && (svc.spec?.loadBalancerSourceRanges ?? []).length > 0,
    }
  })
  // Every field written out in base's order, then the new ones (as a spread of base would order them): a spread
  // followed by fields it already has was most of expectedService, which a scan asks for on every node.
  return {
    namespace,
    name,
    externalIPs,
    loadBalancerIPs,
    externallyAccessible,
    masqueradeMark: base.masqueradeMark,
    masqueradeAll: base.masqueradeAll,
    clusterCIDR: base.clusterCIDR,
    ports,
    clusterIP,
    loadBalancerSourceRanges: (svc.spec?.loadBalancerSourceRanges ?? []).filter(
      (r) => familyOf(r.split('/')[0].trim()) === family,
    ),
    sessionAffinitySeconds:
      svc.spec?.sessionAffinity === 'ClientIP'
        ? (svc.spec?.sessionAffinityConfig?.clientIP?.timeoutSeconds ?? 10800)
        : undefined,
  }
}

/**
 * An endpoint with its address: the EndpointInfo endpointsForPort made for this call alone, its address added in place
 * (a scan asks for every Service's endpoints on every node; a spread copy of each was most of expectedService).
 */
function toExpected(e: EndpointInfo): ExpectedEndpoint {
  const expected = e as ExpectedEndpoint
  expected.address = joinHostPort(e.ip, e.port)
  return expected
}

function ingressIpMode(svc: V1Service, ip: string): string | undefined {
  return (svc.status?.loadBalancer?.ingress ?? []).find((i) => i.ip === ip)?.ipMode
}
