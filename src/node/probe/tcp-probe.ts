import {lateTimeout} from '../../util/late-timeout.js'
import type {Duplex} from 'node:stream'
import type {NodeAccess} from '../transport/node-access.js'
import type {KernelEvidence} from './kernel-evidence.js'
import type {KernelTraceRun} from './kernel-trace.js'
import type {RuleCountersRun} from './rule-counters-read.js'

/** Opens a TCP connection that originates on the node (an SSH direct-tcpip channel, a port-forward, …). */
export type OpenTcp = (host: string, port: number) => Promise<Duplex>

export type ProbeOutcome = 'connected' | 'refused' | 'timeout' | 'unreachable' | 'not-probed'

export interface ProbeTarget {
  host: string
  port: number
  /** Attempts for this target; ProbeOptions.attempts when unset. */
  attempts?: number
}

export interface ProbeTally<T extends ProbeTarget = ProbeTarget> {
  target: T
  attempts: number
  connected: number
  refused: number
  timedOut: number
  unreachable: number
  /** Set when the transport would not open connections at all (e.g. sshd forbids forwarding): nothing was learnt. */
  notProbed?: string
}

/** What a probe of a Service is aimed at: one of its addresses, or one endpoint directly. */
export interface ServiceProbeTarget extends ProbeTarget {
  kind: 'ClusterIP' | 'NodePort' | 'endpoint'
  /** The service port's name, else its number (as paths name it). */
  servicePort: string
  /** For an endpoint: the Pod behind it and the node that hosts it, where the EndpointSlice says. */
  pod?: string
  podNode?: string
}

/** One node's probes: what it reached, or why it could not probe at all. */
export interface NodeProbes {
  node: string
  /** How the connections left the node ("an SSH port forward"). */
  via: string
  /** The node could not be reached for probing (nothing was learnt). */
  error?: string
  tallies: Array<ProbeTally<ServiceProbeTarget>>
  /** What the kernel's conntrack table says of the probes of the Service's addresses (absent: none were probed). */
  kernel?: KernelEvidence
  /** --kernel-trace: netfilter's own trace of the probes' packets, or why there is none. */
  kernelTrace?: KernelTraceRun
  /** The rule counters of the chains on the Service's path before and after the probes (absent: none were probed). */
  counters?: RuleCountersRun
}

export interface ProbeSettings {
  vipAttempts: number
  endpointAttempts: number
  timeoutMs: number
  concurrency: number
}

/** The probe stage of one diagnosis: run (with each node's results), or not run and why. */
/** The probes `collect --probe` recorded in a bundle, replayed by `svc --snapshot`: never a fresh read. */
export interface RecordedProbes {
  /** When they ran (the bundle's collection), ISO 8601; null: the bundle recorded no probes. */
  recordedAt: string | null
  nodes: NodeProbes[]
}

export type ProbeRun =
  | {ran: true; settings: ProbeSettings; nodes: NodeProbes[]; notes: string[]}
  | {ran: false; reason: string; recorded?: RecordedProbes}

export interface ProbeOptions {
  attempts: number
  timeoutMs: number
  concurrency: number
}

/** How the failed attempts of a tally failed: "3 refused", "1 timed out"… (none when every attempt connected). */
export function failureParts(t: Pick<ProbeTally, 'refused' | 'timedOut' | 'unreachable'>): string[] {
  return (
    [
      [t.refused, 'refused'],
      [t.timedOut, 'timed out'],
      [t.unreachable, 'unreachable'],
    ] as const
  )
    .filter(([n]) => n > 0)
    .map(([n, w]) => `${n} ${w}`)
}

/** A transport's typed refusal (NodeAccess.openTcp), kept typed so a timeout is not mistaken for "not probed". */
class OpenRefusal extends Error {
  constructor(
    readonly outcome: Exclude<ProbeOutcome, 'connected'>,
    reason: string,
  ) {
    super(reason)
  }
}

