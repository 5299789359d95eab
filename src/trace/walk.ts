import {isLoopback} from '../net/address.js'
import {joinHostPort} from '../net/host-port.js'
import type {Packet, RouteGuess, TraceOutcome, TraceStep, Verdict} from './types.js'

/** One branch of a packet's walk: where it is headed now, its mark, and how it got there. */
export interface WalkState {
  src: string
  dst: string
  dport: number
  mark: number
  dnatted: boolean
  masquerade: boolean
  probability: number
  /** The rules passed so far, newest first, shared between branches (copying an array per step is quadratic). */
  steps: StepList | undefined
  sticky: boolean
  inIface?: string
  outIface?: string
  /** When inIface/outIface is unknown: interfaces the packet is known not to use. */
  inNotVia?: ReadonlySet<string>
  outNotVia?: ReadonlySet<string>
}

interface StepList {
  step: TraceStep
  previous: StepList | undefined
  length: number
}

/** A trace keeps at most this many of its last steps (a budget-stopped walk can pass millions of rules). */
const MAX_STEPS_SHOWN = 10_000

function stepsOf(list: StepList | undefined): TraceStep[] {
  const total = list?.length ?? 0
  const kept = Math.min(total, MAX_STEPS_SHOWN)
  const out = new Array<TraceStep>(kept)
  let node = list
  for (let i = kept - 1; i >= 0 && node; i--, node = node.previous) out[i] = node.step
  if (total > kept) out.unshift({table: '', chain: '…', line: 0, rule: `${total - kept} earlier steps not shown`})
  return out
}

export type ChainEnd = 'ACCEPT' | 'RETURN' | 'DROP' | 'REJECT' | 'UNKNOWN'

export interface Branch<C = unknown> {
  state: WalkState
  end: ChainEnd
  reason?: string
  /** Set when the end is the policy of this base chain (the walk fell off it). */
  policyOf?: C
}

const MAX_DEPTH = 64
export const MAX_BRANCHES = 65_536

export function startState(packet: Packet): WalkState {
  return {
    src: packet.src,
    dst: packet.dst,
    dport: packet.dport,
    mark: 0,
    dnatted: false,
    masquerade: false,
    probability: 1,
    steps: undefined,
    sticky: false,
    inIface: packet.inIface,
    outIface: packet.outIface,
    inNotVia: packet.inIface === undefined ? packet.inNotVia : undefined,
    outNotVia: undefined,
  }
}

/**
 * A copy of a state to change: every field written out, so that all states share one shape (a scan copies millions
 * of them, and a spread of a state with optional fields is many times slower).
 */
function copyState(s: WalkState): WalkState {
  return {
    src: s.src,
    dst: s.dst,
    dport: s.dport,
    mark: s.mark,
    dnatted: s.dnatted,
    masquerade: s.masquerade,
    probability: s.probability,
    steps: s.steps,
    sticky: s.sticky,
    inIface: s.inIface,
    outIface: s.outIface,
    inNotVia: s.inNotVia,
    outNotVia: s.outNotVia,
  }
}

export function withStep(s: WalkState, step: TraceStep): WalkState {
  const next = copyState(s)
  next.steps = {step, previous: s.steps, length: (s.steps?.length ?? 0) + 1}
  return next
}

/** A copy of `s` with `changes` applied. */
export function changed(s: WalkState, changes: Partial<WalkState>): WalkState {
  return Object.assign(copyState(s), changes)
}

export function finish(
  s: WalkState,
  end: ChainEnd,
  reason?: string,
  policy?: {table: string; chain: string},
): TraceOutcome {
  const verdict: Verdict = end === 'ACCEPT' || end === 'RETURN' ? (s.dnatted ? 'DNAT' : 'ACCEPT') : end
  const out: TraceOutcome = {
    verdict,
    destination: s.dnatted ? joinHostPort(s.dst, s.dport) : null,
    masquerade: s.masquerade,
    probability: s.probability,
    steps: stepsOf(s.steps),
  }
  if (reason) out.reason = reason
  if (s.sticky) out.sticky = true
  if (policy && (end === 'DROP' || end === 'REJECT')) out.policy = policy
  return out
}

