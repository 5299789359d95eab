import type {KernelVerdict} from '../checks/rules/kernel-disagrees.js'
import type {KernelAnswer, MatchedBy} from '../node/probe/kernel-evidence.js'
import {joinHostPort} from '../net/host-port.js'
import type {TargetCounters} from '../checks/rules/kernel-counters.js'

/**
 * One probed Service address from one node, as the kernel saw the probes (JSON `kernelTrace`): the endpoints its DNAT
 * chose, whether replies came back, and whether that agrees with the walk. `rules` is the kernel's own rule-by-rule
 * trace, which only a netfilter trace gives: empty until one is made.
 */
export interface KernelTraceItem {
  node: string
  /** The address probed, host:port. */
  target: string
  kind: 'ClusterIP' | 'NodePort'
  port: string
  /** The walked path the probe's packet takes (node→ClusterIP, outside→NodePort). */
  entry: string
  /** The one endpoint the kernel chose for every probe, else null (several, or none found). */
  endpoint: string | null
  /** Every endpoint the kernel chose (host:port). */
  endpoints: string[]
  /** Every connection got a reply (true), none did (false), some did or none was found (null). */
  replied: boolean | null
  /** How the probes' entries were told from other traffic: by source port, or by the seconds since the probes. */
  matchedBy: MatchedBy | null
  connections: Array<{endpoint: string; dnat: boolean; answer: KernelAnswer; state: string | null}>
  /** Entries beyond the number of probes: other traffic to the address in the same seconds (evidence, not proof). */
  others: number
  /** Probes that left no entry (a connection refused with a reset is removed from the table at once). */
  unrecorded: number
  rules: Array<{table: string; chain: string; rule: string; verdict: string}>
  agreesWithWalk: boolean | null
  detail: string
  /** Replayed from a snapshot bundle: when `collect --probe` recorded it, not a fresh read. */
  recordedAt?: string
  /** The walk's rules whose counters the probes moved (iptables; absent where the counters were not read). */
  counters?: TargetCounters
}

function replied(v: KernelVerdict): boolean | null {
  if (v.connections.length === 0) return null
  const answered = v.connections.filter((c) => c.answer === 'replied').length
  return answered === v.connections.length ? true : answered === 0 ? false : null
}

export function kernelTrace(verdicts: KernelVerdict[]): KernelTraceItem[] {
  return verdicts.map((v) => {
    const endpoints = [...new Set(v.connections.filter((c) => c.dnat).map((c) => c.endpoint))]
    return {
      node: v.node,
      target: joinHostPort(v.target.host, v.target.port),
      kind: v.target.kind === 'NodePort' ? 'NodePort' : 'ClusterIP',
      port: v.target.servicePort,
      entry: v.entry,
      endpoint: endpoints.length === 1 && v.connections.every((c) => c.dnat) ? endpoints[0] : null,
      endpoints,
      replied: replied(v),
      matchedBy: v.matchedBy,
      connections: v.connections.map(({endpoint, dnat, answer, state}) => ({endpoint, dnat, answer, state})),
      others: v.others,
      unrecorded: v.unrecorded,
      rules: v.rules,
      agreesWithWalk: v.agreesWithWalk,
      detail: v.detail,
      ...(v.recordedAt ? {recordedAt: v.recordedAt} : {}),
      ...(v.counters ? {counters: v.counters} : {}),
    }
  })
}
