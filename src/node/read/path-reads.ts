import type {ConntrackEntry} from '../../parse/conntrack.js'
import {routeGetFailure, type Route} from '../../parse/ip-route.js'
import type {SysctlValues} from '../../parse/sysctl.js'
import {CONNTRACK_PROTOCOLS, type ConntrackProtocol} from './command-arguments.js'
import {NODE_READS as reads} from './node-reads.js'
import {toolMissing} from '../node-commands.js'

/** One command's raw outcome, as recorded in a bundle (path-reads.json); `notRead` when it could not be run at all. */
export interface RawCommandOutput {
  code: number | null
  stdout: string
  stderr: string
  notRead?: string
}

/** The packet-path reads of one node, raw: what collect writes and what a snapshot reads back. */
export interface RawPathReads {
  sysctls?: RawCommandOutput
  routeTable?: RawCommandOutput
  /** `ip -6 route show`, where the Service has IPv6 addresses (absent from bundles recorded before it was read). */
  routeTable6?: RawCommandOutput
  routeGet: Array<{address: string} & RawCommandOutput>
  conntrack: Array<{protocol: string; address: string} & RawCommandOutput>
  /** Lookups left out (over the per-node cap), said so that nothing is silently unchecked. */
  skipped?: string[]
}

/** One read's outcome: its parsed value, or why it was not read (tool missing, command failed, output unparsable). */
type NodeRead<T> = {status: 'read'; value: T} | {status: 'not-read'; reason: string}

/** `ip route get ADDR`: the route the kernel picks, or the kind of route that refuses the address. */
export type RouteAnswer =
  | {kind: 'route'; route: Route}
  | {kind: 'no-route'; type: 'none' | 'unreachable' | 'blackhole' | 'prohibit'; message: string}

interface RouteLookup {
  address: string
  result: NodeRead<RouteAnswer>
}

interface ConntrackRead {
  protocol: ConntrackProtocol
  /** The original destination asked for (a ClusterIP of the Service). */
  address: string
  result: NodeRead<ConntrackEntry[]>
}

/** What the packet-path reads of one node say, parsed; each failed read stays a failure of that read alone. */
export interface PathObservation {
  sysctls?: NodeRead<SysctlValues>
  routeTable?: NodeRead<Route[]>
  routeTable6?: NodeRead<Route[]>
  routeLookups: RouteLookup[]
  conntrack: ConntrackRead[]
  skipped: string[]
}

const firstLine = (text: string) => text.trim().split('\n')[0] || 'no message'

/**
 * Why a command that did not answer was not read, in its own words: not available on the node (the shell's 127, or
 * sudo's "command not found"), or its exit status; with the first line of its stderr. Every read says it so.
 */
export function notReadReason(what: string, raw: {code: number | null; stderr: string}): string {
  return toolMissing(raw)
    ? `${what}: not available on the node (${firstLine(raw.stderr)})`
    : `${what}: exited ${raw.code ?? 'on a signal'}: ${firstLine(raw.stderr)}`
}

function interpret<T>(raw: RawCommandOutput, what: string, parse: (r: RawCommandOutput) => T): NodeRead<T> {
  if (raw.notRead !== undefined) return {status: 'not-read', reason: `${what}: ${raw.notRead}`}
  if (toolMissing(raw)) return {status: 'not-read', reason: notReadReason(what, raw)}
  try {
    return {status: 'read', value: parse(raw)}
  } catch (e) {
    return {status: 'not-read', reason: `${what}: ${(e as Error).message}`}
  }
}

function requireSuccess(raw: RawCommandOutput): void {
  if (raw.code !== 0) throw new Error(`exited ${raw.code ?? 'on a signal'}: ${firstLine(raw.stderr)}`)
}

const isConntrackProtocol = (p: string): p is ConntrackProtocol =>
  (CONNTRACK_PROTOCOLS as readonly string[]).includes(p)

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

/** A command's outcome in the shape this tool records it (a bundle's path-reads.json is only as typed as its file). */
function isRawOutput(v: unknown): v is RawCommandOutput {
  if (!isRecord(v)) return false
  if (typeof v.notRead === 'string') return true
  return (v.code === null || typeof v.code === 'number') && typeof v.stdout === 'string' && typeof v.stderr === 'string'
}

/** Entries of `list` in the recorded shape; each other one is said as left out, never a crash of the whole run. */
function wellFormed<T extends RawCommandOutput>(list: unknown[], what: string, keys: string[], skipped: string[]): T[] {
  const out: T[] = []
  list.forEach((entry, i) => {
    if (isRawOutput(entry) && keys.every((k) => typeof (entry as unknown as Record<string, unknown>)[k] === 'string'))
      out.push(entry as T)
    else skipped.push(`${what} ${i + 1} of path-reads.json is not a recorded command's output`)
  })
  return out
}

/** Parses the raw path reads (as recorded: anything of another shape is said as not read). */
export function interpretPathReads(raw: RawPathReads): PathObservation {
  const skipped = Array.isArray(raw.skipped) ? raw.skipped.filter((s) => typeof s === 'string') : []
  const out: PathObservation = {routeLookups: [], conntrack: [], skipped}
  const malformed = (what: string) => ({
    status: 'not-read' as const,
    reason: `${what}: path-reads.json holds no output for it`,
  })
  // sysctl exits 1 when one key is missing and still prints the others; the missing ones are said on stderr.
  if (raw.sysctls !== undefined)
    out.sysctls = !isRawOutput(raw.sysctls)
      ? malformed('sysctl')
      : interpret(raw.sysctls, 'sysctl', (r) =>
          reads.pathSysctls.parse(`${r.stdout}\n${r.stderr.replace(/^(?!sysctl: cannot stat).*$/gm, '')}`),
        )
  const table = (read: typeof reads.routeTable | typeof reads.routeTable6) => (r: RawCommandOutput) => {
    requireSuccess(r)
    return read.parse(r.stdout)
  }
  if (raw.routeTable !== undefined)
    out.routeTable = isRawOutput(raw.routeTable)
      ? interpret(raw.routeTable, 'ip route show', table(reads.routeTable))
      : malformed('ip route show')
  if (raw.routeTable6 !== undefined)
    out.routeTable6 = isRawOutput(raw.routeTable6)
      ? interpret(raw.routeTable6, 'ip -6 route show', table(reads.routeTable6))
      : malformed('ip -6 route show')
  const routeGet = wellFormed<RawPathReads['routeGet'][number]>(raw.routeGet, 'route lookup', ['address'], skipped)
  const conntrack = wellFormed<RawPathReads['conntrack'][number]>(
    raw.conntrack,
    'conntrack read',
    ['protocol', 'address'],
    skipped,
  )
  out.routeLookups = routeGet.map(({address, ...r}) => ({
    address,
    result: interpret<RouteAnswer>(r, `ip route get ${address}`, (res) => {
      if (res.code === 0) return {kind: 'route', route: reads.routeGet.parse(res.stdout)}
      const refused = routeGetFailure(res.stderr)
      if (refused) return {kind: 'no-route', ...refused}
      requireSuccess(res)
      throw new Error('no route in the output')
    }),
  }))
  out.conntrack = conntrack.flatMap(({protocol, address, ...r}) =>
    isConntrackProtocol(protocol)
      ? [
          {
            protocol,
            address,
            result: interpret(r, `conntrack -L -p ${protocol} -d ${address}`, (res) => {
              requireSuccess(res)
              return reads.conntrackList.parse(res.stdout)
            }),
          },
        ]
      : [],
  )
  return out
}
