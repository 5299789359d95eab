import {parseNftTrace, type TracedPacket} from '../../parse/nft-trace.js'
import {trackUntilExit, untrack} from '../../util/ending-signals.js'
import {
  KERNEL_TRACE_COMMANDS,
  kernelTraceLine,
  MAX_MONITOR_SECONDS,
  newTraceTableName,
  staleTables,
  doctorTables,
  STALE_AFTER_SECONDS,
  type KernelTraceCommand,
  type TraceTuple,
} from '../kernel-trace-commands.js'
import type {NodeAccess, RunResult} from '../transport/node-access.js'

/** What --kernel-trace learnt on one node, or why it learnt nothing (said in coverage; the run is not failed for it). */
export type KernelTraceRun =
  | {
      traced: true
      table: string
      /** The probes' packets as netfilter traced them, each with its events in order. */
      packets: TracedPacket[]
      /** Tables of killed runs removed first. */
      removedStale: string[]
      /** The table could not be deleted: the line says how to. */
      leftover?: string
      /** The monitor's own failure, where it ran but said something (its first line). */
      warning?: string
    }
  | {traced: false; reason: string}

export interface KernelTraceOptions {
  /** Says a line on stderr (announced): the commands, before anything is changed. */
  announce: (line: string) => void
  /** --dry-run: print the commands, run none. */
  dryRun: boolean
  /** How long the monitor may watch (≤ MAX_MONITOR_SECONDS). */
  monitorSeconds: number
  /** How long after the monitor is started the probes wait: its subscription to the trace events. */
  settleMs?: number
  /** How long the monitor goes on after the probes end, for their last events, before it is ended. */
  drainMs?: number
  now?: () => number
}

const firstLine = (text: string) => text.trim().split('\n')[0] || 'no message'
const LEGACY = 'kernel trace not available on iptables-legacy (no change made)'
const STEP_MS = 10_000
/** The monitor's time after the probes: trace events are sent as the packets pass, printed at once. */
const DRAIN_MS = 150
/**
 * From the monitor's start to the first probe: its exec reaching the node, a shell, `timeout` (and sudo) starting nft
 * and nft subscribing to the trace events; the table is made meanwhile. `nft monitor` says nothing when it is ready.
 */
const SETTLE_MS = 400

function failed(r: RunResult): string | undefined {
  if (r.kind === 'not-recorded') return r.what
  if (r.code === 0) return undefined
  return firstLine(r.stderr) + (r.code === null ? ' (cut short)' : ` (exit ${r.code})`)
}

/** Why a failed command means nothing can be traced here, in the report's words. */
function cannot(what: string, why: string): string {
  if (/not permitted|permission denied|password is required|a terminal is required/i.test(why))
    return `kernel trace not run: no root for nft (${why})`
  return `kernel trace not run: ${what} failed: ${why}`
}

/**
 * Whether the node's kube-proxy rules live in nftables (nftables mode, or iptables through its nft backend): a table of
 * kube-proxy's, or iptables-nft's nat/filter tables. Else its iptables is the legacy one, which nft cannot trace.
 */
function nftBackend(listing: string): boolean {
  return /^table (ip|ip6|inet) (kube-proxy|nat|filter|mangle|raw)\s*$/m.test(listing)
}

/** The line of commands a person can run to remove one table (what a killed run leaves). */
function removalLine(table: string, isRoot: boolean): string {
  return kernelTraceLine(KERNEL_TRACE_COMMANDS.deleteTable(table), isRoot)
}

/**
 * Runs `probes` with netfilter tracing their packets on the node, through the kernel trace's own allow-list: removes
 * the tables killed runs left, makes a private table that marks only the probes' tuples, watches `nft monitor trace`
 * (bounded by `timeout` on the node) while the probes run, and deletes the table at the end, on error, and on an ending
 * signal. The commands are announced before anything is changed. Nothing here fails the probes: what could not be
 * traced is the result's reason.
 */
