import {describeTarget, WatchStore} from '../cluster/watch-objects.js'
import {FULL_REFRESH_EVERY, reprograms, type RoundTrigger, type WatchedChange} from '../diagnosis/watch-round.js'
import type {KubeConfig} from '../vendor/client-node.js'
import {stderrLine} from './stderr.js'
import {WatchSet, type RoleTarget} from './watch-set.js'

/** One round of the watch: why it runs and what changed since the round before. */
export interface WatchRound {
  /** 1 for the first diagnosis. */
  number: number
  trigger: RoundTrigger
  changes: WatchedChange[]
  /** This interval round reads everything again (every FULL_REFRESH_EVERY intervals). */
  fullRefresh: boolean
  /** What the watches hold, once they run (not in the first round). */
  watched?: {store: WatchStore; targets: RoleTarget[]}
}

/** What the loop runs and says; svc builds it (what one diagnosis is, and how a change is printed). */
export interface WatchLoopOptions<T> {
  kc: KubeConfig
  /** What to watch, from a diagnosis (the first, then each one: the Service's selector may pick other Pods). */
  targets: (diagnosis: T) => RoleTarget[]
  /** One diagnosis, from the API and the nodes, reading what `round` calls for. */
  diagnose: (round: WatchRound) => Promise<T>
  /** Prints a diagnosis: in full the first time (`prev` undefined), else what changed since `prev`. */
  print: (prev: T | undefined, next: T) => void
  /** Whether `next` breaks something that worked in `prev` (a path, a finding that appeared, the verdict). */
  breaks: (prev: T, next: T) => boolean
  /** A break right after a change that makes kube-proxy reprogram is read again after this many ms before it is printed. */
  settleMs: number
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
 * `svc --watch`: diagnoses, prints it, then watches the API (keeping the watched objects in a store the later rounds
 * read instead of listing again) and diagnoses again on a change (coalesced to one per `minGapMs`) or when `intervalMs`
 * passed without one, printing what changed, until Ctrl-C (SIGINT), SIGTERM or SIGHUP. A round after a change that
 * makes kube-proxy reprogram (the Service, its EndpointSlices) whose diagnosis shows a new break is not printed: the
 * nodes are read again after `settleMs` (kube-proxy syncs its rules a moment after the API changed, at most once per
 * its min-sync-period) and that diagnosis is printed. After each diagnosis the watches follow what it read: a Service
 * whose selector changed has its old Pods' watch ended and the new Pods watched. A diagnosis under way when the signal comes ends first (it closes
 * its own connections); the watches are aborted; resolves to the last diagnosis. A later diagnosis that fails says so
 * on stderr and the watch goes on; the first one's error is the command's.
 */
export async function watchLoop<T>(o: WatchLoopOptions<T>): Promise<T> {
  const stop = new AbortController()
  const onSignal = () => stop.abort()
  for (const s of ENDING) process.on(s, onSignal)
  let last: T | undefined
  let number = 1
  try {
    last = await o.diagnose({number, trigger: 'first', changes: [], fullRefresh: false})
    o.print(undefined, last)
    let wake: (() => void) | undefined
    let pending: WatchedChange[] = []
    const nudge = () => wake?.()
    stop.signal.addEventListener('abort', () => wake?.(), {once: true})
    const failing = new Set<string>()
    const store = new WatchStore()
    const watches = new WatchSet(o.kc, {
      signal: stop.signal,
      timeoutMs: o.timeoutMs,
      store,
      onChange: (t, change) => {
        failing.delete(describeTarget(t))
        o.log?.(`watch: ${describeTarget(t)} changed`)
        pending.push({role: (t as RoleTarget).role, name: change.name, node: change.nodeName})
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
    watches.watch(o.targets(last))
    const watched = {store, targets: watches.targets}
    // What the diagnosis calls for now: a Service whose selector changed picks other Pods, watched from the next round.
    const retarget = (d: T) => {
      const {started, stopped} = watches.watch(o.targets(d))
      if (started.length === 0 && stopped.length === 0) return
      watched.targets = watches.targets
      const listed = (ts: RoleTarget[]) => ts.map(describeTarget).join(', ') || 'nothing'
      o.log?.(`watch: now ${listed(started)}, no longer ${listed(stopped)}`)
    }
    let lastRun = Date.now()
    let intervals = 0
    // Due: the rest of the gap after a change, else the interval; a change or the signal wakes the wait early.
    const due = () => lastRun + (pending.length > 0 ? o.minGapMs : o.intervalMs)
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
    const settle = () =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(done, o.settleMs)
        function done() {
          clearTimeout(timer)
          stop.signal.removeEventListener('abort', done)
          resolve()
        }
        stop.signal.addEventListener('abort', done, {once: true})
      })
    while (!stop.signal.aborted) {
      await untilDue()
      if (stop.signal.aborted) break
      const changes = pending
      pending = []
      const trigger: RoundTrigger = changes.length > 0 ? 'change' : 'interval'
      const fullRefresh = trigger === 'interval' && ++intervals % FULL_REFRESH_EVERY === 0
      try {
        let next = await o.diagnose({number: ++number, trigger, changes, fullRefresh, watched})
        if (trigger === 'change' && reprograms(changes) && o.breaks(last, next) && !stop.signal.aborted) {
          o.log?.(
            `round ${number}: a break right after the change: the nodes are read again in ${o.settleMs / 1000}s (kube-proxy may not have synced yet)`,
          )
          await settle()
          if (stop.signal.aborted) break
          next = await o.diagnose({number: ++number, trigger: 'settle', changes: [], fullRefresh: false, watched})
        }
        o.print(last, next)
        last = next
        retarget(next)
      } catch (e) {
        stderrLine(`warning: diagnosis failed: ${(e as Error).message}; still watching`)
      } finally {
        // From the end of a diagnosis: one that takes longer than the interval is not followed at once by the next.
        lastRun = Date.now()
      }
    }
    await watches.ended()
    return last
  } finally {
    stop.abort()
    for (const s of ENDING) process.off(s, onSignal)
  }
}
