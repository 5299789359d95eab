import {randomBytes} from 'node:crypto'
import {familyOf as ipFamily} from '../net/address.js'
import type {CommandLine} from './node-commands.js'
import {ipArgument, portArgument, quote} from './read/command-arguments.js'
import {TRACE_TABLE_NAME} from '../parse/nft-trace.js'

/**
 * The second allow-list, apart from the read-only one (node-commands.ts): the only commands that change a node, used
 * only under `--kernel-trace` (and `cleanup`). They make, fill and delete one private nftables table of the doctor's
 * and watch netfilter's trace events; they never name another table. Every value is validated: the table name against
 * its pattern, addresses and ports as parsed numbers, the hook and family from fixed lists.
 */

/** Every table of the doctor's starts so; the rest of the name is the run's id and its creation time (Unix seconds). */
const TRACE_TABLE_PREFIX = 'kpd_trace_'
const TABLE_NAME = TRACE_TABLE_NAME

/** How long an element of the probe set lives: a tuple forgotten by a killed run stops matching within this. */
const SET_TIMEOUT_SECONDS = 30
/**
 * Earlier than every other base chain at its hook (raw is -300, conntrack -200, DNAT -100): the mark is set before any
 * rule of kube-proxy's or anyone's sees the packet.
 */
const TRACE_PRIORITY = -500
/**
 * The packets the trace rule marks: a connection's opening SYN only (retransmissions included). That is the packet the
 * kernel evidence reads (the one NAT decides on: kernel-trace-walk.ts), it passes before conntrack (-200), where `ct
 * state new` cannot be read yet, and other clients' established connections to the same Service send none.
 */
const OPENING = ['tcp', 'flags', 'syn'] as const
/**
 * Of those, at most a burst per rule, then 20 a second: the burst is two SYNs (the first and its retransmission after
 * 1 s, within a probe's timeout) for each connection the probes open to the family's tuples, so that every probe
 * connection of the round is marked, and never more than MAX_BURST (the sudoers line allows three digits).
 */
const RATE_PER_SECOND = '20/second'
const SYNS_PER_CONNECTION = 2
const MAX_BURST = 999
/** The longest `nft monitor trace` may run on the node, whatever the doctor does. */
export const MAX_MONITOR_SECONDS = 20

type TraceHook = 'prerouting' | 'output'
const TRACE_HOOKS: readonly TraceHook[] = ['prerouting', 'output']
export type TraceFamily = 'ip' | 'ip6'
const SET_OF: Record<TraceFamily, {set: string; type: string}> = {
  ip: {set: 'probes4', type: 'ipv4_addr'},
  ip6: {set: 'probes6', type: 'ipv6_addr'},
}

/** One probe's tuple: the destination it connects to (the Service's address and port), TCP. */
export interface TraceTuple {
  address: string
  port: number
  /** How many connections the probes open to it. */
  connections: number
}

/** A table name of the doctor's: the run's id and when it was made (Unix seconds); anything else throws. */
export function traceTableName(runId: string, createdAtSeconds: number): string {
  const name = `${TRACE_TABLE_PREFIX}${runId}_${String(createdAtSeconds).padStart(10, '0')}`
  if (!TABLE_NAME.test(name)) throw new Error(`refusing to build a kernel trace command: bad table name ${name}`)
  return name
}

/** A fresh table name for a run: 6 random hex digits and the time now. */
export function newTraceTableName(nowMs: number = Date.now()): string {
  return traceTableName(randomBytes(3).toString('hex'), Math.floor(nowMs / 1000))
}

/** When a table of the doctor's was made (Unix seconds), or undefined where the name is not one of the doctor's. */
function traceTableCreatedAt(name: string): number | undefined {
  const m = TABLE_NAME.exec(name)
  return m ? Number(m[2]) : undefined
}

function tableArgument(name: string): string {
  if (!TABLE_NAME.test(name))
    throw new Error(`refusing to build a kernel trace command: ${JSON.stringify(name)} is not a table of the doctor's`)
  return name
}

