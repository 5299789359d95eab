/**
 * `nft monitor trace` output: one event a line, `trace id ID FAMILY TABLE CHAIN WHAT…`, where WHAT is `packet: …` (the
 * packet as the chain saw it), `rule RULE [# handle N] (verdict V)`, `policy V` or `verdict V` (a chain's end: its
 * policy, or a return). Events of several packets interleave; the id ties a packet's events together.
 */

/**
 * The name of a table --kernel-trace makes on a node (always `inet`): kpd_trace_, the run's id (6 hex digits) and
 * its creation time (Unix seconds).
 */
export const TRACE_TABLE_NAME = /^kpd_trace_([0-9a-f]{6})_([0-9]{10})$/

/** Whether a ruleset's table ("FAMILY NAME") is one --kernel-trace made. */
export function isTraceTable(id: string): boolean {
  return id.startsWith('inet ') && TRACE_TABLE_NAME.test(id.slice('inet '.length))
}

export interface TraceEvent {
  id: string
  family: string
  table: string
  chain: string
  kind: 'packet' | 'rule' | 'policy' | 'return'
  /** The rule's text as nft prints it (kind rule). */
  rule?: string
  /** The rule's handle where nft printed it (`nft -a monitor trace`). */
  handle?: number
  /** accept, drop, continue, jump CHAIN, goto CHAIN, return (kind rule, policy, return). */
  verdict?: string
  /** The packet's fields (kind packet). */
  packet?: string
}

/** One packet's way through the rules: its events in order. */
export interface TracedPacket {
  id: string
  events: TraceEvent[]
  /** From the first packet line: where it was going before any DNAT, and its source port. */
  daddr?: string
  dport?: number
  sport?: number
  protocol?: string
}

const HEAD = /^trace id ([0-9a-f]+) (\S+) (\S+) (\S+) (.*)$/

/** One line of the monitor's output, or undefined for a line that is not a trace event (nft's own notices). */
function parseTraceLine(line: string): TraceEvent | undefined {
  const m = HEAD.exec(line.trim())
  if (!m) return undefined
  const [, id, family, table, chain, rest] = m
  const base = {id, family, table, chain}
  if (rest.startsWith('packet: ')) return {...base, kind: 'packet', packet: rest.slice('packet: '.length).trim()}
  if (rest.startsWith('rule ')) {
    const v = /^rule (.*?)\s*(?:# handle (\d+)\s*)?\(verdict ([^)]+)\)\s*$/.exec(rest)
    if (!v) return {...base, kind: 'rule', rule: rest.slice('rule '.length).trim()}
    return {...base, kind: 'rule', rule: v[1], ...(v[2] ? {handle: Number(v[2])} : {}), verdict: v[3]}
  }
  const end = /^(policy|verdict) (\S+)/.exec(rest)
  if (end) return {...base, kind: end[1] === 'policy' ? 'policy' : 'return', verdict: end[2]}
  return undefined
}

function packetFields(packet: TracedPacket, text: string): void {
  const daddr = /\bip6? daddr (\S+)/.exec(text)
  const proto = /\b(tcp|udp|sctp) (?:sport|dport)/.exec(text)
  const sport = /\b(?:tcp|udp|sctp) sport (\d+)/.exec(text)
  const dport = /\b(?:tcp|udp|sctp) dport (\d+)/.exec(text)
  if (daddr) packet.daddr = daddr[1]
  if (proto) packet.protocol = proto[1]
  if (sport) packet.sport = Number(sport[1])
  if (dport) packet.dport = Number(dport[1])
}

/**
 * The traced packets of a monitor's output, each with its events in order, in the order their first event came. Lines
 * that are not trace events are skipped; a line cut short at the end (the monitor stopped by its timeout) is too.
 */
export function parseNftTrace(text: string): TracedPacket[] {
  const byId = new Map<string, TracedPacket>()
  for (const line of text.split('\n')) {
    const e = parseTraceLine(line)
    if (!e) continue
    let p = byId.get(e.id)
    if (!p) byId.set(e.id, (p = {id: e.id, events: []}))
    p.events.push(e)
    if (e.kind === 'packet' && p.daddr === undefined && e.packet) packetFields(p, e.packet)
  }
  return [...byId.values()]
}
