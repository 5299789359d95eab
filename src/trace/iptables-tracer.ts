import type {IptablesSave} from '../parse/iptables-save.js'
import type {ParsedRule, RuleOption} from '../parse/iptables-rule.js'
import type {IpsetState} from '../parse/ipset-save.js'
import {inCidr, isMulticast, parseIp} from '../net/address.js'
import {summarize, type Packet, type TraceOutcome, type TraceResult} from './types.js'
import {finish, isLocalAddress, MAX_BRANCHES, MAX_DEPTH, startState, walkHooks, withStep as addStep, type Branch, type WalkState as State} from './walk.js'

export interface TraceOptions {
  /** The node's own addresses: decide addrtype LOCAL and whether the packet is locally generated. */
  localAddresses: string[]
  ipsets?: IpsetState
  /** Force the locally generated (OUTPUT) path, whatever the source address. */
  locallyGenerated?: boolean
}

type MatchResult = boolean | {probability: number} | {unknown: string}

const PROTO_NUMBERS: Record<string, string> = {'6': 'tcp', '17': 'udp', '132': 'sctp'}

/** Walks one NEW packet through an iptables-save dump the way netfilter would, following every probabilistic branch. */
export class IptablesTracer {
  private local: Set<string>
  private branches = 0

  constructor(
    private readonly dump: IptablesSave,
    private readonly opts: TraceOptions,
  ) {
    this.local = new Set(opts.localAddresses)
  }

  trace(packet: Packet): TraceResult {
    this.branches = 0
    const done: TraceOutcome[] = []
    const localOrigin = this.opts.locallyGenerated || this.isLocal(packet.src)
    const runHook = (hook: string, live: State[]): State[] => {
      let current = live
      for (const table of HOOK_TABLES[hook]) {
        const chain = hook.toUpperCase()
        if (!this.dump.hasChain(table, chain)) continue
        const next: State[] = []
        for (const s of current) {
          for (const b of this.runChain(table, chain, s, 0, packet)) {
            if (b.end === 'ACCEPT' || b.end === 'RETURN') next.push(b.state)
            else done.push(finish(b.state, b.end, b.reason))
          }
        }
        current = next
      }
      return current
    }
    for (const s of walkHooks(localOrigin, (ip) => this.isLocal(ip), startState(packet), runHook)) done.push(finish(s, 'ACCEPT'))
    return summarize(done)
  }

  private isLocal(ip: string): boolean {
    return isLocalAddress(this.local, ip)
  }

  private runChain(table: string, chain: string, state: State, depth: number, packet: Packet): Branch[] {
    if (depth > MAX_DEPTH) return [{state, end: 'UNKNOWN', reason: `jumps nest deeper than ${MAX_DEPTH} chains at ${table}/${chain} (a loop?)`}]
    const rules = this.dump.rules(table, chain)
    return this.runFrom(table, chain, rules, 0, state, depth, packet)
  }

  private runFrom(table: string, chain: string, rules: ParsedRule[], from: number, state: State, depth: number, packet: Packet): Branch[] {
    for (let i = from; i < rules.length; i++) {
      const rule = rules[i]
      if (quickMiss(rule, state)) continue
      // A walk that meets -m recent is session-affine: later packets from this client may stick elsewhere.
      if (!state.sticky && rule.matches.some((m) => m.module === 'recent')) state = {...state, sticky: true}
      const m = this.matches(rule, state, packet)
      if (m === false) continue
      if (typeof m === 'object' && 'unknown' in m) return [{state: withStep(state, rule), end: 'UNKNOWN', reason: m.unknown}]
      if (typeof m === 'object' && 'probability' in m) {
        if (++this.branches > MAX_BRANCHES) return [{state, end: 'UNKNOWN', reason: `more than ${MAX_BRANCHES} probabilistic branches`}]
        const taken = {...state, probability: state.probability * m.probability}
        const skipped = {...state, probability: state.probability * (1 - m.probability)}
        const out = m.probability > 0 ? this.applyTarget(table, chain, rules, i, rule, taken, depth, packet) : []
        if (m.probability < 1) out.push(...this.runFrom(table, chain, rules, i + 1, skipped, depth, packet))
        return out
      }
      return this.applyTarget(table, chain, rules, i, rule, state, depth, packet)
    }
    const policy = this.dump.policy(table, chain)
    if (policy === 'DROP') return [{state, end: 'DROP'}]
    if (policy === 'ACCEPT') return [{state, end: 'ACCEPT'}]
    return [{state, end: 'RETURN'}]
  }