function hookArgument(hook: string): TraceHook {
  if (!TRACE_HOOKS.includes(hook as TraceHook))
    throw new Error(`refusing to build a kernel trace command: hook ${JSON.stringify(hook)}`)
  return hook as TraceHook
}

/** A command of this allow-list: its argv (for transports without a shell) and whether it needs root. */
export interface KernelTraceCommand {
  /** What it does, for the announcement. */
  purpose: string
  argv: readonly string[]
  /** Whether it changes the node (false: it only reads or watches). */
  changes: boolean
}

/** One nft statement of the setup: its words, without `nft`. */
type Statement = readonly string[]

function tableStatement(table: string): Statement {
  return ['add', 'table', 'inet', tableArgument(table)]
}

function chainStatement(table: string, hook: TraceHook): Statement {
  return [
    'add',
    'chain',
    'inet',
    tableArgument(table),
    hookArgument(hook),
    '{',
    'type',
    'filter',
    'hook',
    hook,
    'priority',
    String(TRACE_PRIORITY),
    ';',
    'policy',
    'accept',
    ';',
    '}',
  ]
}

function setStatement(table: string, family: TraceFamily): Statement {
  return [
    'add',
    'set',
    'inet',
    tableArgument(table),
    SET_OF[family].set,
    '{',
    'type',
    SET_OF[family].type,
    '.',
    'inet_proto',
    '.',
    'inet_service',
    ';',
    'flags',
    'timeout',
    ';',
    'timeout',
    `${SET_TIMEOUT_SECONDS}s`,
    ';',
    '}',
  ]
}

/** The rule's limit for the tuples of one family: a burst that covers their connections' SYNs. */
function rateStatement(tuples: readonly TraceTuple[]): Statement {
  let syns = 0
  for (const t of tuples) {
    if (!Number.isInteger(t.connections) || t.connections < 1)
      throw new Error(`refusing to build a kernel trace command: ${JSON.stringify(t.connections)} connections`)
    syns += SYNS_PER_CONNECTION * t.connections
  }
  return ['limit', 'rate', RATE_PER_SECOND, 'burst', String(Math.min(MAX_BURST, syns)), 'packets']
}

function ruleStatement(table: string, hook: TraceHook, family: TraceFamily, rate: Statement): Statement {
  return [
    'add',
    'rule',
    'inet',
    tableArgument(table),
    hookArgument(hook),
    family,
    'daddr',
    '.',
    'meta',
    'l4proto',
    '.',
    'th',
    'dport',
    `@${SET_OF[family].set}`,
    ...OPENING,
    ...rate,
    'meta',
    'nftrace',
    'set',
    '1',
  ]
}

function elementsStatement(table: string, family: TraceFamily, tuples: readonly TraceTuple[]): Statement {
  const elements = tuples.flatMap((t, i) => {
    const address = ipArgument(t.address)
    if (familyOf(address) !== family)
      throw new Error(`refusing to build a kernel trace command: ${address} is not ${family}`)
    return [...(i > 0 ? [','] : []), address, '.', 'tcp', '.', portArgument(t.port)]
  })
  return ['add', 'element', 'inet', tableArgument(table), SET_OF[family].set, '{', ...elements, '}']
}

