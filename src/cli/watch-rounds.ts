import {CachedClusterSource, type CacheOptions} from '../cluster/cached-source.js'
import {LiveClusterSource} from '../cluster/live-source.js'
import {WatchCacheSource} from '../cluster/watch-cache-source.js'
import type {GatheredLive, KeptNode, LiveRound} from '../diagnosis/gather.js'
import {apiRead, describeRound, nodeRead, type NodeRead, type RoundInput} from '../diagnosis/watch-round.js'
import type {KubeConfig} from '../vendor/client-node.js'
import type {WatchRound} from './watch-loop.js'

/** Each question asked as asked (one Service, not its namespace's), a failure asked again next round. */
const WATCH_CACHE: CacheOptions = {lookups: 'as asked', failures: 'forgotten'}

/**
 * What `svc --watch` carries from one round to the next, and each round's reads (diagnosis/watch-round.ts decides):
 * the objects nobody watches, kept between full refreshes (a memo of the API's answers), and each node's last reads.
 */
export class WatchRounds {
  private memo: CachedClusterSource
  private previous = new Map<string, KeptNode>()
  private reads = new Map<string, NodeRead>()
  private input?: RoundInput
  private number = 0

  constructor(
    private readonly live: () => LiveClusterSource,
    private readonly opts: {probes: boolean; log?: (line: string) => void},
  ) {
    this.memo = new CachedClusterSource(live(), WATCH_CACHE)
  }

  /** How round `round` reads the cluster and the nodes. */
  start(round: WatchRound): LiveRound {
    const input: RoundInput = {
      trigger: round.trigger,
      changes: round.changes,
      fullRefresh: round.fullRefresh,
      probes: this.opts.probes,
    }
    this.input = input
    this.number = round.number
    this.reads = new Map()
    if (apiRead(input) === 'store, the rest again') this.memo = new CachedClusterSource(this.live(), WATCH_CACHE)
    const before = (name: string) => {
      const kept = this.previous.get(name)
      return kept === undefined ? 'absent' : kept.collection.observation.reachable ? 'read' : 'failed'
    }
    return {
      source: round.watched ? new WatchCacheSource(round.watched.store, round.watched.targets, this.memo) : this.memo,
      nodeRead: (name) => {
        const how = nodeRead(input, name, before(name))
        this.reads.set(name, how)
        return how
      },
      previous: this.previous,
    }
  }

  /** Keeps what the round read for the next one, and says (--verbose) what it read. */
  finish(g: Pick<GatheredLive, 'observations' | 'recordings' | 'readVia'>): void {
    const next = new Map<string, KeptNode>()
    for (const observation of g.observations) {
      const recording = g.recordings.get(observation.name)
      const readVia = g.readVia.get(observation.name)
      if (recording && readVia) next.set(observation.name, {collection: {observation, recording}, readVia})
    }
    this.previous = next
    if (this.input) this.opts.log?.(describeRound(this.number, this.input, this.reads))
  }
}

/** The rounds of a watch on the cluster `kc`: the API read through one client, with --verbose's log of each request. */
export function watchRounds(
  kc: KubeConfig,
  opts: {timeoutMs: number; probes: boolean; log?: (line: string) => void},
): WatchRounds {
  return new WatchRounds(() => new LiveClusterSource(kc, opts.timeoutMs, opts.log), opts)
}
