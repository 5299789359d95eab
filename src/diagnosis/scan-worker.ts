import {parentPort, workerData} from 'node:worker_threads'
import {parseSharedNodeReads} from '../node/read/shared-reads.js'
import {judgeService, type ServiceOutcome, type Summarise} from './judge-services.js'
import {reachOf} from './reach.js'
import type {ScanWorkerData, ScanWorkerMessage} from './scan-threads.js'

/** A scan's worker thread: parses the shared node reads, then judges the next Services until none is left. */
async function run(data: ScanWorkerData, port: NonNullable<typeof parentPort>): Promise<void> {
  const post = (m: ScanWorkerMessage<unknown>) => port.postMessage(m)
  const make = (await import(data.recipe.module)) as Record<string, (...args: unknown[]) => Summarise<unknown>>
  const summarise = make[data.recipe.name](...data.recipe.args)
  const {reach, verbose, ...plain} = data.options
  const opts = {
    ...plain,
    reach: reach && reachOf(reach),
    log: verbose ? (line: string) => post({kind: 'log', line}) : undefined,
  }
  const nodes = data.nodes.map(parseSharedNodeReads)
  try {
    const observations = nodes.map((n) => n.observation)
    for (
      let start = Atomics.add(data.next, 0, data.batch);
      start < data.states.length;
      start = Atomics.add(data.next, 0, data.batch)
    ) {
      const items: Array<[number, ServiceOutcome<unknown>]> = []
      for (let i = start; i < Math.min(start + data.batch, data.states.length); i++)
        items.push([i, judgeService(data.states[i], observations, opts, summarise)])
      post({kind: 'judged', items})
    }
  } finally {
    for (const n of nodes) n.close()
  }
  post({kind: 'done'})
}

if (parentPort) await run(workerData as ScanWorkerData, parentPort)
