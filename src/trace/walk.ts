import {isLoopback} from '../net/address.js'
import {joinHostPort} from '../net/host-port.js'
import type {Packet, TraceOutcome, TraceStep, Verdict} from './types.js'

/** One branch of a packet's walk: where it is headed now, its mark, and how it got there. */
export interface WalkState {
  src: string
  dst: string
  dport: number
  mark: number
  dnatted: boolean
  masquerade: boolean
  probability: number
  steps: TraceStep[]
  sticky: boolean
  inIface?: string
  outIface?: string
}

export type ChainEnd = 'ACCEPT' | 'RETURN' | 'DROP' | 'REJECT' | 'UNKNOWN'

export interface Branch {
  state: WalkState
  end: ChainEnd
  reason?: string
}

export const MAX_DEPTH = 64
export const MAX_BRANCHES = 4096

export function startState(packet: Packet): WalkState {
  return {
    src: packet.src,
    dst: packet.dst,
    dport: packet.dport,
    mark: 0,
    dnatted: false,
    masquerade: false,
    probability: 1,
    steps: [],
    sticky: false,
    inIface: packet.inIface,
    outIface: packet.outIface,
  }
}

export function withStep(s: WalkState, step: TraceStep): WalkState {
  return {...s, steps: [...s.steps, step]}
}

export function finish(s: WalkState, end: ChainEnd, reason?: string): TraceOutcome {
  const verdict: Verdict = end === 'ACCEPT' || end === 'RETURN' ? (s.dnatted ? 'DNAT' : 'ACCEPT') : end
  const out: TraceOutcome = {verdict, destination: s.dnatted ? joinHostPort(s.dst, s.dport) : null, masquerade: s.masquerade, probability: s.probability, steps: s.steps}
  if (reason) out.reason = reason
  if (s.sticky) out.sticky = true
  return out
}

export function isLocalAddress(local: Set<string>, ip: string): boolean {
  return local.has(ip) || isLoopback(ip)
}

/**
 * The order netfilter runs the hooks for one NEW packet: a locally generated one goes OUTPUT → POSTROUTING (→ INPUT
 * when it stays on the node); one from outside goes PREROUTING → INPUT, or PREROUTING → FORWARD → POSTROUTING.
 * `runHook` runs every chain of one hook over the live branches and returns those still going.
 */
export function walkHooks(localOrigin: boolean, isLocal: (ip: string) => boolean, first: WalkState, runHook: (hook: string, live: WalkState[]) => WalkState[]): WalkState[] {
  let live = [first]
  if (localOrigin) {
    live = runHook('postrouting', runHook('output', live))
    const toLocal = live.filter((s) => isLocal(s.dst)).map((s) => ({...s, inIface: 'lo'}))
    return [...live.filter((s) => !isLocal(s.dst)), ...runHook('input', toLocal)]
  }
  live = runHook('prerouting', live)
  const delivered = runHook(
    'input',
    live.filter((s) => isLocal(s.dst)),
  )
  const forwarded = runHook(
    'postrouting',
    runHook(
      'forward',
      live.filter((s) => !isLocal(s.dst)),
    ),
  )
  return [...forwarded, ...delivered]
}
