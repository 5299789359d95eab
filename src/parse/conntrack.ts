import {ParseError} from './parse-error.js'
import {canonicalIp, parseIp} from '../net/address.js'

/** One direction of a conntrack entry: addresses always, ports for TCP/UDP/SCTP/DCCP. */
interface ConntrackTuple {
  src: string
  dst: string
  sport?: number
  dport?: number
}

/** One line of `conntrack -L` (default or `-o extended` output). */
export interface ConntrackEntry {
  protocol: string
  protocolNumber: number
  /** Seconds until the entry expires. */
  timeout: number
  /** TCP state (ESTABLISHED, SYN_SENT, TIME_WAIT...); undefined for stateless protocols. */
  state?: string
  original: ConntrackTuple
  reply: ConntrackTuple
  /** Bracketed status words: UNREPLIED, ASSURED, OFFLOAD... */
  flags: string[]
  mark?: number
  /** Where the original destination was DNATed to (the reply's source), when it differs from the original destination. */
  dnatTarget?: {address: string; port?: number}
  line: number
  text: string
}

const SUMMARY = /^conntrack v[\d.]+ \(conntrack-tools\): \d+ flow entries have been shown\.$/
const FAMILY = /^(ipv4|ipv6)$/
const TUPLE_KEYS = ['src', 'dst', 'sport', 'dport'] as const

/** Parses `conntrack -L [-p PROTO] [-d ADDR]` output; the trailing "N flow entries have been shown." line is skipped. */
export function parseConntrackList(text: string): ConntrackEntry[] {
  const entries: ConntrackEntry[] = []
  for (const [i, raw] of text.split('\n').entries()) {
    const line = raw.trim()
    if (line === '' || SUMMARY.test(line)) continue
    entries.push(parseEntry(line, i + 1))
  }
  return entries
}

function parseEntry(text: string, lineNo: number): ConntrackEntry {
  const fail = (reason: string): never => {
    throw new ParseError(lineNo, `${reason}: ${text.slice(0, 200)}`, {what: 'conntrack output'})
  }
  const words = text.split(/\s+/)
  // `-o extended` prefixes the layer-3 family and its number.
  if (FAMILY.test(words[0])) words.splice(0, 2)
  const [protocol, protoNumText, timeoutText] = words
  const protocolNumber = Number(protoNumText)
  const timeout = Number(timeoutText)
  if (!/^[a-z0-9-]+$/.test(protocol ?? '') || !Number.isInteger(protocolNumber) || !Number.isInteger(timeout))
    fail('not "PROTOCOL NUMBER TIMEOUT ..."')
  let state: string | undefined
  const tuples: Partial<Record<(typeof TUPLE_KEYS)[number], string>>[] = []
  const flags: string[] = []
  let mark: number | undefined
  for (const word of words.slice(3)) {
    const bracket = /^\[([A-Z_]+)\]$/.exec(word)
    if (bracket) {
      flags.push(bracket[1])
      continue
    }
    const eq = word.indexOf('=')
    if (eq < 0) {
      if (tuples.length === 0 && state === undefined && /^[A-Z_]+$/.test(word)) state = word
      else fail(`unexpected word "${word}"`)
      continue
    }
    const key = word.slice(0, eq)
    const value = word.slice(eq + 1)
    if (key === 'src') tuples.push({})
    if ((TUPLE_KEYS as readonly string[]).includes(key)) {
      const current = tuples.at(-1)
      if (!current) fail(`"${key}=" before any src=`)
      else if (current[key as (typeof TUPLE_KEYS)[number]] === undefined)
        current[key as (typeof TUPLE_KEYS)[number]] = value
    } else if (key === 'mark') mark = Number(value)
    // Other key=value words (type, code, id for ICMP, zone, use, secctx, labels) are not needed.
  }
  if (tuples.length !== 2) fail(`expected an original and a reply tuple, found ${tuples.length}`)
  const original = tuple(tuples[0], fail)
  const reply = tuple(tuples[1], fail)
  const dnatChanged = reply.src !== original.dst || (reply.sport !== undefined && reply.sport !== original.dport)
  return {
    protocol,
    protocolNumber,
    timeout,
    ...(state !== undefined ? {state} : {}),
    original,
    reply,
    flags,
    ...(mark !== undefined && Number.isFinite(mark) ? {mark} : {}),
    ...(dnatChanged
      ? {dnatTarget: {address: reply.src, ...(reply.sport !== undefined ? {port: reply.sport} : {})}}
      : {}),
    line: lineNo,
    text,
  }
}

function tuple(
  t: Partial<Record<(typeof TUPLE_KEYS)[number], string>>,
  fail: (reason: string) => never,
): ConntrackTuple {
  if (!t.src || !parseIp(t.src)) fail(`bad src address "${t.src ?? ''}"`)
  if (!t.dst || !parseIp(t.dst)) fail(`bad dst address "${t.dst ?? ''}"`)
  const port = (name: string, v: string | undefined) => {
    if (v === undefined) return undefined
    const n = Number(v)
    if (!/^\d+$/.test(v) || n > 65535) fail(`bad ${name} "${v}"`)
    return n
  }
  const sport = port('sport', t.sport)
  const dport = port('dport', t.dport)
  return {
    src: canonicalIp(t.src!),
    dst: canonicalIp(t.dst!),
    ...(sport !== undefined ? {sport} : {}),
    ...(dport !== undefined ? {dport} : {}),
  }
}
