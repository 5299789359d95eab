/**
 * What one round of `svc --watch` reads again, and what it keeps from the round before. The API's watched objects
 * (the Service, its EndpointSlices, its Pods, kube-proxy's and the agents' Pods) are in the watch's store; the nodes'
 * rules have no watch. One table decides, from why the round runs and what changed:
 *
 * - API: the first round lists everything. Later rounds read the watched objects from the store; the objects nobody
 *   watches (Nodes, the kube-proxy and CoreDNS ConfigMaps, the DNS Service, NetworkPolicies, the Service's
 *   namespace's other Pods) are kept from the last time they were read, and read again on a full refresh, when the
 *   Service changed (its selector picks other Pods) and when kube-proxy's or an agent's Pod changed (a restart often
 *   follows a change of its ConfigMap).
 * - Nodes: the first round and a full refresh read every node in full. A node whose read failed, or that was not read
 *   the round before, is read in full; so is a node whose kube-proxy (or agent) Pod changed: it restarted, with maybe
 *   another mode or configuration. Otherwise the rules (and conntrack) are read again when they are expected to
 *   change: on the interval, after a change of the Service or its EndpointSlices (kube-proxy reprograms), and on the
 *   re-check after the settle; a change of the Service's Pods alone keeps the node's last reads whole (kube-proxy
 *   follows the EndpointSlices, not the Pods), unless the nodes are probed (the probes are traffic of this round).
 */

/** Why a round runs: the first diagnosis, a watched object changed, the interval passed, the re-check of a break. */
export type RoundTrigger = 'first' | 'change' | 'interval' | 'settle'

/** What a watched object is to the diagnosis. */
export type WatchedRole = 'service' | 'endpointslice' | 'pod' | 'proxy-pod'

/** One change a watch delivered: the object's role, name and (a Pod's) node; name null: a re-list, anything changed. */
export interface WatchedChange {
  role: WatchedRole
  name: string | null
  node: string | null
}

export interface RoundInput {
  trigger: RoundTrigger
  /** The changes since the round before (empty on the interval). */
  changes: WatchedChange[]
  /** This interval round is the full refresh (every FULL_REFRESH_EVERY intervals). */
  fullRefresh: boolean
  /** The nodes are probed: each round's probes need the node read this round. */
  probes: boolean
}

/** How a node is read this round: all its reads, its rules only (the rest kept), or nothing (its last reads kept). */
export type NodeRead = 'full' | 'rules' | 'kept'

/** How the previous round left a node: read, failed (unreachable, or its read failed), or not read at all. */
export type NodeBefore = 'read' | 'failed' | 'absent'

/** How the API is read this round: all listed, the watched from the store (the rest kept, or read again). */
export type ApiRead = 'list' | 'store' | 'store, the rest again'

/** Every this many intervals, a round reads everything again (nodes in full, the unwatched objects). */
export const FULL_REFRESH_EVERY = 6

/** Changes after which kube-proxy (or the implementer) reprograms the nodes' rules. */
const REPROGRAMS: ReadonlySet<WatchedRole> = new Set(['service', 'endpointslice'])

/** Whether a round of these changes is one after which a break may be kube-proxy not having synced yet. */
export function reprograms(changes: WatchedChange[]): boolean {
  return changes.some((c) => REPROGRAMS.has(c.role))
}

export function apiRead(round: RoundInput): ApiRead {
  if (round.trigger === 'first') return 'list'
  if (round.fullRefresh || round.changes.some((c) => c.role === 'service' || c.role === 'proxy-pod'))
    return 'store, the rest again'
  return 'store'
}

export function nodeRead(round: RoundInput, node: string, before: NodeBefore): NodeRead {
  if (round.trigger === 'first' || round.fullRefresh || before !== 'read') return 'full'
  if (round.changes.some((c) => c.role === 'proxy-pod' && (c.node === node || c.name === null))) return 'full'
  if (round.trigger !== 'change' || reprograms(round.changes) || round.probes) return 'rules'
  return 'kept'
}

/** The objects a round's changes name, for --verbose: "EndpointSlice web-abc, Pod web-1" (a re-list: "Pods (all)"). */
function describeChanges(changes: WatchedChange[]): string {
  const kind: Record<WatchedRole, string> = {
    service: 'Service',
    endpointslice: 'EndpointSlice',
    pod: 'Pod',
    'proxy-pod': 'Pod',
  }
  const named = changes.map((c) => (c.name === null ? `${kind[c.role]}s (re-listed)` : `${kind[c.role]} ${c.name}`))
  return [...new Set(named)].join(', ')
}

/**
 * The --verbose line of a round: "round 3: API from the watch's store (EndpointSlice web-abc changed); nodes: rules of
 * node-a, node-b; other reads kept".
 */
export function describeRound(number: number, round: RoundInput, reads: Map<string, NodeRead>): string {
  const api = apiRead(round)
  const why =
    round.trigger === 'change'
      ? `${describeChanges(round.changes)} changed`
      : round.trigger === 'interval'
        ? `--watch-interval${round.fullRefresh ? ', full refresh' : ''}`
        : round.trigger === 'settle'
          ? 're-check after the settle'
          : 'first diagnosis'
  const apiWords =
    api === 'list'
      ? 'API listed'
      : api === 'store'
        ? "API from the watch's store, the rest kept"
        : "API from the watch's store, the rest read again"
  const of = (r: NodeRead) => [...reads].filter(([, x]) => x === r).map(([n]) => n)
  const parts = [
    of('full').length > 0 && `all of ${of('full').join(', ')}`,
    of('rules').length > 0 && `rules of ${of('rules').join(', ')}`,
    of('kept').length > 0 && `nothing of ${of('kept').join(', ')}`,
  ].filter(Boolean)
  const keptNote = of('rules').length + of('kept').length > 0 ? '; other reads kept' : ''
  return `round ${number}: ${apiWords} (${why}); nodes: ${parts.join('; ') || 'none'}${keptNote}`
}
