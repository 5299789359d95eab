import {isLoopback} from '../net/address.js'
import {joinHostPort} from '../net/host-port.js'
import {
  summarize,
  type Packet,
  type RouteGuess,
  type TraceOutcome,
  type TraceResult,
  type TraceStep,
  type Verdict,
} from './types.js'

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

interface Branch<C = unknown> {
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
function walkHooks(
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

/**
 * One base chain of a hook, of whichever engine reads its table (an nftables table, an iptables-nft or
 * iptables-legacy table): the kernel runs every base chain registered at a hook, of every owner, by priority.
 */
export interface HookChain {
  priority: number
  /** A nat chain: once a chain of the hook has rewritten the packet (DNAT before routing, SNAT after), the rest let it pass. */
  nat: boolean
  /** Walks one branch through the chain: its ends, a policy verdict named by its table and chain. */
  walk(state: WalkState, budget: WalkBudget): Array<Branch<{table: string; chain: string}>>
}

/** A base chain of an engine's ChainSource as one of a hook's chains. */
export function hookChainOf<C>(
  source: ChainSource<C>,
  chain: C,
  priority: number,
  nat: boolean,
  policyName: (chain: C) => {table: string; chain: string},
): HookChain {
  return {
    priority,
    nat,
    walk: (state, budget) => {
      // The branches are this walk's own: a policy end is renamed in place (a scan walks millions of chains).
      const branches = walkChain(source, chain, state, budget) as Array<Branch<unknown>>
      for (const b of branches) if (b.policyOf !== undefined) b.policyOf = policyName(b.policyOf as C)
      return branches as Array<Branch<{table: string; chain: string}>>
    },
  }
}

/**
 * Where a fragment lacks a base chain the hook needs: every branch that reaches it ends UNKNOWN saying what is
 * missing, so nothing after it is judged as if the input were whole.
 */
export function missingHookChain(priority: number, reason: string): HookChain {
  return {priority, nat: false, walk: (state) => [{state, end: 'UNKNOWN', reason}]}
}

/** Hooks whose nat chains translate the destination (the rest translate the source). */
const DESTINATION_NAT_HOOKS: ReadonlySet<string> = new Set(['prerouting', 'output'])

/**
 * Runs every branch still going through a hook's base chains in their order (sort them by priority first): an accept
 * (or the end of a chain whose policy accepts) goes on to the next base chain, as in the kernel; any other end is
 * final and goes to `done`. Returns the branches that leave the hook.
 */
function runHookChains(
  hook: string,
  chains: readonly HookChain[],
  live: WalkState[],
  budget: WalkBudget,
  done: TraceOutcome[],
): WalkState[] {
  const destinationNat = DESTINATION_NAT_HOOKS.has(hook)
  let current = live
  for (const chain of chains) {
    const next: WalkState[] = []
    for (const s of current) {
      if (chain.nat && (destinationNat ? s.dnatted : s.masquerade)) {
        next.push(s)
        continue
      }
      for (const b of chain.walk(s, budget)) {
        if (b.end === 'ACCEPT' || b.end === 'RETURN') next.push(b.state)
        else done.push(finish(b.state, b.end, b.reason, b.policyOf))
      }
    }
    current = next
  }
  return current
}

/**
 * Walks one NEW packet through every hook on its way (walkHooks), each hook's base chains as `chainsOf` gives them
 * in order; one budget for the whole trace.
 */
export function traceHooks(
  packet: Packet,
  localOrigin: boolean,
  isLocal: (ip: string) => boolean,
  chainsOf: (hook: string) => readonly HookChain[],
  route?: (dst: string) => RouteGuess,
): TraceResult {
  const budget = new WalkBudget()
  const done: TraceOutcome[] = []
  const runHook = (hook: string, live: WalkState[]) => runHookChains(hook, chainsOf(hook), live, budget, done)
  for (const s of walkHooks(localOrigin, isLocal, startState(packet), runHook, route)) done.push(finish(s, 'ACCEPT'))
  return summarize(done)
}

/**
 * A tracer's walks that never read the packet's source address or port, by everything else of the packet they start
 * from: the same walk for any source (the second halves of a Service's paths reach an endpoint's node from each source
 * node's pods and address). The tracer notes each read of the source (`sourceRead`) while it walks.
 */
export class SourceFreeWalks {
  sourceRead = false
  private readonly byNotVia = new Map<ReadonlySet<string> | undefined, Map<string, TraceResult>>()

  /** The walk of `packet` from whichever source, when one was kept; else a new walk, kept unless it read the source. */
  walk(packet: Packet, localOrigin: boolean, walk: () => TraceResult): TraceResult {
    const inNotVia = packet.inIface === undefined ? packet.inNotVia : undefined
    const key = `${localOrigin} ${packet.proto} ${packet.dst} ${packet.dport} ${packet.inIface} ${packet.outIface}`
    let walks = this.byNotVia.get(inNotVia)
    const walked = walks?.get(key)
    if (walked) return walked
    this.sourceRead = false
    const result = walk()
    if (!this.sourceRead) {
      if (!walks) this.byNotVia.set(inNotVia, (walks = new Map()))
      walks.set(key, result)
    }
    return result
  }
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
  /**
   * Optional: why falling off the end of this chain cannot be judged (its rules in the input may be only some of the
   * node's: a fragment); the branch then ends UNKNOWN with that reason. Undefined: the chain's end is known.
   */
  openEnd?(chain: C): string | undefined
  /** How a chain ends when the walk falls off it (or RETURNs from it) at the bottom of the call stack. */
  fallOff(chain: C, state: WalkState): ChainEnd
  describe(chain: C, index: number): string
  /** The chain's name as a trace shows it ("nat/KUBE-SVC-X", "ip kube-proxy/services"). */
  chainName(chain: C): string
}

/**
 * How much one trace may do and keep, shared by every hook and chain of the trace: rule evaluations (its time),
 * branches, and the steps its ended branches keep (its memory and the size of its output).
 */
class WalkBudget {
  evaluations = 0
  branches = 0
  /** Steps kept by the branches ended so far: each counted once, by the walk that added it. */
  keptSteps = 0
  constructor(
    readonly maxEvaluations = MAX_EVALUATIONS,
    readonly maxBranches = MAX_BRANCHES,
    readonly maxKeptSteps = MAX_KEPT_STEPS,
  ) {}
  exhausted(): boolean {
    return (
      this.evaluations >= this.maxEvaluations ||
      this.branches >= this.maxBranches ||
      this.keptSteps >= this.maxKeptSteps
    )
  }
  stopReason(where: string): string {
    const what =
      this.branches >= this.maxBranches
        ? `more than ${this.maxBranches} branches (the walk's budget)`
        : this.keptSteps >= this.maxKeptSteps
          ? `more than ${this.maxKeptSteps} steps kept (the walk's budget)`
          : `${this.maxEvaluations} rule evaluations (the walk's budget) used up`
    return `stopped at ${where}: ${what}; this branch was not followed further`
  }
}

const MAX_EVALUATIONS = 2_000_000
/**
 * What all the outcomes of one trace may keep, in steps: a Service of 65,536 endpoints (MAX_BRANCHES) keeps about
 * ten per endpoint. Each kept step is a reference in memory and some 150 bytes of `-o json --explain`.
 */
const MAX_KEPT_STEPS = 2_000_000

/** The steps a state's outcome keeps (finish keeps at most MAX_STEPS_SHOWN). */
const keptLength = (s: WalkState) => Math.min(s.steps?.length ?? 0, MAX_STEPS_SHOWN)

/** Ends of one walk looked up in a list; past this many, in a map by number. */
const FEW_ENDS = 16

/**
 * A number of an end's last rule line, port and mark: two ends of different numbers are never the same end (a merge
 * only adds to a kept end's share, so its number stays).
 */
const endNumber = (s: WalkState) => ((s.steps?.step.line ?? -1) * 65_537 + s.dport) * 31 + s.mark

/**
 * The ends of one walk, identical ones merged: two branches that end the same way (the same end, reason and policy),
 * by the same rule, with the same packet, are one outcome whose share is the sum of theirs and whose steps are the
 * first one's. Without it a walk through random branches keeps every way there, which grows exponentially with the
 * branches passed (a 6 KB dump of jump loops behind random branches kept 65,536 outcomes and millions of steps).
 *
 * Looked up by a number of the rule's line, port and mark, and compared field by field: a scan ends millions of
 * branches, and a string key built and hashed per branch was most of this merge. Most walks end a few branches: their
 * numbers are searched in a list, and put in a map only when there are many.
 */
class Ends<C> {
  readonly list: Array<Branch<C>> = []
  /** The kept ends' places in `list` by their number, made once there are more than FEW_ENDS. */
  private byNumber: Map<number, number[]> | undefined
  constructor(
    private readonly source: ChainSource<C>,
    private readonly budget: WalkBudget,
    /** Steps the walk started with: kept already, by the walk that added them. */
    private readonly startLength: number,
  ) {}

  add(b: Branch<C>): void {
    const s = b.state
    const number = endNumber(s)
    const same = this.byNumber?.get(number)
    if (this.byNumber === undefined) {
      for (let i = 0; i < this.list.length; i++)
        if (endNumber(this.list[i].state) === number && this.merged(i, b)) return
    } else if (same) for (const i of same) if (this.merged(i, b)) return
    const at = this.list.length
    this.list.push(b)
    if (this.byNumber) {
      if (same) same.push(at)
      else this.byNumber.set(number, [at])
    } else if (this.list.length > FEW_ENDS) {
      this.byNumber = new Map()
      for (let i = 0; i < this.list.length; i++) {
        const n = endNumber(this.list[i].state)
        const kept = this.byNumber.get(n)
        if (kept) kept.push(i)
        else this.byNumber.set(n, [i])
      }
    }
    this.budget.keptSteps += Math.max(0, keptLength(s) - this.startLength)
  }

  /** Merges `b` into the kept end `i` when it is the same end of the same packet: its share is added. */
  private merged(i: number, b: Branch<C>): boolean {
    const kept = this.list[i]
    if (!this.sameEnd(kept, b) || !samePacket(kept.state, b.state)) return false
    kept.state = changed(kept.state, {probability: kept.state.probability + b.state.probability})
    return true
  }

  /**
   * The same end, reason and policy, by the same rule (a dump's line names its rule; a step of no line, an IPVS
   * virtual server, is named by its text), to the same destination, port and mark.
   */
  private sameEnd(a: Branch<C>, b: Branch<C>): boolean {
    if (a.end !== b.end || (a.reason ?? '') !== (b.reason ?? '')) return false
    if (a.state.dst !== b.state.dst || a.state.dport !== b.state.dport || a.state.mark !== b.state.mark) return false
    if (a.policyOf !== b.policyOf) {
      if (a.policyOf === undefined || b.policyOf === undefined) return false
      if (this.source.chainName(a.policyOf) !== this.source.chainName(b.policyOf)) return false
    }
    const x = a.state.steps?.step
    const y = b.state.steps?.step
    if (x === y) return true
    if (x === undefined || y === undefined) return false
    return x.table === y.table && x.chain === y.chain && x.line === y.line && (x.line !== 0 || x.rule === y.rule)
  }
}

interface Frame<C> {
  chain: C
  index: number
  /** The chain whose policy applies when this bottom frame ends (a goto from a base chain keeps the base chain's). */
  policyOf: C
  /** The packet as it entered the frame's first chain (policyOf: a frame's first chain is the one whose policy applies). */
  entry: WalkState
  /** The chains each goto of this frame entered, with the packet: never changed, shared by forks. */
  gotos: ReadonlyArray<{chain: C; state: WalkState}> | undefined
}

/** Whether two states are the same packet at the same point of its walk (how it got there and how likely are not compared). */
function samePacket(a: WalkState, b: WalkState): boolean {
  return (
    a === b ||
    (a.dst === b.dst &&
      a.dport === b.dport &&
      a.src === b.src &&
      a.mark === b.mark &&
      a.dnatted === b.dnatted &&
      a.masquerade === b.masquerade &&
      a.sticky === b.sticky &&
      a.inIface === b.inIface &&
      a.outIface === b.outIface &&
      a.inNotVia === b.inNotVia &&
      a.outNotVia === b.outNotVia)
  )
}

/**
 * Whether entering `chain` with `state` repeats an entry still open on this branch (a chain it came through and has
 * not returned from): the same packet in the same chain again would walk the same rules again, without end. The
 * kernel refuses such a rule set, so a loop comes only from a paste, a damaged dump or a hostile node.
 */
function entersAgain<C>(frames: ReadonlyArray<Frame<C>>, chain: C, state: WalkState): boolean {
  for (const f of frames) {
    if (f.policyOf === chain && samePacket(f.entry, state)) return true
    if (f.gotos) for (const e of f.gotos) if (e.chain === chain && samePacket(e.state, state)) return true
  }
  return false
}

/**
 * Walks one branch from `start` to every end it can reach, without recursion: each branch carries its own call
 * stack of (chain, next rule) frames, and a probabilistic rule forks the branch. A jump or goto into a chain the
 * branch is still in, with the same packet, ends it UNKNOWN as a loop. Bounded by `budget`: the branch that runs it
 * out ends UNKNOWN, naming where it stopped, and takes with it every branch still waiting (one outcome, their shares
 * summed), so what a stopped walk keeps stays small.
 */
function walkChain<C>(source: ChainSource<C>, start: C, first: WalkState, budget: WalkBudget): Array<Branch<C>> {
  const ends = new Ends(source, budget, keptLength(first))
  const pending: Array<{
    state: WalkState
    frames: Array<Frame<C>>
    action?: RuleAction<C>
    atChain?: C
    atIndex?: number
  }> = [{state: first, frames: [{chain: start, index: 0, policyOf: start, entry: first, gotos: undefined}]}]
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
          ends.add(a.reason === undefined ? {state, end: a.end} : {state, end: a.end, reason: a.reason})
          break
        }
        if (a.kind === 'return') {
          if (frames.length === 1) {
            ends.add({state, end: source.fallOff(top.policyOf, state), policyOf: top.policyOf})
            break
          }
          frames.pop()
          continue
        }
        if (entersAgain(frames, a.chain, state)) {
          const from = atChain === undefined ? '' : `${source.describe(atChain, atIndex)} `
          ends.add({
            state,
            end: 'UNKNOWN',
            reason: `a loop: ${from}${a.kind === 'goto' ? 'goes' : 'jumps'} to ${source.chainName(a.chain)} again with the same packet, which would run the same rules without end (the kernel refuses rules that loop: a paste or a damaged dump?)`,
          })
          break
        }
        if (a.kind === 'goto') {
          frames[frames.length - 1] = {
            chain: a.chain,
            index: 0,
            policyOf: top.policyOf,
            entry: top.entry,
            gotos: [...(top.gotos ?? []), {chain: a.chain, state}],
          }
          continue
        }
        if (frames.length > MAX_DEPTH) {
          ends.add({
            state,
            end: 'UNKNOWN',
            reason: `jumps nest deeper than ${MAX_DEPTH} chains at ${atChain === undefined ? '' : source.describe(atChain, atIndex)} (a loop?)`,
          })
          break
        }
        frames.push({chain: a.chain, index: 0, policyOf: a.chain, entry: state, gotos: undefined})
        continue
      }
      const top = frames[frames.length - 1]
      if (source.skipTo) top.index = source.skipTo(top.chain, top.index, state)
      if (top.index >= source.ruleCount(top.chain)) {
        const open = source.openEnd?.(top.chain)
        if (open !== undefined) {
          ends.add({state, end: 'UNKNOWN', reason: open})
          break
        }
        if (frames.length === 1) {
          ends.add({state, end: source.fallOff(top.policyOf, state), policyOf: top.policyOf})
          break
        }
        frames.pop()
        continue
      }
      if (budget.exhausted()) {
        // Every branch still waiting stops here too: one outcome for all of them, their shares summed.
        let probability = state.probability
        for (const waiting of pending) probability += waiting.state.probability
        const others = pending.length
        pending.length = 0
        ends.add({
          state: others > 0 ? changed(state, {probability: Math.min(1, probability)}) : state,
          end: 'UNKNOWN',
          reason: `${budget.stopReason(source.describe(top.chain, top.index))}${others > 0 ? ` (nor were the ${others} other branches still to walk: their shares are in this one's)` : ''}`,
        })
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
  return ends.list
}
