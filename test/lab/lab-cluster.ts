/** The lab's cluster: two nodes, a web Service with three backends, and cluster DNS. One description feeds the
 * API fixtures, the kube-proxy-style rules and the network namespaces, so they always agree. */
export interface LabNode {
  name: string
  /** Short letter used in interface and namespace names. */
  key: string
  ip: string
  podCIDR: string
  gateway: string
  /** Dual-stack: the node's IPv6 InternalIP, pod CIDR and bridge address. */
  ip6?: string
  podCIDR6?: string
  gateway6?: string
}

export interface LabPod {
  name: string
  namespace: string
  node: string
  ip: string
  /** Dual-stack: the pod's IPv6 address. */
  ip6?: string
  labels: Record<string, string>
  port: number
  portName: string
  ready: boolean
  /** What the pod's server answers with. */
  reply: string
  kind: 'web' | 'dns' | 'client'
}

export interface LabServicePort {
  name: string
  port: number
  targetPort: number | string
  protocol: 'TCP' | 'UDP'
  nodePort?: number
}

export interface LabService {
  namespace: string
  name: string
  clusterIP: string
  /** Dual-stack (ipFamilies IPv4, IPv6): the IPv6 ClusterIP. */
  clusterIP6?: string
  type: 'ClusterIP' | 'NodePort'
  selector: Record<string, string>
  ports: LabServicePort[]
  externalTrafficPolicy?: 'Cluster' | 'Local'
  /** ClientIP session affinity timeout, when the Service has it. */
  affinitySeconds?: number
}

export const NODES: LabNode[] = [
  {name: 'node-a', key: 'a', ip: '10.200.0.11', podCIDR: '10.244.1.0/24', gateway: '10.244.1.1'},
  {name: 'node-b', key: 'b', ip: '10.200.0.12', podCIDR: '10.244.2.0/24', gateway: '10.244.2.1'},
]

export const OUTSIDE_IP = '10.200.0.100'
export const CLUSTER_CIDR = '10.244.0.0/16'

/**
 * The lab's IPv6 twin of an IPv4 address (unique local addresses, never routed off the lab): 10.244.1.10 →
 * fd00:10:244:1::10, 10.200.0.11 → fd00:10:200::11, 10.96.10.10 → fd00:10:96::10:10.
 */
function v6Of(ip: string): string {
  const [a, b, c, d] = ip.split('.')
  if (a === '10' && b === '244') return `fd00:10:244:${c}::${d}`
  if (a === '10' && b === '96') return `fd00:10:96::${c === '0' ? '' : `${c}:`}${d}`
  return `fd00:${a}:${b}::${c === '0' ? '' : `${c}:`}${d}`
}
export const CLUSTER_CIDR6 = 'fd00:10:244::/56'

/** The node with its IPv6 addresses too (a dual-stack cluster). */
export function dualStackNode(n: LabNode): LabNode {
  return {...n, ip6: v6Of(n.ip), podCIDR6: `${v6Of(n.gateway).replace(/::1$/, '::')}/64`, gateway6: v6Of(n.gateway)}
}

/** The pods with an IPv6 address each too. */
export function dualStackPods(pods: LabPod[]): LabPod[] {
  return pods.map((p) => ({...p, ip6: v6Of(p.ip)}))
}

/** The Service with an IPv6 ClusterIP too (ipFamilyPolicy RequireDualStack, ipFamilies IPv4, IPv6). */
export function dualStackService(s: LabService): LabService {
  return {...s, clusterIP6: v6Of(s.clusterIP)}
}

/** The family-6 view of the lab: each Service's and Pod's IPv6 address in place of its IPv4 one (those without one left out). */
export function familyView(
  family: 4 | 6,
  services: LabService[],
  pods: LabPod[],
): {services: LabService[]; pods: LabPod[]} {
  if (family === 4) return {services, pods}
  return {
    services: services.filter((s) => s.clusterIP6).map((s) => ({...s, clusterIP: s.clusterIP6!})),
    pods: pods.filter((p) => p.ip6).map((p) => ({...p, ip: p.ip6!})),
  }
}