  private applyTarget(table: string, chain: string, rules: ParsedRule[], i: number, rule: ParsedRule, state: State, depth: number, packet: Packet): Branch[] {
    const s = withStep(state, rule)
    const target = rule.target
    if (!target) return this.runFrom(table, chain, rules, i + 1, s, depth, packet)
    switch (target) {
      case 'ACCEPT':
        return [{state: s, end: 'ACCEPT'}]
      case 'DROP':
        return [{state: s, end: 'DROP'}]
      case 'REJECT':
        return [{state: s, end: 'REJECT'}]
      case 'RETURN':
        return [{state: s, end: 'RETURN'}]
      case 'DNAT': {
        const to = rule.targetOptions.find((o) => o.name === '--to-destination')?.values[0]
        const parsed = to ? splitAddr(to) : undefined
        if (!parsed) return [{state: s, end: 'UNKNOWN', reason: `DNAT without a usable --to-destination: ${rule.text}`}]
        return [{state: {...s, dst: parsed.ip || s.dst, dport: parsed.port ?? s.dport, dnatted: true}, end: 'ACCEPT'}]
      }
      case 'MASQUERADE':
      case 'SNAT':
        return [{state: {...s, masquerade: true}, end: 'ACCEPT'}]
      case 'REDIRECT': {
        const port = rule.targetOptions.find((o) => o.name === '--to-ports')?.values[0]
        return [{state: {...s, dst: '127.0.0.1', dport: port ? Number(port.split('-')[0]) : s.dport, dnatted: true}, end: 'ACCEPT'}]
      }
      case 'MARK': {
        const mark = applyMark(s.mark, rule.targetOptions)
        if (mark === undefined) return [{state: s, end: 'UNKNOWN', reason: `MARK options not understood: ${rule.text}`}]
        return this.runFrom(table, chain, rules, i + 1, {...s, mark}, depth, packet)
      }
      case 'LOG':
      case 'NFLOG':
      case 'TRACE':
      case 'AUDIT':
      case 'CONNMARK':
      case 'CT':
      case 'NOTRACK':
      case 'CHECKSUM':
      case 'TCPMSS':
        return this.runFrom(table, chain, rules, i + 1, s, depth, packet)
    }
    if (!this.dump.hasChain(table, target)) return [{state: s, end: 'UNKNOWN', reason: `target ${target} is not a chain of table ${table} nor a target the tracer knows`}]
    const out: Branch[] = []
    for (const b of this.runChain(table, target, s, depth + 1, packet)) {
      if (b.end !== 'RETURN') out.push(b)
      else if (rule.isGoto) out.push(b)
      else out.push(...this.runFrom(table, chain, rules, i + 1, b.state, depth, packet))
    }
    return out
  }

  private matches(rule: ParsedRule, s: State, packet: Packet): MatchResult {
    let probability: number | undefined
    for (const m of rule.matches) {
      for (const o of m.options) {
        const r = this.option(m.module, o, s, packet, rule)
        if (typeof r === 'object' && 'unknown' in r) return r
        if (typeof r === 'object' && 'probability' in r) {
          probability = (probability ?? 1) * r.probability
          continue
        }
        if (r !== !o.negated) return false
      }
      if (m.module !== '' && !KNOWN_MODULES.has(m.module)) return {unknown: `match -m ${m.module} is not known to the tracer: ${rule.text}`}
    }
    return probability === undefined ? true : {probability}
  }