export async function withKernelTrace<T>(
  access: NodeAccess,
  node: string,
  tuples: readonly TraceTuple[],
  opts: KernelTraceOptions,
  probes: () => Promise<T>,
): Promise<{result: T; trace: KernelTraceRun}> {
  const now = opts.now ?? Date.now
  const run = access.runKernelTrace?.bind(access)
  const transport = access.describe().transport
  if (!run || tuples.length === 0) {
    const reason = !run
      ? `kernel trace not run: the ${transport} transport cannot run nft`
      : 'kernel trace not run: no Service address was probed'
    return {result: await probes(), trace: {traced: false, reason}}
  }
  const isRoot = !(await access.usesSudo?.())
  const table = newTraceTableName(now())
  const seconds = Math.max(1, Math.min(MAX_MONITOR_SECONDS, Math.ceil(opts.monitorSeconds)))
  const setup = KERNEL_TRACE_COMMANDS.setup(table, tuples)
  const monitor = KERNEL_TRACE_COMMANDS.monitor(seconds)
  const remove = KERNEL_TRACE_COMMANDS.deleteTable(table)
  const say = (cmd: KernelTraceCommand) => opts.announce(`  ${kernelTraceLine(cmd, isRoot)}`)
  opts.announce(
    `--kernel-trace on ${node}${opts.dryRun ? ' (dry run: nothing is run)' : ''}: delete the doctor's own tables (kpd_trace_*) older than ${STALE_AFTER_SECONDS}s, then run (nothing outside its own table is changed):`,
  )
  for (const cmd of [monitor, ...setup, remove]) say(cmd)
  if (opts.dryRun)
    return {
      result: await probes(),
      trace: {
        traced: false,
        reason: 'kernel trace not run: --dry-run (the commands were printed, nothing was changed)',
      },
    }

  // The monitor only watches: it is started first, and subscribes to the trace events while the tables are listed and
  // the doctor's is made, so that the probes need not wait for it (`nft monitor` says nothing when it is ready).
  const stop = new AbortController()
  const watchingSince = Date.now()
  const watching = run(monitor, (seconds + 5) * 1000, stop.signal).catch((e: Error) => ({
    kind: 'not-recorded' as const,
    what: e.message,
  }))
  const untraced = async (reason: string) => {
    stop.abort()
    await watching
    return {result: await probes(), trace: {traced: false as const, reason}}
  }

  const listed = await run(KERNEL_TRACE_COMMANDS.listTables(), STEP_MS)
  const listFailed = failed(listed)
  if (listFailed || listed.kind !== 'ran') return untraced(cannot('nft list tables', listFailed ?? ''))
  const listing = listed.stdout.toString('utf8')
  if (!nftBackend(listing)) return untraced(LEGACY)

  const removedStale: string[] = []
  for (const stale of staleTables(listing, now())) {
    const cmd = KERNEL_TRACE_COMMANDS.deleteTable(stale)
    opts.announce(`  removing a table a killed run left on ${node}: ${kernelTraceLine(cmd, isRoot)}`)
    if (!failed(await run(cmd, STEP_MS))) removedStale.push(stale)
  }

  let made = false
  const id = `kernel-trace/${node}/${table}`
  const leftoverLine = `kproxy-doctor cleanup --node ${node} (or on the node: ${removalLine(table, isRoot)})`
  const removeTable = async (): Promise<string | undefined> => {
    const why = failed(
      await run(remove, STEP_MS).catch((e: Error) => ({kind: 'not-recorded' as const, what: e.message})),
    )
    return why ? `kernel trace table ${table} on ${node} not deleted (${why}): ${leftoverLine}` : undefined
  }
  let removing: Promise<string | undefined> | undefined
  trackUntilExit(id, {kind: 'kernel trace table', remove: removeTable, leftover: leftoverLine})
  try {
    for (const part of setup) {
      const madeIt = await run(part, STEP_MS).catch((e: Error) => ({kind: 'not-recorded' as const, what: e.message}))
      const why = failed(madeIt)
      // nft commits each part as one transaction: a first part that ended with an exit status made nothing; one cut
      // short may have made the table; once the table is made, it is the doctor's to delete whatever comes after.
      made ||= !why || (madeIt.kind === 'ran' && madeIt.code === null)
      if (why) return await untraced(cannot('making its table (nft)', why))
    }
    const settle = (opts.settleMs ?? SETTLE_MS) - (Date.now() - watchingSince)
    if (settle > 0) await new Promise((resolve) => setTimeout(resolve, settle))
    const result = await probes()
    // The probes are over: netfilter traced their packets as they passed, so the table goes now, while the monitor has
    // a moment to print their last events; then it is ended rather than left to its bound (where the transport cannot
    // end it, `timeout` on the node does).
    removing = removeTable()
    const ending = setTimeout(() => stop.abort(), opts.drainMs ?? DRAIN_MS)
    const watched = await watching.finally(() => clearTimeout(ending))
    if (watched.kind !== 'ran')
      return {result, trace: {traced: false, reason: `kernel trace not read: ${watched.what}`}}
    // `timeout` ends the monitor (exit 124), or the doctor does once the probes are over (no exit status).
    // On a terminal (see the SSH transport) the monitor's errors come with its output, and lines may end in CR LF.
    const printed = watched.stdout.toString('utf8').replace(/\r\n/g, '\n')
    const warning =
      watched.code === 124 || watched.code === 0 || (watched.code === null && stop.signal.aborted)
        ? undefined
        : firstLine(watched.stderr || printed)
    const packets = parseNftTrace(printed).filter(
      (p) => p.events.some((e) => e.table === table) && tuples.some((t) => t.address === p.daddr && t.port === p.dport),
    )
    return {result, trace: {traced: true, table, packets, removedStale, ...(warning ? {warning} : {})}}
  } finally {
    if (made) {
      const leftover = await (removing ?? removeTable())
      if (leftover) opts.announce(`warning: ${leftover}`)
    }
    untrack(id)
  }
}

/** `kproxy-doctor cleanup`: every table of the doctor's on the node, whatever its age, deleted; their names. */
export async function removeTraceTables(
  access: NodeAccess,
  announce: (line: string) => void,
): Promise<{removed: string[]; failed: string[]} | {error: string}> {
  const run = access.runKernelTrace?.bind(access)
  if (!run) return {error: `the ${access.describe().transport} transport cannot run nft`}
  const isRoot = !(await access.usesSudo?.())
  const listed = await run(KERNEL_TRACE_COMMANDS.listTables(), STEP_MS)
  const why = failed(listed)
  if (why || listed.kind !== 'ran') return {error: `nft list tables failed: ${why}`}
  const removed: string[] = []
  const notRemoved: string[] = []
  for (const t of doctorTables(listed.stdout.toString('utf8'))) {
    const cmd = KERNEL_TRACE_COMMANDS.deleteTable(t.name)
    announce(kernelTraceLine(cmd, isRoot))
    const r = failed(await run(cmd, STEP_MS))
    if (r) notRemoved.push(`${t.name}: ${r}`)
    else removed.push(t.name)
  }
  return {removed, failed: notRemoved}
}