/**
 * Whether an interface match (`-i`/`-o`, `iifname`/`oifname`; a trailing `+` or `*` is a prefix) holds: the
 * interface when known; false when it is unknown but the pattern names one the packet is known not to use; else
 * undefined (undecided).
 */
export function interfaceMatches(
  pattern: string,
  actual: string | undefined,
  notVia: ReadonlySet<string> | undefined,
  wildcard: '+' | '*',
): boolean | undefined {
  const prefix = pattern.endsWith(wildcard) ? pattern.slice(0, -1) : undefined
  if (actual !== undefined) return prefix === undefined ? actual === pattern : actual.startsWith(prefix)
  if (prefix === undefined && notVia?.has(pattern)) return false
  return undefined
}

/** After routing: a forwarded branch whose output interface was not given takes the route's. */
function routed(s: WalkState, route: ((dst: string) => RouteGuess) | undefined): WalkState {
  if (!route || s.outIface !== undefined) return s
  const r = route(s.dst)
  if (r.outIface !== undefined) return changed(s, {outIface: r.outIface})
  return r.outNotVia ? changed(s, {outNotVia: r.outNotVia}) : s
}

export function isLocalAddress(local: Set<string>, ip: string): boolean {
  return local.has(ip) || isLoopback(ip)
}

/**
 * The order netfilter runs the hooks for one NEW packet: a locally generated one goes OUTPUT → POSTROUTING (→ INPUT
 * when it stays on the node); one from outside goes PREROUTING → INPUT, or PREROUTING → FORWARD → POSTROUTING.
 * `runHook` runs every chain of one hook over the live branches and returns those still going.
 */
export function walkHooks(
  localOrigin: boolean,
  isLocal: (ip: string) => boolean,
  first: WalkState,
  runHook: (hook: string, live: WalkState[]) => WalkState[],
  route?: (dst: string) => RouteGuess,
): WalkState[] {
  let live = [first]
  if (localOrigin) {
    live = runHook('postrouting', runHook('output', live))
    const toLocal = live.filter((s) => isLocal(s.dst)).map((s) => changed(s, {inIface: 'lo'}))
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
      live.filter((s) => !isLocal(s.dst)).map((s) => routed(s, route)),
    ),
  )
  return [...forwarded, ...delivered]
}

/** What one rule does to one branch of the walk. */
export type RuleAction<C> =
  | {kind: 'next'}
  | {kind: 'end'; end: 'ACCEPT' | 'DROP' | 'REJECT' | 'UNKNOWN'; reason?: string}
  | {kind: 'return'}
  | {kind: 'jump' | 'goto'; chain: C}

export interface RuleOutcome<C> {
  state: WalkState
  action: RuleAction<C>
}

/** A backend's view of its chains, for the walker. */
export interface ChainSource<C> {
  ruleCount(chain: C): number
  /** Optional: the next rule at or after `from` that can match `state` (the rules between would only pass it). */
  skipTo?(chain: C, from: number, state: WalkState): number
  /** One or more ways the rule at `index` can go (several for a probabilistic rule). */
  evaluate(chain: C, index: number, state: WalkState): Array<RuleOutcome<C>>
  /** How a chain ends when the walk falls off it (or RETURNs from it) at the bottom of the call stack. */
  fallOff(chain: C, state: WalkState): ChainEnd
  describe(chain: C, index: number): string
}

