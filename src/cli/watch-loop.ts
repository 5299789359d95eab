import {describeTarget, watchObjects, type WatchTarget} from '../cluster/watch-objects.js'
import type {KubeConfig} from '../vendor/client-node.js'
import {stderrLine} from './stderr.js'

/** What the loop runs and says; svc builds it (what one diagnosis is, and how a change is printed). */
export interface WatchLoopOptions<T> {
  kc: KubeConfig
  /** What to watch, from the first diagnosis. */
  targets: (first: T) => WatchTarget[]
  /** One diagnosis, from the API and the nodes. */
  diagnose: () => Promise<T>
  /** Prints a diagnosis: in full the first time (`prev` undefined), else what changed since `prev`. */
  print: (prev: T | undefined, next: T) => void
  /** At most one diagnosis per this many ms: changes that come sooner are diagnosed together. */
  minGapMs: number
  /** The nodes' rules have no watch: they are read again after this many ms without a change (--watch-interval). */
  intervalMs: number
  /** Each API request may take this long (--timeout). */
  timeoutMs: number
  log?: (line: string) => void
}

/** The signals that end a watch cleanly: Ctrl-C, a kill, a closed terminal. */
const ENDING = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const

/**
 * `svc --watch`: diagnoses, prints it, then watches the API and diagnoses again on a change (coalesced to one per
 * `minGapMs`) or when `intervalMs` passed without one, printing what changed, until Ctrl-C (SIGINT), SIGTERM or
 * SIGHUP. A diagnosis under way when the signal comes ends first (it closes its own connections); the watches are
 * aborted; resolves to the last diagnosis. A later diagnosis that fails says so on stderr and the watch goes on; the
 * first one's error is the command's.
 */
export async function watchLoop<T>(o: WatchLoopOptions<T>): Promise<T> {
  const stop = new AbortController()
  const onSignal = () => stop.abort()
  for (const s of ENDING) process.on(s, onSignal)
  let last: T | undefined
  try {
    last = await o.diagnose()
    o.print(undefined, last)
    let wake: (() => void) | undefined
    let changed = false
    const nudge = () => {
      changed = true
      wake?.()
    }
    stop.signal.addEventListener('abort', () => wake?.(), {once: true})
    const failing = new Set<string>()
    const watching = watchObjects(o.kc, o.targets(last), {
      signal: stop.signal,
      timeoutMs: o.timeoutMs,
      onChange: (t) => {
        failing.delete(describeTarget(t))
        o.log?.(`watch: ${describeTarget(t)} changed`)
        nudge()
      },
      onError: (t, message, retryMs) => {
        const what = describeTarget(t)
        const line = `watch of ${what} failed: ${message}; retrying in ${retryMs / 1000}s`
        // Once per failing watch on stderr (it retries every few seconds), every time in --verbose.
        if (!failing.has(what)) stderrLine(`warning: ${line}`)
        else o.log?.(line)
        failing.add(what)
      },
    })
    let lastRun = Date.now()
    // Due: the rest of the gap after a change, else the interval; a change or the signal wakes the wait early.
    const due = () => lastRun + (changed ? o.minGapMs : o.intervalMs)
    const untilDue = () =>
      new Promise<void>((resolve) => {
        let timer: NodeJS.Timeout | undefined
        const finish = () => {
          clearTimeout(timer)
          wake = undefined
          resolve()
        }
        const arm = () => {
          clearTimeout(timer)
          timer = setTimeout(finish, Math.max(0, due() - Date.now()))
        }
        wake = () => (stop.signal.aborted ? finish() : arm())
        arm()
      })
    while (!stop.signal.aborted) {
      await untilDue()
      if (stop.signal.aborted) break
      changed = false
      try {
        const next = await o.diagnose()
        o.print(last, next)
        last = next
      } catch (e) {
        stderrLine(`warning: diagnosis failed: ${(e as Error).message}; still watching`)
      } finally {
        // From the end of a diagnosis: one that takes longer than the interval is not followed at once by the next.
        lastRun = Date.now()
      }
    }
    await watching
    return last
  } finally {
    stop.abort()
    for (const s of ENDING) process.off(s, onSignal)
  }
}
