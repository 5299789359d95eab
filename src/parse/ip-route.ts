import {ParseError} from './parse-error.js'
import {canonicalIp, parseCidr, parseIp} from '../net/address.js'

interface Nexthop {
  via?: string
  dev?: string
  weight?: number
}

/** One route, from `ip route show` / `ip -o route get`. */
export interface Route {
  /** unicast, local, broadcast, multicast, unreachable, blackhole, prohibit, throw, nat, anycast. */
  type: string
  /** "default", a CIDR, or an address (a host route, or the address `ip route get` asked about). */
  destination: string
  via?: string
  dev?: string
  src?: string
  proto?: string
  scope?: string
  table?: string
  metric?: number
  /** Bare words: onlink, linkdown, dead, pervasive, notify... */
  flags: string[]
  /** Multipath routes: one entry per `nexthop` line. */
  nexthops: Nexthop[]
  line: number
  text: string
}

/** Route errors name their input: "ip route output line 3: …". */
const ROUTE_OUTPUT = {what: 'ip route output'}

const TYPES = new Set([
  'unicast',
  'local',
  'broadcast',
  'multicast',
  'unreachable',
  'blackhole',
  'prohibit',
  'throw',
  'nat',
  'anycast',
])
/** Keys followed by one value word. */
const VALUE_KEYS = new Set([
  'via',
  'dev',
  'src',
  'proto',
  'scope',
  'table',
  'metric',
  'from',
  'uid',
  'mark',
  'tos',
  'pref',
  'mtu',
  'advmss',
  'expires',
  'error',
  'realm',
  'realms',
  'iif',
  'oif',
  'hoplimit',
  'initcwnd',
  'initrwnd',
  'weight',
  'nhid',
  'rtt',
  'rttvar',
  'window',
  'quickack',
  'congctl',
  'features',
  'ssthresh',
  'cwnd',
  'reordering',
  'fastopen_no_cookie',
  'ipid',
  'encap',
  'as',
])
const FLAG_WORDS = new Set([
  'onlink',
  'linkdown',
  'dead',
  'pervasive',
  'notify',
  'offload',
  'trap',
  'rt_offload',
  'rt_trap',
  'lock',
  'cache',
  'cloned',
  'redirected',
  'unresolved',
])

/** `ip route show` (any table, IPv4 or IPv6): one route per line, multipath `nexthop` lines folded into the route above. */
export function parseRouteTable(text: string): Route[] {
  const routes: Route[] = []
  for (const [i, raw] of text.split('\n').entries()) {
    if (raw.trim() === '') continue
    const lineNo = i + 1
    const words = raw.trim().split(/\s+/)
    if (words[0] === 'nexthop') {
      const owner = routes.at(-1)
      if (!owner) throw new ParseError(lineNo, 'a nexthop line before any route', ROUTE_OUTPUT)
      owner.nexthops.push(nexthop(words.slice(1), lineNo))
      continue
    }
    routes.push(parseRouteWords(words, lineNo, raw.trim()))
  }
  return routes
}

/** `ip -o route get ADDR`: the route the kernel would use. The one-line form splits cache details off with a backslash. */
export function parseRouteGet(text: string): Route {
  const lines = text.split('\n').filter((l) => l.trim() !== '')
  if (lines.length === 0) throw new ParseError(1, 'empty output', ROUTE_OUTPUT)
  const first = lines[0].split('\\')[0].trim()
  return parseRouteWords(first.split(/\s+/), 1, first)
}

/** What a failed `ip route get` says on stderr, as a route type: the kernel refuses to resolve these routes. */
export function routeGetFailure(
  stderr: string,
): {type: 'none' | 'unreachable' | 'blackhole' | 'prohibit'; message: string} | undefined {
  const message = stderr
    .split('\n')
    .map((l) => l.trim())
    .find((l) => l.startsWith('RTNETLINK answers:'))
  if (!message) return undefined
  const reason = message.slice('RTNETLINK answers:'.length).trim()
  // Measured on Linux 6.x: no matching route -> ENETUNREACH, `unreachable` -> EHOSTUNREACH, `blackhole` -> EINVAL, `prohibit` -> EACCES.
  const type = (
    {
      'Network is unreachable': 'none',
      'No route to host': 'unreachable',
      'Invalid argument': 'blackhole',
      'Permission denied': 'prohibit',
    } as const
  )[reason]
  return type ? {type, message} : undefined
}

function parseRouteWords(words: string[], lineNo: number, text: string): Route {
  let type = 'unicast'
  let at = 0
  if (TYPES.has(words[0])) type = words[at++]
  const destination = words[at++]
  if (!destination || !(destination === 'default' || parseCidr(destination)))
    throw new ParseError(lineNo, `"${destination ?? ''}" is not a destination: ${text.slice(0, 200)}`, ROUTE_OUTPUT)
  const route: Route = {
    type,
    destination: canonicalDestination(destination),
    flags: [],
    nexthops: [],
    line: lineNo,
    text,
  }
  while (at < words.length) {
    const word = words[at++]
    if (VALUE_KEYS.has(word)) {
      const value = words[at++]
      if (value === undefined)
        throw new ParseError(lineNo, `"${word}" without a value: ${text.slice(0, 200)}`, ROUTE_OUTPUT)
      if (word === 'via') {
        // `via inet6 ADDR` names the family first.
        const addr = value === 'inet' || value === 'inet6' ? words[at++] : value
        if (!addr || !parseIp(addr)) throw new ParseError(lineNo, `bad gateway "${addr ?? ''}"`, ROUTE_OUTPUT)
        route.via = canonicalIp(addr)
      } else if (word === 'src') {
        if (!parseIp(value)) throw new ParseError(lineNo, `bad source address "${value}"`, ROUTE_OUTPUT)
        route.src = canonicalIp(value)
      } else if (word === 'metric') route.metric = Number(value)
      else if (word === 'dev' || word === 'proto' || word === 'scope' || word === 'table') route[word] = value
    } else if (word === 'nexthop') {
      // One-line multipath form: the rest of the line is `nexthop ... nexthop ...`.
      for (const group of words
        .slice(at)
        .join(' ')
        .split(/\bnexthop\b/))
        if (group.trim()) route.nexthops.push(nexthop(group.trim().split(/\s+/), lineNo))
      break
    } else if (FLAG_WORDS.has(word) || /^<.*>$/.test(word)) {
      if (FLAG_WORDS.has(word)) route.flags.push(word)
    } else throw new ParseError(lineNo, `unexpected word "${word}": ${text.slice(0, 200)}`, ROUTE_OUTPUT)
  }
  return route
}

function nexthop(words: string[], lineNo: number): Nexthop {
  const hop: Nexthop = {}
  for (let at = 0; at < words.length; at++) {
    const word = words[at]
    if (word === 'via') {
      const addr = words[at + 1] === 'inet' || words[at + 1] === 'inet6' ? words[(at += 2)] : words[++at]
      if (!addr || !parseIp(addr)) throw new ParseError(lineNo, `bad nexthop gateway "${addr ?? ''}"`, ROUTE_OUTPUT)
      hop.via = canonicalIp(addr)
    } else if (word === 'dev') hop.dev = words[++at]
    else if (word === 'weight') hop.weight = Number(words[++at])
  }
  return hop
}

function canonicalDestination(text: string): string {
  if (text === 'default') return text
  const slash = text.indexOf('/')
  return slash < 0 ? canonicalIp(text) : `${canonicalIp(text.slice(0, slash))}${text.slice(slash)}`
}