/** How much one trace may do: rule evaluations and branches, shared by every hook and chain of the trace. */
export class WalkBudget {
  evaluations = 0
  branches = 0
  constructor(
    readonly maxEvaluations = MAX_EVALUATIONS,
    readonly maxBranches = MAX_BRANCHES,
  ) {}
  exhausted(): boolean {
    return this.evaluations >= this.maxEvaluations || this.branches >= this.maxBranches
  }
  stopReason(where: string): string {
    return this.branches >= this.maxBranches
      ? `stopped at ${where}: more than ${this.maxBranches} branches (the walk's budget); this branch was not followed further`
      : `stopped at ${where}: ${this.maxEvaluations} rule evaluations (the walk's budget) used up; this branch was not followed further`
  }
}

const MAX_EVALUATIONS = 2_000_000

interface Frame<C> {
  chain: C
  index: number
  /** The chain whose policy applies when this bottom frame ends (a goto from a base chain keeps the base chain's). */
  policyOf: C
}

/**
 * Walks one branch from `start` to every end it can reach, without recursion: each branch carries its own call
 * stack of (chain, next rule) frames, and a probabilistic rule forks the branch. Bounded by `budget`; a branch that
 * runs it out ends UNKNOWN, naming where it stopped.
 */
export function walkChain<C>(source: ChainSource<C>, start: C, first: WalkState, budget: WalkBudget): Array<Branch<C>> {
  const out: Array<Branch<C>> = []
  const pending: Array<{
    state: WalkState
    frames: Array<Frame<C>>
    action?: RuleAction<C>
    atChain?: C
    atIndex?: number
  }> = [{state: first, frames: [{chain: start, index: 0, policyOf: start}]}]
  while (pending.length > 0) {
    const thread = pending.pop()!
    let state = thread.state
    let action = thread.action
    // Where the last rule evaluated sits (a fork's: where it forked), described only when a message needs it.
    let atChain = thread.atChain
    let atIndex = thread.atIndex ?? 0
    const frames = thread.frames
    for (;;) {
      if (action) {
        const top = frames[frames.length - 1]
        const a = action
        action = undefined
        if (a.kind === 'next') continue
        if (a.kind === 'end') {
          out.push(a.reason === undefined ? {state, end: a.end} : {state, end: a.end, reason: a.reason})
          break
        }
        if (a.kind === 'return') {
          if (frames.length === 1) {
            out.push({state, end: source.fallOff(top.policyOf, state), policyOf: top.policyOf})
            break
          }
          frames.pop()
          continue
        }
        if (a.kind === 'goto') {
          frames[frames.length - 1] = {chain: a.chain, index: 0, policyOf: top.policyOf}
          continue
        }
        if (frames.length > MAX_DEPTH) {
          out.push({
            state,
            end: 'UNKNOWN',
            reason: `jumps nest deeper than ${MAX_DEPTH} chains at ${atChain === undefined ? '' : source.describe(atChain, atIndex)} (a loop?)`,
          })
          break
        }
        frames.push({chain: a.chain, index: 0, policyOf: a.chain})
        continue
      }
      const top = frames[frames.length - 1]
      if (source.skipTo) top.index = source.skipTo(top.chain, top.index, state)
      if (top.index >= source.ruleCount(top.chain)) {
        if (frames.length === 1) {
          out.push({state, end: source.fallOff(top.policyOf, state), policyOf: top.policyOf})
          break
        }
        frames.pop()
        continue
      }
      if (budget.exhausted()) {
        out.push({state, end: 'UNKNOWN', reason: budget.stopReason(source.describe(top.chain, top.index))})
        break
      }
      budget.evaluations++
      const index = top.index++
      const outcomes = source.evaluate(top.chain, index, state)
      if (outcomes.length === 0) continue
      atChain = top.chain
      atIndex = index
      for (let k = outcomes.length - 1; k >= 1; k--) {
        budget.branches++
        pending.push({
          state: outcomes[k].state,
          frames: frames.map((f) => ({...f})),
          action: outcomes[k].action,
          atChain,
          atIndex,
        })
      }
      state = outcomes[0].state
      action = outcomes[0].action
    }
  }
  return out
}
