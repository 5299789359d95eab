import {setImmediate as yieldToEvents} from 'node:timers/promises'
import {Worker} from 'node:worker_threads'
import {existsSync} from 'node:fs'
import type {NodeObservation} from '../node/observation.js'
import type {SharedNodeReads} from '../node/read/shared-reads.js'
import type {DiagnoseOptions} from './diagnose.js'
import {judgeService, type ServiceOutcome, type ServiceState, type Summarise} from './judge-services.js'
import type {ReachData} from './reach.js'
import {usableCpus} from './cpu-limit.js'

/**
 * How a worker thread makes the scan's Summarise: the export `name` of `module` (a file URL), called with `args`
 * (plain data). A function cannot cross threads; its recipe can.
 */
export interface SummariseRecipe {
  module: string
  name: string
  args: unknown[]
}

/** The diagnosis options a worker thread is given as they are (the others: reach as data, log as messages). */
type PassedOptions = Omit<DiagnoseOptions, 'log' | 'reach'>

/** What a worker thread is given: everything in plain data or shared memory. */
export interface ScanWorkerData {
  states: ServiceState[]
  nodes: SharedNodeReads[]
  /** The index of the next Service to judge, shared by every thread: each takes BATCH at a time. */
  next: Int32Array
  batch: number
  options: PassedOptions & {reach?: ReachData; verbose: boolean}
  recipe: SummariseRecipe
}

export type ScanWorkerMessage<R> =
  {kind: 'judged'; items: Array<[number, ServiceOutcome<R>]>} | {kind: 'log'; line: string} | {kind: 'done'}

/** Services a thread takes at a time: small enough to keep threads even at the end, large enough to keep messages few. */
const BATCH = 8
/** A scan judges Services on more threads only past this many (a thread first parses every node's dumps itself). */
const SERVICES_FOR_THREADS = 1000
const MAX_THREADS = 4
/** The worker's script: beside this file compiled alone, and beside the bundle (a separate entry of the build). */
const WORKER_SCRIPT = new URL('./scan-worker.js', import.meta.url)

/**
 * Threads to judge `services` Services on: `requested` (--threads) if given, else on large scans one per CPU the
 * process may use (cores, and its cgroup's CPU quota), up to 4. Each thread holds every node's parsed dumps, so more
 * threads than CPUs (or 4, where there are fewer) only cost memory: a request beyond that is cut to it.
 */
export function scanThreads(requested: number | undefined, services: number, cpus = usableCpus()): number {
  // The single executable has no worker script beside it: it judges on this thread.
  if (!existsSync(WORKER_SCRIPT)) return 1
  const wanted =
    requested === undefined
      ? services >= SERVICES_FOR_THREADS
        ? Math.min(cpus, MAX_THREADS)
        : 1
      : Math.min(requested, maxScanThreads(cpus))
  return Math.max(1, Math.min(wanted, Math.ceil(services / BATCH)))
}

/** The most threads a scan uses, whatever --threads asks: one per usable CPU, or 4 where there are fewer. */
function maxScanThreads(cpus = usableCpus()): number {
  return Math.max(cpus, MAX_THREADS)
}

export interface ThreadedJudging<R> {
  states: ServiceState[]
  observations: NodeObservation[]
  /** The same nodes' reads for the other threads (each parses them itself). */
  sharedNodes: () => SharedNodeReads[]
  opts: DiagnoseOptions
  reach?: ReachData
  summarise: Summarise<R>
  recipe: SummariseRecipe
  threads: number
  onJudged: (index: number, outcome: ServiceOutcome<R>) => void
}

/**
 * Judges the Services on this thread and `threads - 1` worker threads, each taking the next few Services as it is
 * free; each Service's outcome is what one thread alone would make (the same judging, on the same reads).
 */
export async function judgeOnThreads<R>(j: ThreadedJudging<R>): Promise<number[]> {
  const next = new Int32Array(new SharedArrayBuffer(4))
  const {log} = j.opts
  // Only the diagnosis options, by name (a live scan's options also hold callbacks, which cannot cross threads); a new
  // option is a compile error here until it is passed on.
  const plain: Record<keyof PassedOptions, unknown> & PassedOptions = {
    ignore: j.opts.ignore,
    proxyMode: j.opts.proxyMode,
    probes: j.opts.probes,
    readVia: j.opts.readVia,
    dnsJudgedApart: j.opts.dnsJudgedApart,
  }
  const data: ScanWorkerData = {
    states: j.states,
    nodes: j.sharedNodes(),
    next,
    batch: BATCH,
    options: {...plain, reach: j.reach, verbose: log !== undefined},
    recipe: j.recipe,
  }
  const workers = Array.from({length: j.threads - 1}, () => new Worker(WORKER_SCRIPT, {workerData: data}))
  // How many Services each thread judged, this one first.
  const judged = new Array<number>(j.threads).fill(0)
  const finished = workers.map(
    (worker, w) =>
      new Promise<void>((resolve, reject) => {
        let done = false
        worker.on('message', (m: ScanWorkerMessage<R>) => {
          judged[w + 1] += m.kind === 'judged' ? m.items.length : 0
          if (m.kind === 'judged') for (const [index, outcome] of m.items) j.onJudged(index, outcome)
          else if (m.kind === 'log') log?.(m.line)
          else done = true
        })
        worker.on('error', reject)
        worker.on('exit', (code) =>
          done ? resolve() : reject(new Error(`a scan thread stopped (exit code ${code}) before judging its Services`)),
        )
      }),
  )
  // A worker thread that fails stops this thread's share too; the failure is thrown below, once.
  let failed = false
  for (const f of finished) f.catch(() => (failed = true))
  try {
    for (
      let start = Atomics.add(next, 0, BATCH);
      !failed && start < j.states.length;
      start = Atomics.add(next, 0, BATCH)
    ) {
      for (let i = start; i < Math.min(start + BATCH, j.states.length); i++) {
        j.onJudged(i, judgeService(j.states[i], j.observations, j.opts, j.summarise))
        judged[0]++
      }
      await yieldToEvents()
    }
    await Promise.all(finished)
    return judged
  } finally {
    await Promise.all(workers.map((w) => w.terminate()))
  }
}
