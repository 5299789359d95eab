import {
  describeTarget,
  watchObjects,
  type WatchOptions,
  type WatchStore,
  type WatchTarget,
} from '../cluster/watch-objects.js'
import type {WatchedRole} from '../diagnosis/watch-round.js'
import type {KubeConfig} from '../vendor/client-node.js'

/** A watched target and what its objects are to the diagnosis. */
export type RoleTarget = WatchTarget & {role: WatchedRole}

/** One target's watch: its own abort (a re-target ends it alone) and its end. */
interface RunningWatch {
  target: RoleTarget
  stop: AbortController
  ended: Promise<void>
}

/** What `WatchSet.watch` changed: the targets it started watching and those it stopped. */
export interface Retargeted {
  started: RoleTarget[]
  stopped: RoleTarget[]
}

type SetOptions = Omit<WatchOptions, 'store'> & {store: WatchStore}

/**
 * `svc --watch`'s open watches, one per target, kept equal to what the last diagnosis calls for: when the Service's
 * selector changes, the watch of the Pods it picked ends (its objects leave the store) and a watch of the Pods it picks
 * now begins. A watch that ended delivers no change after it; `ended()` resolves once every watch, stopped or not, has
 * closed its connection (after the options' `signal` aborted).
 */
export class WatchSet {
  private readonly running = new Map<string, RunningWatch>()
  /** Every watch's end, the stopped ones' too (a re-target is rare: a Service's selector changing). */
  private readonly ending = new Set<Promise<void>>()

  constructor(
    private readonly kc: KubeConfig,
    private readonly opts: SetOptions,
  ) {}

  /** The targets watched now, in the order they were started. */
  get targets(): RoleTarget[] {
    return [...this.running.values()].map((w) => w.target)
  }

  /** Watches exactly `targets`: stops the watches of the others and starts those not watched yet. */
  watch(targets: RoleTarget[]): Retargeted {
    const wanted = new Map(targets.map((t) => [describeTarget(t), t]))
    const stopped: RoleTarget[] = []
    for (const [key, w] of this.running) {
      if (wanted.has(key)) continue
      this.running.delete(key)
      w.stop.abort()
      this.opts.store.forget(w.target)
      // A list answered just before the abort may still fill the store: forget it again once the watch has ended.
      const forgetAgain = () => {
        if (!this.running.has(key)) this.opts.store.forget(w.target)
      }
      void w.ended.then(forgetAgain, forgetAgain)
      stopped.push(w.target)
    }
    const started = [...wanted].filter(([key]) => !this.running.has(key)).map(([, t]) => t)
    for (const t of started) this.start(describeTarget(t), t)
    return {started, stopped}
  }

  /** Resolves once every watch started, stopped or not, has ended (a failure of one is thrown). */
  async ended(): Promise<void> {
    await Promise.all([...this.ending])
  }

  private start(key: string, target: RoleTarget): void {
    const stop = new AbortController()
    const live = () => !stop.signal.aborted
    const ended = watchObjects(this.kc, [target], {
      ...this.opts,
      signal: AbortSignal.any([this.opts.signal, stop.signal]),
      onChange: (t, change) => live() && this.opts.onChange(t, change),
      onError: (t, message, retryMs) => live() && this.opts.onError(t, message, retryMs),
    })
    this.ending.add(ended)
    this.running.set(key, {target, stop, ended})
  }
}
