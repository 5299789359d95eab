export type Protocol = 'tcp' | 'udp' | 'sctp'

export interface Packet {
  src: string
  dst: string
  proto: Protocol
  dport: number
  sport: number
  /** Interface the packet arrives on (PREROUTING, INPUT, FORWARD); unknown when undefined. */
  inIface?: string
  /** Interface it leaves by (FORWARD, OUTPUT, POSTROUTING); unknown when undefined. */
  outIface?: string
  /** When inIface is unknown: interfaces it is known not to arrive on (a packet from another node never comes from a local pod bridge). */
  inNotVia?: ReadonlySet<string>
}

/** Where the node routes a forwarded packet: the interface, or when that is unknown the interfaces it cannot be. */
export interface RouteGuess {
  outIface?: string
  outNotVia?: ReadonlySet<string>
}

export type Verdict = 'DNAT' | 'ACCEPT' | 'REJECT' | 'DROP' | 'UNKNOWN'

export interface TraceStep {
  table: string
  chain: string
  line: number
  rule: string
}

export interface TraceOutcome {
  verdict: Verdict
  destination: string | null
  masquerade: boolean
  probability: number
  steps: TraceStep[]
  /** For UNKNOWN: what could not be evaluated. */
  reason?: string
  /** A -m recent rule was passed: later packets from this client stick to the same backend. */
  sticky?: boolean
  /** The verdict is a built-in (base) chain's policy, not a rule: the chain whose policy it is. */
  policy?: {table: string; chain: string}
}

export interface TraceResult {
  verdict: Verdict | 'MIXED'
  destinations: string[]
  masquerade: boolean
  outcomes: TraceOutcome[]
}

export function summarize(outcomes: TraceOutcome[]): TraceResult {
  const verdicts = new Set(outcomes.map((o) => o.verdict))
  const destinations = [...new Set(outcomes.map((o) => o.destination).filter((d): d is string => d !== null))].sort()
  return {
    verdict: verdicts.size === 1 ? [...verdicts][0] : 'MIXED',
    destinations,
    masquerade: outcomes.some((o) => o.masquerade),
    outcomes,
  }
}

/** Anything that walks a packet through a node's rules. */
export interface Tracer {
  trace(packet: Packet): TraceResult
}
