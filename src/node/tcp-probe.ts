import type {Duplex} from 'node:stream'

/** Opens a TCP connection that originates on the node (an SSH direct-tcpip channel, a port-forward, …). */
export type OpenTcp = (host: string, port: number) => Promise<Duplex>

export type ProbeOutcome = 'connected' | 'refused' | 'timeout' | 'unreachable' | 'not-probed'

export interface ProbeTarget {
  host: string
  port: number
}

export interface ProbeTally {
  target: ProbeTarget
  attempts: number
  connected: number
  refused: number
  timedOut: number
  unreachable: number
  /** Set when the transport would not open connections at all (e.g. sshd forbids forwarding): nothing was learnt. */
  notProbed?: string
}

export interface ProbeOptions {
  attempts: number
  timeoutMs: number
  concurrency: number
}

/** How a transport's refusal reads: the peer's RST, no route, or a transport that will not forward at all. */
export function classifyOpenError(err: Error): Exclude<ProbeOutcome, 'connected' | 'timeout'> {
  const m = err.message.toLowerCase()
  if (/refused/.test(m) && !/administratively|prohibited|forwarding/.test(m)) return 'refused'
  if (/no route|unreachable|network is down|host is down/.test(m)) return 'unreachable'
  return 'not-probed'
}

async function attempt(open: OpenTcp, t: ProbeTarget, timeoutMs: number): Promise<{outcome: ProbeOutcome; why?: string}> {
  let timer: NodeJS.Timeout | undefined
  const pending = open(t.host, t.port)
  const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)))
  try {
    const r = await Promise.race([pending, timeout])
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
    return {outcome: classifyOpenError(e as Error), why: (e as Error).message}
  } finally {
    clearTimeout(timer)
  }
}

/**
 * Connect-and-close probes, `attempts` per target (enough to see one bad endpoint among several behind a VIP), with
 * at most `concurrency` connections in flight. Stops probing a target early when the transport refuses to forward.
 */
export async function probeTargets(open: OpenTcp, targets: ProbeTarget[], opts: ProbeOptions): Promise<ProbeTally[]> {
  const tallies: ProbeTally[] = targets.map((target) => ({target, attempts: 0, connected: 0, refused: 0, timedOut: 0, unreachable: 0}))
  const queue: Array<() => Promise<void>> = []
  for (const tally of tallies)
    for (let i = 0; i < opts.attempts; i++)
      queue.push(async () => {
        if (tally.notProbed) return
        const r = await attempt(open, tally.target, opts.timeoutMs)
        if (r.outcome === 'not-probed') {
          tally.notProbed = r.why ?? 'the transport would not open the connection'
          return
        }
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
  return tallies
}