/** The commands, by what they do. Nothing else of this kind runs on a node. */
export const KERNEL_TRACE_COMMANDS = {
  listTables: (): KernelTraceCommand => ({
    purpose: 'list the nftables tables',
    argv: ['nft', 'list', 'tables'],
    changes: false,
  }),
  /**
   * The trace set up, one nft per part, each part one transaction (nft reads its arguments as one script, `;` between
   * statements, and commits all of it or nothing): first the table with its two base chains before every other, then per
   * address family the set of the probes' tuples (elements timing out), the rules that mark only them, and the tuples.
   * Parts, not one script: sudo refuses a sudoers regular expression longer than 1,024 characters (it then matches
   * nothing, and `visudo -c` says nothing), and a line allowing both families' script at once is longer than that.
   */
  setup: (table: string, tuples: readonly TraceTuple[]): KernelTraceCommand[] => {
    if (tuples.length === 0) throw new Error('refusing to build a kernel trace command: no tuple')
    const families = (['ip', 'ip6'] as const).filter((f) => tuples.some((t) => familyOf(ipArgument(t.address)) === f))
    const marking = families.map((f): KernelTraceCommand => {
      const ofFamily = tuples.filter((t) => familyOf(ipArgument(t.address)) === f)
      const rate = rateStatement(ofFamily)
      return {
        purpose: `mark only the opening packets of the probes' connections to ${ofFamily.length} ${f === 'ip' ? 'IPv4' : 'IPv6'} tuple(s) (rate-limited, set elements timing out after ${SET_TIMEOUT_SECONDS}s)`,
        argv: nftScript([
          setStatement(table, f),
          ...TRACE_HOOKS.map((h) => ruleStatement(table, h, f, rate)),
          elementsStatement(table, f, ofFamily),
        ]),
        changes: true,
      }
    })
    return [
      {
        purpose: "make the doctor's table: chains before every other at prerouting and output",
        argv: nftScript([tableStatement(table), ...TRACE_HOOKS.map((h) => chainStatement(table, h))]),
        changes: true,
      },
      ...marking,
    ]
  },
  monitor: (seconds: number): KernelTraceCommand => {
    if (!Number.isInteger(seconds) || seconds < 1 || seconds > MAX_MONITOR_SECONDS)
      throw new Error(`refusing to build a kernel trace command: monitor for ${JSON.stringify(seconds)}s`)
    return {
      purpose: `watch the trace events for at most ${seconds}s`,
      argv: ['timeout', String(seconds), 'nft', 'monitor', 'trace'],
      changes: false,
    }
  },
  deleteTable: (table: string): KernelTraceCommand => ({
    purpose: 'delete the doctor’s table',
    argv: ['nft', 'delete', 'table', 'inet', tableArgument(table)],
    changes: true,
  }),
} as const

/** One nft whose arguments are `statements` as one script; `--`: the chains' negative priority is not an option of nft's. */
function nftScript(statements: readonly Statement[]): string[] {
  return ['nft', '--', ...statements.flatMap((s, i) => (i > 0 ? [';', ...s] : s))]
}

function familyOf(address: string): TraceFamily {
  return ipFamily(address) === 6 ? 'ip6' : 'ip'
}

/**
 * The shell line of a command, every word quoted where a shell would read it; `sudo -n` before nft where the login is
 * not root (inside `timeout`, so that timeout ends sudo and sudo its nft, and no sudoers line allows `timeout`).
 */
export function kernelTraceLine(cmd: KernelTraceCommand, isRoot: boolean): CommandLine {
  const words = cmd.argv.map((w) => (/^[A-Za-z0-9_./:@%+=,-]+$/.test(w) ? w : quote(w)))
  const at = words.indexOf('nft')
  if (!isRoot) words.splice(at, 0, 'sudo', '-n')
  return words.join(' ') as CommandLine
}

/** The doctor's tables among `nft list tables` output ("table inet NAME" lines): name and creation time. */
export function doctorTables(listing: string): Array<{name: string; createdAt: number}> {
  const out: Array<{name: string; createdAt: number}> = []
  for (const line of listing.split('\n')) {
    const m = /^table inet (\S+)\s*$/.exec(line.trim())
    const createdAt = m ? traceTableCreatedAt(m[1]) : undefined
    if (m && createdAt !== undefined) out.push({name: m[1], createdAt})
  }
  return out
}

/**
 * A table older than this was left by a run that was killed: its elements have expired, and no live run keeps a table
 * longer than its monitor's bound (another run's young table on the same node is left alone).
 */
export const STALE_AFTER_SECONDS = SET_TIMEOUT_SECONDS + MAX_MONITOR_SECONDS

/** Tables of the doctor's older than STALE_AFTER_SECONDS. */
export function staleTables(listing: string, nowMs: number): string[] {
  return doctorTables(listing)
    .filter((t) => nowMs / 1000 - t.createdAt > STALE_AFTER_SECONDS)
    .map((t) => t.name)
}
