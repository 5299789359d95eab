import {nestsDeeperThan} from './json-depth.js'
import {ParseError} from './parse-error.js'

/**
 * `cilium-dbg service list -o json` (the older binary: `cilium service list -o json`): an array of the agent API's
 * `Service` objects, `{spec: {id, "frontend-address": {ip, port, protocol, scope}, "backend-addresses": [{ip, port,
 * protocol, state, nodeName, weight, …}], flags: {type, name, namespace, trafficPolicy, …}}, status: …}`.
 */

/** One backend of a frontend as the agent has it in its load-balancing maps. */
export interface CiliumBackend {
  ip: string
  port: number
  /** active, terminating, quarantined or maintenance; `active` where the agent predates backend states. */
  state: string
  nodeName?: string
  weight?: number
}

/** One frontend (an address, port and protocol of one Service type) and its backends. */
export interface CiliumFrontend {
  id: number
  ip: string
  port: number
  /** Lower case as the rest of the tool writes protocols: tcp, udp, sctp; `any` where the agent does not say. */
  protocol: string
  /** ClusterIP, NodePort, ExternalIPs, HostPort, LoadBalancer, LocalRedirect. */
  type: string
  namespace?: string
  name?: string
  backends: CiliumBackend[]
}

const WHAT = 'cilium-dbg service list -o json'
/** Service → spec → backend-addresses → backend → field: far below this. */
const MAX_DEPTH = 16

type Json = Record<string, unknown>

const isObject = (x: unknown): x is Json => typeof x === 'object' && x !== null && !Array.isArray(x)

function portOf(x: unknown, where: string): number {
  if (typeof x !== 'number' || !Number.isInteger(x) || x < 0 || x > 65535)
    throw new ParseError(0, `${where}: port ${JSON.stringify(x)} is not a port number`, {what: WHAT})
  return x
}

function ipOf(x: unknown, where: string): string {
  if (typeof x !== 'string' || x === '') throw new ParseError(0, `${where}: no ip`, {what: WHAT})
  return x
}

const optionalString = (x: unknown) => (typeof x === 'string' && x !== '' ? x : undefined)

function backendOf(b: unknown, where: string): CiliumBackend {
  if (!isObject(b)) throw new ParseError(0, `${where}: not an object`, {what: WHAT})
  const nodeName = optionalString(b.nodeName)
  return {
    ip: ipOf(b.ip, where),
    port: portOf(b.port, where),
    state: optionalString(b.state) ?? 'active',
    ...(nodeName ? {nodeName} : {}),
    ...(typeof b.weight === 'number' ? {weight: b.weight} : {}),
  }
}

function frontendOf(s: unknown, index: number): CiliumFrontend {
  const where = `service ${index + 1}`
  const spec = isObject(s) ? s.spec : undefined
  if (!isObject(spec)) throw new ParseError(0, `${where}: no spec`, {what: WHAT})
  const front = spec['frontend-address']
  if (!isObject(front)) throw new ParseError(0, `${where}: no frontend-address`, {what: WHAT})
  const flags = isObject(spec.flags) ? spec.flags : {}
  const backends = spec['backend-addresses'] ?? []
  if (!Array.isArray(backends)) throw new ParseError(0, `${where}: backend-addresses is not a list`, {what: WHAT})
  const namespace = optionalString(flags.namespace)
  const name = optionalString(flags.name)
  return {
    id: typeof spec.id === 'number' ? spec.id : 0,
    ip: ipOf(front.ip, `${where} frontend`),
    port: portOf(front.port, `${where} frontend`),
    protocol: (optionalString(front.protocol) ?? 'ANY').toLowerCase(),
    type: optionalString(flags.type) ?? 'ClusterIP',
    ...(namespace ? {namespace} : {}),
    ...(name ? {name} : {}),
    backends: backends.map((b, i) => backendOf(b, `${where} backend ${i + 1}`)),
  }
}

/** Every frontend the agent lists, in its order; ParseError where the text is not that list. */
export function parseCiliumServices(text: string): CiliumFrontend[] {
  let root: unknown
  try {
    root = JSON.parse(text)
  } catch (e) {
    throw new ParseError(0, 'not JSON', {what: WHAT, cause: e})
  }
  // An agent with no Service prints null.
  if (root === null) return []
  if (!Array.isArray(root)) throw new ParseError(0, 'not a list of services', {what: WHAT})
  if (nestsDeeperThan(root, MAX_DEPTH)) throw new ParseError(0, `nests deeper than ${MAX_DEPTH}`, {what: WHAT})
  return root.map(frontendOf)
}
