import type {CheckContext} from '../check.js'
import type {Entry, PathResult} from '../../model/paths.js'
import {joinHostPort} from '../../net/host-port.js'
import {failureParts, type ProbeRun, type ProbeTally, type ServiceProbeTarget} from '../../node/probe/tcp-probe.js'

export type Tally = ProbeTally<ServiceProbeTarget>
type ProbesRan = Extract<ProbeRun, {ran: true}>

/** The probe stage's results, when probes ran. */
export function probesRan(ctx: CheckContext): ProbesRan | undefined {
  return ctx.probes.ran ? ctx.probes : undefined
}

const probed = (t: Tally) => t.attempts > 0
export const failed = (t: Tally) => probed(t) && t.connected < t.attempts
export const answered = (t: Tally) => probed(t) && t.connected === t.attempts

/** "0/3 connected (3 refused)", "8/8 connected". */
export function describeTally(t: Tally): string {
  const why = failureParts(t)
  return `${t.connected}/${t.attempts} connected${why.length ? ` (${why.join(', ')})` : ''}`
}

/** How failing tallies failed, as a verb phrase. */
export function failureVerb(tallies: Tally[]): string {
  if (tallies.every((t) => t.timedOut === 0 && t.unreachable === 0)) return 'refuses connections'
  if (tallies.every((t) => t.refused === 0 && t.unreachable === 0)) return 'does not answer (connections time out)'
  return 'fails connections'
}

export interface EndpointProbes {
  address: string
  target: ServiceProbeTarget
  /** Each node that probed it (attempts made), with its tally. */
  byNode: Array<{node: string; tally: Tally}>
}

/** Every endpoint probed directly, from every node that probed it (ports sharing a target are counted once). */
export function endpointProbes(run: ProbesRan): EndpointProbes[] {
  const out = new Map<string, EndpointProbes>()
  for (const n of run.nodes)
    for (const t of n.tallies) {
      if (t.target.kind !== 'endpoint' || !probed(t)) continue
      const address = joinHostPort(t.target.host, t.target.port)
      const entry = out.get(address) ?? {address, target: t.target, byNode: []}
      out.set(address, entry)
      if (!entry.byNode.some((b) => b.node === n.node)) entry.byNode.push({node: n.node, tally: t})
    }
  return [...out.values()]
}

/**
 * Where an endpoint's probe failures point: nowhere (it answers everywhere), the backend (it fails from every node
 * that probed it), the path between nodes (it answers from its own node, fails from another), or none of these.
 */
export function endpointVerdict(e: EndpointProbes): 'answers' | 'backend' | 'cross-node' | 'unexplained' {
  const failing = e.byNode.filter((b) => failed(b.tally))
  if (failing.length === 0) return 'answers'
  if (failing.length === e.byNode.length) return 'backend'
  const own = e.byNode.find((b) => b.node === e.target.podNode)
  return own && answered(own.tally) ? 'cross-node' : 'unexplained'
}

/** "pod web-b2 on node-b", or what is known of it. */
export function endpointName(t: ServiceProbeTarget): string {
  const address = joinHostPort(t.host, t.port)
  if (!t.pod) return `endpoint ${address}${t.podNode ? ` on ${t.podNode}` : ''}`
  return `endpoint ${address} (pod ${t.pod}${t.podNode ? ` on ${t.podNode}` : ''})`
}

/** The statically traced path that sends the same kind of packet as a probe of a Service address from `node`. */
export function staticPathFor(ctx: CheckContext, node: string, t: ServiceProbeTarget): PathResult | undefined {
  const entry: Entry = t.kind === 'NodePort' ? 'outside→NodePort' : 'node→ClusterIP'
  return ctx.paths.find((p) => p.node === node && p.port === t.servicePort && p.entry === entry)
}

/** The static trace expects new connections to fail: a broken path, or one dropped by design (a Local policy). */
export function staticExpectsFailure(p: PathResult | undefined): boolean {
  return !!p && (p.ok === false || (p.ok === null && p.breaksAt === null))
}

/** The share of new connections the static trace sends to a ready endpoint (0: it expects every one to fail). */
export function staticWorkingShare(ctx: CheckContext, p: PathResult): number {
  const ready = new Set(
    ctx.service.ports.flatMap((port) => port.allEndpoints.filter((e) => e.ready).map((e) => e.address)),
  )
  return p.trace.outcomes
    .filter((o) => o.verdict === 'DNAT' && o.destination !== null && ready.has(o.destination))
    .reduce((sum, o) => sum + o.probability, 0)
}

/** The endpoints a Service address sends to from `node` (its traffic policy applied), by address. */
export function endpointsBehind(ctx: CheckContext, node: string, t: ServiceProbeTarget): string[] {
  const view = ctx.nodes.find((n) => n.name === node)
  const ports = (view?.expected ?? ctx.service).ports
  const port = ports.find((p) => (p.portName || String(p.port)) === t.servicePort)
  if (!port) return []
  const list = view
    ? t.kind === 'NodePort'
      ? port.external.endpoints
      : port.internal.endpoints
    : port.allEndpoints.filter((e) => e.ready)
  return list.map((e) => e.address)
}

export function addressOf(t: ServiceProbeTarget): string {
  return joinHostPort(t.host, t.port)
}