  /** true/false before negation is applied; probability for statistic (negation folded in). */
  private option(module: string, o: RuleOption, s: State, packet: Packet, rule: ParsedRule): MatchResult {
    const v = o.values[0] ?? ''
    const unknown = (what: string): MatchResult => ({unknown: `${what}: ${rule.text}`})
    switch (module) {
      case '':
        switch (o.name) {
          case 's':
            return inCidr(v, s.src)
          case 'd':
            return inCidr(v, s.dst)
          case 'p': {
            const p = PROTO_NUMBERS[v] ?? v.toLowerCase()
            return p === 'all' || p === '0' || p === packet.proto
          }
          case 'i':
            return s.inIface === undefined ? unknown(`the outcome depends on the input interface (${v}), unknown here`) : ifaceMatch(v, s.inIface)
          case 'o':
            return s.outIface === undefined ? unknown(`the outcome depends on the output interface (${v}), unknown here`) : ifaceMatch(v, s.outIface)
          case 'f':
            return false
        }
        return unknown(`option ${o.name}`)
      case 'tcp':
      case 'udp':
      case 'sctp':
        if (o.name === '--dport' || o.name === '--destination-port') return portIn(v, s.dport)
        if (o.name === '--sport' || o.name === '--source-port') return portIn(v, packet.sport)
        if (o.name === '--syn') return true
        if (o.name === '--tcp-flags') return tcpFlags(o.values)
        return unknown(`option ${o.name} of -m ${module}`)
      case 'multiport':
        if (o.name === '--dports' || o.name === '--destination-ports') return v.split(',').some((p) => portIn(p, s.dport))
        if (o.name === '--sports' || o.name === '--source-ports') return v.split(',').some((p) => portIn(p, packet.sport))
        if (o.name === '--ports') return v.split(',').some((p) => portIn(p, s.dport) || portIn(p, packet.sport))
        return unknown(`option ${o.name} of -m multiport`)
      case 'comment':
        return !o.negated
      case 'statistic':
        if (o.name === '--mode') return v === 'random' ? !o.negated : unknown('statistic mode other than random')
        if (o.name === '--probability') {
          const p = Number(v)
          if (!(p >= 0 && p <= 1)) return unknown(`probability ${v}`)
          return {probability: o.negated ? 1 - p : p}
        }
        return unknown(`option ${o.name} of -m statistic`)
      case 'recent':
        if (o.name === '--set') return !o.negated
        if (o.name === '--rcheck' || o.name === '--update') return false
        if (['--name', '--seconds', '--reap', '--rsource', '--rdest', '--mask', '--hitcount', '--rttl'].includes(o.name)) return !o.negated
        return unknown(`option ${o.name} of -m recent`)
      case 'conntrack':
      case 'state':
        if (o.name === '--ctstate' || o.name === '--state') return v.split(',').some((st) => (st === 'NEW' ? true : st === 'DNAT' ? s.dnatted : false))
        return unknown(`option ${o.name} of -m ${module}`)
      case 'addrtype':
        if (o.name === '--dst-type') return v.split(',').some((t) => addrType(t, s.dst, this.isLocal(s.dst)))
        if (o.name === '--src-type') return v.split(',').some((t) => addrType(t, s.src, this.isLocal(s.src)))
        if (o.name === '--limit-iface-in' || o.name === '--limit-iface-out') return !o.negated
        return unknown(`option ${o.name} of -m addrtype`)
      case 'mark': {
        if (o.name !== '--mark') return unknown(`option ${o.name} of -m mark`)
        const [value, mask] = v.split('/').map((x) => Number(x))
        const m = mask === undefined || Number.isNaN(mask) ? 0xffffffff : mask
        return (s.mark & m) >>> 0 === value >>> 0
      }
      case 'set': {
        if (o.name !== '--match-set') return unknown(`option ${o.name} of -m set`)
        if (!this.opts.ipsets) return unknown(`-m set --match-set ${v} needs the ipsets (--ipset-save)`)
        const r = this.opts.ipsets.matches(v, o.values[1] ?? '', {src: s.src, dst: s.dst, proto: packet.proto, dport: s.dport, sport: packet.sport})
        return r === undefined ? unknown(`ipset ${v} is missing from the ipset dump or of a type the tracer does not know`) : r
      }
      case 'icmp':
      case 'icmp6':
        return false
    }
    return unknown(`match -m ${module}`)
  }
}

