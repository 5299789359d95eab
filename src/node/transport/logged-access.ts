import {notesOf, wrapAccess, type NodeAccess, type RunResult, type TcpOpen, type FileRead} from './node-access.js'
import type {ArgsOf, NodeCommandKey} from '../read/node-reads.js'
import {joinHostPort} from '../../net/host-port.js'

/** Where --verbose lines go (stderr); one line per event, no trailing newline. */
export type VerboseLog = (line: string) => void

function seconds(startedAt: number): string {
  return `${((performance.now() - startedAt) / 1000).toFixed(2)}s`
}

function size(bytes: number): string {
  return bytes < 10_240 ? `${bytes} B` : `${Math.round(bytes / 1024)} KiB`
}

function describeArgs(args: unknown[]): string {
  return args.length === 0 ? '' : ' ' + JSON.stringify(args[0])
}

function runOutcome(r: RunResult): string {
  return r.kind === 'ran' ? `exit ${r.code ?? 'signal'}, ${size(r.stdout.length)}` : `not recorded (${r.what})`
}

function tcpOutcome(r: TcpOpen): string {
  return r.kind === 'open' ? 'open' : `${r.outcome}: ${r.reason}`
}

function fileOutcome(r: FileRead): string {
  return r.kind === 'read'
    ? size(r.content.length)
    : r.kind === 'missing'
      ? `missing: ${r.reason}`
      : `not recorded (${r.what})`
}

/**
 * NodeAccess that says on the verbose log what it does: every allow-listed command by its key (and arguments), every
 * TCP stream and file read, with the transport, the outcome and how long it took. One choke point for every
 * transport, so --verbose shows exactly what reached the node.
 */
export function loggedAccess(access: NodeAccess, node: string, log: VerboseLog): NodeAccess {
  const d = access.describe()
  const via = `${node} [${d.transport} ${d.address}]`
  async function timed<T>(what: string, op: () => Promise<T>, outcome: (r: T) => string): Promise<T> {
    const startedAt = performance.now()
    try {
      const r = await op()
      log(`${via} ${what} → ${outcome(r)} in ${seconds(startedAt)}`)
      return r
    } catch (e) {
      log(`${via} ${what} → failed in ${seconds(startedAt)}: ${(e as Error).message}`)
      throw e
    }
  }
  return wrapAccess(access, {
    run: <K extends NodeCommandKey>(key: K, ...args: ArgsOf<K>) =>
      timed(`run ${key}${describeArgs(args)}`, () => access.run(key, ...args), runOutcome),
    openTcp: (host, port, timeoutMs) =>
      timed(`tcp ${joinHostPort(host, port)}`, () => access.openTcp(host, port, timeoutMs), tcpOutcome),
    readFile: (path) => timed(`read ${path}`, () => access.readFile(path), fileOutcome),
    describe: () => d,
    close: async () => {
      const startedAt = performance.now()
      await access.close()
      if (d.transport === 'debug-pod')
        log(`${via} debug Pod ${notesOf(access).leftovers.length ? 'NOT deleted' : 'deleted'} in ${seconds(startedAt)}`)
    },
  })
}