/** The OpenTcp of a node's access for probes: each refusal keeps the outcome the transport gave it. */
export function probeOpener(access: NodeAccess, timeoutMs: number): OpenTcp {
  return async (host, port) => {
    const r = await access.openTcp(host, port, timeoutMs)
    if (r.kind === 'open') return r.stream
    throw new OpenRefusal(r.outcome, r.reason)
  }
}

/** How a transport's refusal reads: the peer's RST, no route, or a transport that will not forward at all. */
export function classifyOpenError(err: Error): Exclude<ProbeOutcome, 'connected' | 'timeout'> {
  const m = err.message.toLowerCase()
  if (/refused/.test(m) && !/administratively|prohibited|forwarding/.test(m)) return 'refused'
  if (/no route|unreachable|network is down|host is down/.test(m)) return 'unreachable'
  return 'not-probed'
}

async function attempt(
  open: OpenTcp,
  t: ProbeTarget,
  timeoutMs: number,
): Promise<{outcome: ProbeOutcome; why?: string}> {
  const pending = open(t.host, t.port)
  const timeout = lateTimeout(timeoutMs)
  try {
    const r = await Promise.race([pending, timeout.expired])
    if (r === 'timeout') {
      pending.then(
        (s) => s.destroy(),
        () => undefined,
      )
      return {outcome: 'timeout'}
    }
    r.destroy()
    return {outcome: 'connected'}
  } catch (e) {
    if (e instanceof OpenRefusal) return {outcome: e.outcome, why: e.message}
    return {outcome: classifyOpenError(e as Error), why: (e as Error).message}
  } finally {
    timeout.cancel()
  }
}

/**
 * Connect-and-close probes, `attempts` per target (enough to see one bad endpoint among several behind a VIP), with
 * at most `concurrency` connections in flight. Stops probing a target early when the transport refuses to forward.
 */
export async function probeTargets<T extends ProbeTarget>(
  open: OpenTcp,
  targets: T[],
  opts: ProbeOptions,
): Promise<Array<ProbeTally<T>>> {
  const tallies: Array<ProbeTally<T>> = targets.map((target) => ({
    target,
    attempts: 0,
    connected: 0,
    refused: 0,
    timedOut: 0,
    unreachable: 0,
  }))
  // OpenSSH answers "administratively prohibited" both when forwarding is off and when its connect() fails at once
  // (no route, an unreachable or blackhole route): which one it was is known only once the run is over.
  const prohibited = new Map<ProbeTally<T>, {count: number; why: string}>()
  let forwardsWork = false
  const queue: Array<() => Promise<void>> = []
  for (const tally of tallies)
    for (let i = 0; i < (tally.target.attempts ?? opts.attempts); i++)
      queue.push(async () => {
        if (tally.notProbed) return
        const r = await attempt(open, tally.target, opts.timeoutMs)
        if (r.outcome === 'not-probed' && r.why && AMBIGUOUS_REFUSAL.test(r.why)) {
          prohibited.set(tally, {count: (prohibited.get(tally)?.count ?? 0) + 1, why: r.why})
          return
        }
        if (r.outcome === 'not-probed') {
          tally.notProbed = r.why ?? 'the transport would not open the connection'
          return
        }
        forwardsWork = true
        tally.attempts++
        if (r.outcome === 'connected') tally.connected++
        else if (r.outcome === 'refused') tally.refused++
        else if (r.outcome === 'timeout') tally.timedOut++
        else tally.unreachable++
      })
  let next = 0
  const worker = async () => {
    while (next < queue.length) await queue[next++]()
  }
  await Promise.all(Array.from({length: Math.max(1, Math.min(opts.concurrency, queue.length))}, worker))
  for (const [tally, {count, why}] of prohibited) {
    if (tally.notProbed) continue
    // Other connections through the same transport were opened (or answered): forwarding is on, so the node's
    // connect() to this target failed at once.
    if (forwardsWork) {
      tally.attempts += count
      tally.unreachable += count
    } else tally.notProbed = why
  }
  return tallies
}

/** A transport refusal that may be a policy or a failed connect (see probeTargets). */
const AMBIGUOUS_REFUSAL = /administratively prohibited|open failed/i