const KNOWN_MODULES = new Set(['tcp', 'udp', 'sctp', 'multiport', 'comment', 'statistic', 'recent', 'conntrack', 'state', 'addrtype', 'mark', 'set', 'icmp', 'icmp6'])

/** Cheap test on the rule's -d before anything else: most of a huge KUBE-SERVICES chain is other Services' IPs. */
function quickMiss(rule: ParsedRule, s: State): boolean {
  const own = rule.matches[0]
  if (!own || own.module !== '') return false
  for (const o of own.options) {
    if (o.name === 'd' && !o.negated && o.values[0].endsWith('/32') && o.values[0].slice(0, -3) !== s.dst) return true
  }
  return false
}

function withStep(s: State, rule: ParsedRule): State {
  return addStep(s, {table: rule.table, chain: rule.chain, line: rule.line, rule: rule.text})
}

/** iptables tables in the order netfilter runs them at each hook. */
const HOOK_TABLES: Record<string, string[]> = {
  prerouting: ['raw', 'mangle', 'nat'],
  input: ['mangle', 'nat', 'filter'],
  forward: ['mangle', 'filter'],
  output: ['raw', 'mangle', 'nat', 'filter'],
  postrouting: ['mangle', 'nat'],
}

function ifaceMatch(pattern: string, iface: string): boolean {
  return pattern.endsWith('+') ? iface.startsWith(pattern.slice(0, -1)) : iface === pattern
}

function portIn(spec: string, port: number): boolean {
  const [lo, hi] = spec.split(':')
  const low = lo === '' ? 0 : Number(lo)
  const high = hi === undefined ? low : hi === '' ? 65535 : Number(hi)
  return port >= low && port <= high
}

function tcpFlags(values: string[]): boolean {
  const [mask, comp] = values
  const set = new Set(['SYN'])
  const maskFlags = mask === 'ALL' ? ['FIN', 'SYN', 'RST', 'PSH', 'ACK', 'URG'] : mask.split(',')
  const compFlags = comp === 'NONE' ? [] : comp === 'ALL' ? maskFlags : comp.split(',')
  return maskFlags.every((f) => set.has(f) === compFlags.includes(f))
}

function addrType(type: string, ip: string, local: boolean): boolean {
  const parsed = parseIp(ip)
  switch (type) {
    case 'LOCAL':
      return local
    case 'UNICAST':
      return !!parsed && !isMulticast(ip) && ip !== '255.255.255.255'
    case 'MULTICAST':
      return isMulticast(ip)
    case 'BROADCAST':
      return ip === '255.255.255.255'
    default:
      return false
  }
}

function applyMark(mark: number, options: RuleOption[]): number | undefined {
  for (const o of options) {
    const [a, b] = (o.values[0] ?? '').split('/')
    const value = Number(a) >>> 0
    const mask = b === undefined ? 0xffffffff : Number(b) >>> 0
    if (Number.isNaN(value) || Number.isNaN(mask)) return undefined
    switch (o.name) {
      case '--set-xmark':
        return ((mark & ~mask) ^ value) >>> 0
      case '--set-mark':
        return ((mark & ~mask) | value) >>> 0
      case '--or-mark':
        return (mark | value) >>> 0
      case '--and-mark':
        return (mark & value) >>> 0
      case '--xor-mark':
        return (mark ^ value) >>> 0
    }
  }
  return undefined
}

export function splitAddr(text: string): {ip: string; port?: number} | undefined {
  const v6 = /^\[([^\]]+)\](?::(\d+)(?:-\d+)?)?$/.exec(text)
  if (v6) return {ip: v6[1], port: v6[2] ? Number(v6[2]) : undefined}
  const m = /^([\d.]*)(?:-[\d.]+)?(?::(\d+)(?:-\d+)?)?$/.exec(text)
  if (!m) return undefined
  return {ip: m[1], port: m[2] ? Number(m[2]) : undefined}
}
