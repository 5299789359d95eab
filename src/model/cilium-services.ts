import type {CiliumBackend, CiliumFrontend} from '../parse/cilium-services.js'
import {joinHostPort} from '../net/host-port.js'
import type {ExpectedEndpoint, ExpectedPort, ExpectedService} from './expected.js'

/** One frontend the Service should have in Cilium's load-balancing state on a node, as the node's agent lists it. */
export interface CiliumFrontendView {
  port: ExpectedPort
  kind: 'ClusterIP' | 'NodePort'
  /** "10.96.10.10:80/tcp", or "NodePort 30080/tcp" (a NodePort frontend is listed once per node address). */
  label: string
  /** The agent's frontends matching it (a NodePort's: one per address); empty when it is missing. */
  found: CiliumFrontend[]
  /** Ready endpoints of the EndpointSlices that no matching frontend has as a backend. */
  missing: ExpectedEndpoint[]
  /** Backends (ip:port) in no EndpointSlice of the Service. */
  stale: CiliumBackend[]
  /** Backends the agent sends new connections to (active) whose endpoint is neither ready nor serving. */
  notReadyActive: Array<{backend: CiliumBackend; endpoint: ExpectedEndpoint}>
}

/** A node whose Services Cilium implements and whose agent's Service list was read, compared with the slices. */
export interface CiliumNodeView {
  node: string
  frontends: CiliumFrontendView[]
}

const endpointKey = (ip: string, port: number) => joinHostPort(ip, port)

function sameProtocol(frontend: CiliumFrontend, port: ExpectedPort): boolean {
  return frontend.protocol === port.protocol || frontend.protocol === 'any'
}

function compare(
  port: ExpectedPort,
  kind: CiliumFrontendView['kind'],
  label: string,
  found: CiliumFrontend[],
): CiliumFrontendView {
  const backends = found.flatMap((f) => f.backends)
  const listed = new Set(backends.map((b) => endpointKey(b.ip, b.port)))
  const bySlices = new Map(port.allEndpoints.map((e) => [endpointKey(e.ip, e.port), e]))
  const unique = new Map(backends.map((b) => [`${endpointKey(b.ip, b.port)}\0${b.state}`, b]))
  return {
    port,
    kind,
    label,
    found,
    missing: found.length === 0 ? [] : port.allEndpoints.filter((e) => e.ready && !listed.has(e.address)),
    stale: [...unique.values()].filter((b) => !bySlices.has(endpointKey(b.ip, b.port))),
    notReadyActive: [...unique.values()].flatMap((backend) => {
      const endpoint = bySlices.get(endpointKey(backend.ip, backend.port))
      return endpoint && backend.state === 'active' && !endpoint.ready && !endpoint.serving ? [{backend, endpoint}] : []
    }),
  }
}

/**
 * What the agent on `node` lists for the Service, frontend by frontend: its ClusterIP on each port and, where the port
 * has one, its NodePort (matched by port and protocol whatever the address: the agent lists it per node address).
 */
export function ciliumNodeView(service: ExpectedService, node: string, frontends: CiliumFrontend[]): CiliumNodeView {
  const views: CiliumFrontendView[] = []
  for (const port of service.ports) {
    if (service.clusterIP) {
      const found = frontends.filter(
        (f) => f.type === 'ClusterIP' && f.ip === service.clusterIP && f.port === port.port && sameProtocol(f, port),
      )
      views.push(compare(port, 'ClusterIP', `${joinHostPort(service.clusterIP, port.port)}/${port.protocol}`, found))
    }
    if (port.nodePort) {
      const found = frontends.filter((f) => f.type === 'NodePort' && f.port === port.nodePort && sameProtocol(f, port))
      views.push(compare(port, 'NodePort', `NodePort ${port.nodePort}/${port.protocol}`, found))
    }
  }
  return {node, frontends: views}
}

/** The backends the EndpointSlices ask for, as backendSignature writes them: ready ones active, serving ones terminating. */
export function wantedSignature(view: CiliumFrontendView): string {
  const wanted = view.port.allEndpoints.flatMap((e) =>
    e.ready ? [`${e.address} (active)`] : e.serving && e.terminating ? [`${e.address} (terminating)`] : [],
  )
  return [...new Set(wanted)].sort().join(', ') || '(none)'
}

/** A frontend's backends as "ip:port (state)", sorted: what two nodes are compared by. */
export function backendSignature(view: CiliumFrontendView): string {
  const all = new Set(view.found.flatMap((f) => f.backends.map((b) => `${endpointKey(b.ip, b.port)} (${b.state})`)))
  return [...all].sort().join(', ') || '(none)'
}