export function labPods(): LabPod[] {
  return [
    {
      name: 'web-a1',
      namespace: 'shop',
      node: 'node-a',
      ip: '10.244.1.10',
      labels: {app: 'web'},
      port: 8080,
      portName: 'http',
      ready: true,
      reply: 'web-a1',
      kind: 'web',
    },
    {
      name: 'web-b1',
      namespace: 'shop',
      node: 'node-b',
      ip: '10.244.2.10',
      labels: {app: 'web'},
      port: 8080,
      portName: 'http',
      ready: true,
      reply: 'web-b1',
      kind: 'web',
    },
    {
      name: 'web-b2',
      namespace: 'shop',
      node: 'node-b',
      ip: '10.244.2.11',
      labels: {app: 'web'},
      port: 8080,
      portName: 'http',
      ready: true,
      reply: 'web-b2',
      kind: 'web',
    },
    {
      name: 'client-a',
      namespace: 'shop',
      node: 'node-a',
      ip: '10.244.1.100',
      labels: {app: 'client'},
      port: 0,
      portName: '',
      ready: true,
      reply: '',
      kind: 'client',
    },
    {
      name: 'client-b',
      namespace: 'shop',
      node: 'node-b',
      ip: '10.244.2.100',
      labels: {app: 'client'},
      port: 0,
      portName: '',
      ready: true,
      reply: '',
      kind: 'client',
    },
    {
      name: 'coredns-a',
      namespace: 'kube-system',
      node: 'node-a',
      ip: '10.244.1.53',
      labels: {'k8s-app': 'kube-dns'},
      port: 53,
      portName: 'dns-tcp',
      ready: true,
      reply: '',
      kind: 'dns',
    },
  ]
}

export const WEB: LabService = {
  namespace: 'shop',
  name: 'web',
  clusterIP: '10.96.10.10',
  type: 'NodePort',
  selector: {app: 'web'},
  ports: [{name: 'http', port: 80, targetPort: 'http', protocol: 'TCP', nodePort: 30080}],
}

export const DNS: LabService = {
  namespace: 'kube-system',
  name: 'kube-dns',
  clusterIP: '10.96.0.10',
  type: 'ClusterIP',
  selector: {'k8s-app': 'kube-dns'},
  ports: [
    {name: 'dns', port: 53, targetPort: 53, protocol: 'UDP'},
    {name: 'dns-tcp', port: 53, targetPort: 53, protocol: 'TCP'},
  ],
}

export const SERVICES = [WEB, DNS]

/** The endpoint port a pod gives a service port (named targetPorts resolved like the endpoint controller). */
export function endpointPort(svcPort: LabServicePort, pod: LabPod): number {
  return typeof svcPort.targetPort === 'number'
    ? svcPort.targetPort
    : pod.portName === svcPort.targetPort
      ? pod.port
      : 0
}

export function selects(svc: LabService, pod: LabPod): boolean {
  return pod.namespace === svc.namespace && Object.entries(svc.selector).every(([k, v]) => pod.labels[k] === v)
}

export interface LabEndpoint {
  ip: string
  port: number
  /** undefined for an address no pod has (a stale endpoint). */
  node?: string
}

/** The endpoints kube-proxy would program for one service port: ready selected pods, plus/minus a fault's changes. */
export function labEndpoints(
  svc: LabService,
  sp: LabServicePort,
  pods: LabPod[],
  change: {omit?: string; stale?: {ip: string; port: number}} = {},
): LabEndpoint[] {
  const eps: LabEndpoint[] = pods
    .filter((p) => selects(svc, p) && p.ready && endpointPort(sp, p) > 0 && p.ip !== change.omit)
    .map((p) => ({ip: p.ip, port: endpointPort(sp, p), node: p.node}))
    .sort((a, b) => a.ip.localeCompare(b.ip))
  if (change.stale) eps.push(change.stale)
  return eps
}
