import type {IptablesSave, LeadingDestinations} from '../parse/iptables-save.js'
import {leadingDestination, type ParsedRule, type RuleOption} from '../parse/iptables-rule.js'
import type {IpsetState} from '../parse/ipset-save.js'
import {cidrContains, familyOf, isMulticast, parseCidr, parseIp} from '../net/address.js'
import {summarize, type Packet, type RouteGuess, type TraceResult, type TraceStep} from './types.js'
import {
  changed,
  finish,
  interfaceMatches,
  hookChainOf,
  isLocalAddress,
  startState,
  missingHookChain,
  SourceFreeWalks,
  traceHooks,
  withStep as addStep,
  type HookChain,
  type ChainEnd,
  type ChainSource,
  type RuleOutcome,
  type WalkState as State,
} from './walk.js'
import {missingBaseChain, missingTarget} from './iptables-fragment.js'

const NEXT = {kind: 'next'} as const

export interface TraceOptions {
  /** The node's own addresses: decide addrtype LOCAL and whether the packet is locally generated. */
  localAddresses: string[]
  ipsets?: IpsetState
  /** Force the locally generated (OUTPUT) path, whatever the source address. */
  locallyGenerated?: boolean
  /** The node's routing decision for a forwarded packet (after DNAT), where the packet does not name its output interface. */
  route?: (dst: string) => RouteGuess
  /** The node's bridges (bridge-netfilter on): a packet in on one of them passes `-m physdev --physdev-is-in`. */
  bridges?: string[]
}

type MatchResult = boolean | {probability: number} | {unknown: string}

const PROTO_NUMBERS: Record<string, string> = {'6': 'tcp', '17': 'udp', '132': 'sctp'}

/** Walks one NEW packet through an iptables-save dump the way netfilter would, following every probabilistic branch. */
interface Chain {
  table: string
  name: string
  rules: ParsedRule[]
  facts: RuleFacts
}

/**
 * What is learnt of a chain's rules once, shared by every trace of the same dump (a scan traces it per Service). Kept
 * on the chain's rules array (see FACTS), so it goes when the dump forgets the chain.
 */
interface RuleFacts {
  /** Per rule, once asked: the /32 destination its text opens with (leadingQuickDestination), null for none. */
  lead: Array<string | null | undefined>
  /** Per rule, once asked: the /32 destinations its quick test compares (quickDestinations). */
  quick: Array<QuickDestinations | undefined>
  /** For a long chain, once walked: its rules by the /32 destination they open with (see skipTo). */
  byLead?: LeadIndex
  /** Per rule, once a walk takes it: its step, shared by every walk that passes it (a scan passes each rule once per Service and node). */
  steps: Array<TraceStep | undefined>
  /** Per rule, once asked: whether it has a -m recent match (a walk that meets one is session-affine). */
  recent: Array<boolean | undefined>
  /** Per rule, once evaluated: its options as tests, in rule order (compileMatches). */
  tests: Array<OptionTest[] | undefined>
  /** Per DNAT rule, once taken: where it sends (dnatTarget), null when that is not usable. */
  dnat: Array<{ip: string; port?: number} | null | undefined>
}

/**
 * A long chain's rules by the -d they open with, as the dump indexes them (rulesByLeadingDestination), and those a
 * walk cannot pass by that -d alone (none, or one that is not "-d ADDRESS/32": leadingQuickDestination), in rule order.
 */
interface LeadIndex {
  shared: LeadingDestinations
  other: number[]
  /** Per destination asked for: the rules that open with "-d DESTINATION/32" (undefined: none). */
  own: Map<string, number[] | undefined>
}

/** Chains from this many rules are indexed by leading destination (KUBE-SERVICES of a big cluster). */
const INDEXED_FROM = 64

/**
 * The facts of a chain, as a property of its rules array rather than in a WeakMap: V8's young-generation collector
 * treats a WeakMap's values as live, so per-Service facts in one were carried into the old generation by every
 * collection of a scan (thousands of Services, each with its own chains) and only freed by full collections.
 */
const FACTS = Symbol('iptables tracer facts')
type RulesWithFacts = ParsedRule[] & {[FACTS]?: RuleFacts}

type Outcome = RuleOutcome<Chain>

/** Walks one NEW packet through an iptables-save dump the way netfilter would, following every probabilistic branch. */
export class IptablesTracer implements ChainSource<Chain> {
  private local: Set<string>
  private packet!: Packet
  /** The dump's chains as this tracer and the others of the dump, made since the dump last forgot, look them up. */
  private readonly chains: Map<string, Map<string, Chain | null>>
  private passedState: State | undefined
  private passedOutcome: Outcome[] = []
  private readonly localCache = new Map<string, boolean>()
  /** Per hook: the base chains of that hook's tables the dump has, in netfilter's order. */
  private readonly byHook = new Map<string, HookChain[]>()
  /** The walks that never read the packet's source (the tests that read it say so: sourceOf, sourcePortOf). */
  private readonly sourceFree = new SourceFreeWalks()

  constructor(
    private readonly dump: IptablesSave,
    private readonly opts: TraceOptions,
  ) {
    this.local = new Set(opts.localAddresses)
    this.chains = sharedChains(dump).byTable
  }

  trace(packet: Packet): TraceResult {
    this.prepare(packet)
    const packetFamily = familyOf(packet.dst)
    const dumpFamily = this.dump.addressFamily()
    if (packetFamily !== undefined && dumpFamily !== undefined && packetFamily !== dumpFamily) {
      const reason = `the packet is IPv${packetFamily} but the dump's rules are IPv${dumpFamily}: give the ${packetFamily === 6 ? 'ip6tables-save' : 'iptables-save'} output for this packet`
      return summarize([finish(startState(packet), 'UNKNOWN', reason)])
    }
    const localOrigin = this.opts.locallyGenerated || this.isLocal(packet.src)
    return this.sourceFree.walk(packet, localOrigin, () =>
      traceHooks(
        packet,
        localOrigin,
        (ip) => this.isLocal(ip),
        (hook) => this.hookChains(hook),
        this.opts.route,
      ),
    )
  }

  sourceOf(s: State): string {
    this.sourceFree.sourceRead = true
    return s.src
  }

  sourcePortOf(packet: Packet): number {
    this.sourceFree.sourceRead = true
    return packet.sport
  }

  /** Sets the packet the rules are evaluated for: before walking any of this dump's chains (a cross walk's too). */
  prepare(packet: Packet): void {
    this.packet = packet
  }

  ruleCount(chain: Chain): number {
    return chain.rules.length
  }

  /**
   * The next rule at or after `from` that may match: in a long chain, rules that open with another address's
   * "-d ADDRESS/32" are skipped without a look (evaluate would pass each of them, as its first test).
   */
  skipTo(chain: Chain, from: number, state: State): number {
    if (chain.rules.length < INDEXED_FROM) return from
    const index = (chain.facts.byLead ??= this.leadIndex(chain))
    let own = index.own.get(state.dst)
    if (own === undefined && !index.own.has(state.dst)) {
      const lead = `${state.dst}/32`
      own = isQuickLead(lead) ? index.shared.ledBy(lead) : undefined
      index.own.set(state.dst, own)
    }
    return Math.min(
      firstAtOrAfter(index.other, from, chain.rules.length),
      own ? firstAtOrAfter(own, from, chain.rules.length) : chain.rules.length,
    )
  }

  private leadIndex(chain: Chain): LeadIndex {
    const shared = this.dump.rulesByLeadingDestination(chain.table, chain.name)
    const notQuick: number[] = []
    shared.leads.forEach((lead, i) => {
      if (lead !== undefined && !isQuickLead(lead)) notQuick.push(i)
    })
    const other = notQuick.length === 0 ? shared.unled : [...shared.unled, ...notQuick].sort((a, b) => a - b)
    return {shared, other, own: new Map()}
  }

  chainName(chain: Chain): string {
    return `${chain.table}/${chain.name}`
  }

  describe(chain: Chain, index: number): string {
    const rule = chain.rules[index]
    return rule ? `${chain.table}/${chain.name} line ${rule.line}` : `${chain.table}/${chain.name}`
  }

  openEnd(chain: Chain): string | undefined {
    return this.dump.openEnd(chain.table, chain.name)
  }

  fallOff(chain: Chain): ChainEnd {
    const policy = this.dump.policy(chain.table, chain.name)
    if (policy === 'DROP') return 'DROP'
    if (policy === 'ACCEPT') return 'ACCEPT'
    return 'RETURN'
  }

  evaluate(chain: Chain, index: number, input: State): Outcome[] {
    const rule = chain.rules[index]
    let state = input
    if (rule.unparsable !== undefined)
      return [
        {
          state: withStep(state, chain, index),
          action: {kind: 'end', end: 'UNKNOWN', reason: `rule not understood (${rule.unparsable}): ${rule.text}`},
        },
      ]
    // Most of a huge KUBE-SERVICES chain opens with another Service's -d: seen in the text, without parsing the rule.
    let lead = chain.facts.lead[index]
    if (lead === undefined) lead = chain.facts.lead[index] = leadingQuickDestination(rule.text)
    if (lead !== null && lead !== state.dst) return this.passed(state)
    let quick = chain.facts.quick[index]
    if (quick === undefined) quick = chain.facts.quick[index] = quickDestinations(rule)
    if (quick !== null && quickMiss(quick, state.dst)) return this.passed(state)
    // A walk that meets -m recent is session-affine: later packets from this client may stick elsewhere.
    if (!state.sticky && (chain.facts.recent[index] ??= rule.matches.some((m) => m.module === 'recent')))
      state = changed(state, {sticky: true})
    let tests = chain.facts.tests[index]
    if (tests === undefined) tests = chain.facts.tests[index] = compileMatches(rule)
    const m = this.matches(tests, state, this.packet)
    if (m === false) return this.passed(state)
    if (typeof m === 'object' && 'unknown' in m)
      return [{state: withStep(state, chain, index), action: {kind: 'end', end: 'UNKNOWN', reason: m.unknown}}]
    if (typeof m === 'object' && 'probability' in m) {
      const out: Outcome[] = []
      if (m.probability > 0)
        out.push(this.applyTarget(chain, index, changed(state, {probability: state.probability * m.probability})))
      if (m.probability < 1)
        out.push({state: changed(state, {probability: state.probability * (1 - m.probability)}), action: NEXT})
      return out
    }
    return [this.applyTarget(chain, index, state)]
  }

  /** The outcome of a rule the state passes unchanged: one per state, shared by the run of rules it passes (the walker only reads it). */
  private passed(state: State): Outcome[] {
    if (this.passedState !== state) {
      this.passedState = state
      this.passedOutcome = [{state, action: NEXT}]
    }
    return this.passedOutcome
  }

  get ipsets(): IpsetState | undefined {
    return this.opts.ipsets
  }

  get bridges(): string[] | undefined {
    return this.opts.bridges
  }

  isLocal(ip: string): boolean {
    let local = this.localCache.get(ip)
    if (local === undefined) this.localCache.set(ip, (local = isLocalAddress(this.local, ip)))
    return local
  }

  /**
   * The base chains of one hook of the tables the dump has, in netfilter's order, each with the priority its table
   * registers at (iptables-nft's and iptables-legacy's alike: raw -300, mangle -150, nat -100 or 100, filter 0).
   */
  hookChains(hook: string): HookChain[] {
    let chains = this.byHook.get(hook)
    if (!chains) {
      const plans = sharedChains(this.dump).plans
      let plan = plans.get(hook)
      if (!plan) plans.set(hook, (plan = hookPlan(this.dump, hook)))
      this.byHook.set(
        hook,
        (chains = plan.map((p) =>
          p.missing !== undefined
            ? missingHookChain(p.priority, p.missing)
            : hookChainOf(this, this.chain(p.table, p.name, p.chain)!, p.priority, p.table === 'nat', policyName),
        )),
      )
    }
    return chains
  }

  /**
   * The table's chain of that name, null when the dump has none; looked up once per dump until it forgets (`known`:
   * a base chain as the dump's hook plan holds it).
   */
  private chain(table: string, name: string, known?: Chain): Chain | null {
    let byName = this.chains.get(table)
    if (!byName) this.chains.set(table, (byName = new Map()))
    let c = byName.get(name)
    if (c === undefined) byName.set(name, (c = known ?? chainOf(this.dump, table, name)))
    return c
  }

  private applyTarget(chain: Chain, index: number, state: State): Outcome {
    const rule = chain.rules[index]
    // A fresh copy, this rule's own: what the target changes is written to it.
    const s = withStep(state, chain, index)
    const target = rule.target
    if (!target) return {state: s, action: NEXT}
    switch (target) {
      case 'ACCEPT':
      case 'DROP':
      case 'REJECT':
        return ended(s, target)
      case 'RETURN':
        return {state: s, action: {kind: 'return'}}
      case 'DNAT': {
        let to = chain.facts.dnat[index]
        if (to === undefined) to = chain.facts.dnat[index] = dnatTarget(rule)
        if (to === null) return unknownEnd(s, `DNAT without a usable --to-destination: ${rule.text}`)
        s.dst = to.ip || s.dst
        s.dport = to.port ?? s.dport
        s.dnatted = true
        return ended(s, 'ACCEPT')
      }
      case 'MASQUERADE':
      case 'SNAT':
        s.masquerade = true
        return ended(s, 'ACCEPT')
      case 'REDIRECT': {
        const port = rule.targetOptions.find((o) => o.name === '--to-ports')?.values[0]
        const first = port === undefined ? s.dport : parsePort(port.split('-')[0])
        if (first === undefined) return unknownEnd(s, `REDIRECT --to-ports not understood: ${rule.text}`)
        s.dst = '127.0.0.1'
        s.dport = first
        s.dnatted = true
        return ended(s, 'ACCEPT')
      }
      case 'MARK': {
        const mark = applyMark(s.mark, rule.targetOptions)
        if (mark === undefined) return unknownEnd(s, `MARK options not understood: ${rule.text}`)
        s.mark = mark
        return {state: s, action: NEXT}
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
        return {state: s, action: NEXT}
    }
    // Not kept with the rule: a scan's shared KUBE-SERVICES would hold every Service's chains (see forgetOneOffChains).
    const next = this.chain(chain.table, target)
    if (next === null) return unknownEnd(s, missingTarget(this.dump, chain.table, target))
    return {state: s, action: {kind: rule.isGoto ? 'goto' : 'jump', chain: next}}
  }

  private matches(tests: OptionTest[], s: State, packet: Packet): MatchResult {
    let probability: number | undefined
    for (const t of tests) {
      const r = t.test(s, packet, this)
      if (typeof r === 'object') {
        if ('unknown' in r) return r
        probability = (probability ?? 1) * r.probability
        continue
      }
      if (r !== !t.negated) return false
    }
    return probability === undefined ? true : {probability}
  }
}

/** One option of a rule, read once: its test of a walk state (before negation), shared by every trace of the dump. */
interface OptionTest {
  test: (s: State, packet: Packet, tracer: TracerFacts) => MatchResult
  negated: boolean
}

/** What an option's test may ask of the tracer running it. */
interface TracerFacts {
  isLocal(ip: string): boolean
  /** The packet's source address: the walk read it, so it is not the same walk for another source. */
  sourceOf(s: State): string
  /** The packet's source port, likewise. */
  sourcePortOf(packet: Packet): number
  readonly ipsets: IpsetState | undefined
  readonly bridges: string[] | undefined
}

/** A rule's options as tests, in rule order (a scan evaluates the same rules for every Service). */
function compileMatches(rule: ParsedRule): OptionTest[] {
  const out: OptionTest[] = []
  for (const m of rule.matches) {
    for (const o of m.options) out.push({test: compileOption(m.module, o, rule.text), negated: o.negated})
    if (m.module !== '' && !KNOWN_MODULES.has(m.module))
      out.push({
        test: always({unknown: `match -m ${m.module} is not known to the tracer: ${rule.text}`}),
        negated: false,
      })
  }
  return out
}

function always(result: MatchResult): OptionTest['test'] {
  return () => result
}

/** The test of one option: true/false before negation is applied; probability for statistic (negation folded in). */
function compileOption(module: string, o: RuleOption, ruleText: string): OptionTest['test'] {
  const v = o.values[0] ?? ''
  const unknownResult = (what: string): MatchResult => ({unknown: `${what}: ${ruleText}`})
  const unknown = (what: string) => always(unknownResult(what))
  switch (module) {
    case '':
      switch (o.name) {
        case 's':
        case 'd': {
          const cidr = parseCidr(v)
          if (!cidr) return unknown(`-${o.name} ${v} is not an address or CIDR`)
          return o.name === 's'
            ? (s, _packet, tracer) => cidrContains(cidr, tracer.sourceOf(s))
            : (s) => cidrContains(cidr, s.dst)
        }
        case 'p': {
          const p = PROTO_NUMBERS[v] ?? v.toLowerCase()
          if (p === 'all' || p === '0') return always(true)
          return (_s, packet) => p === packet.proto
        }
        case 'i': {
          const undecided = unknownResult(`the outcome depends on the input interface (${v}), unknown here`)
          return (s) => interfaceMatches(v, s.inIface, s.inNotVia, '+') ?? undecided
        }
        case 'o': {
          const undecided = unknownResult(`the outcome depends on the output interface (${v}), unknown here`)
          return (s) => interfaceMatches(v, s.outIface, s.outNotVia, '+') ?? undecided
        }
        case 'f':
          return always(false)
      }
      return unknown(`option ${o.name}`)
    case 'tcp':
    case 'udp':
    case 'sctp': {
      if (o.name === '--syn') return o.values.length === 0 ? always(true) : unknown(`--syn takes no value`)
      if (o.name === '--tcp-flags')
        return o.values.length === 2
          ? always(tcpFlags(o.values) ?? unknownResult(`--tcp-flags ${o.values.join(' ')} not understood`))
          : unknown('--tcp-flags needs a mask and a flag list')
      if (o.values.length !== 1) return unknown(`${o.name} needs exactly one value`)
      const destination = o.name === '--dport' || o.name === '--destination-port'
      if (!destination && o.name !== '--sport' && o.name !== '--source-port')
        return unknown(`option ${o.name} of -m ${module}`)
      const range = portRange(v)
      if (!range) return unknown(`port ${v} is not a port or port range`)
      const [low, high] = range
      return destination
        ? (s) => s.dport >= low && s.dport <= high
        : (_s, packet, tracer) => {
            const sport = tracer.sourcePortOf(packet)
            return sport >= low && sport <= high
          }
    }
    case 'multiport': {
      if (o.values.length !== 1) return unknown(`${o.name} needs exactly one value`)
      const ranges = v.split(',').map(portRange)
      if (ranges.some((r) => r === undefined)) return unknown(`port list ${v} not understood`)
      const listed = (port: number) => ranges.some((r) => port >= r![0] && port <= r![1])
      if (o.name === '--dports' || o.name === '--destination-ports') return (s) => listed(s.dport)
      if (o.name === '--sports' || o.name === '--source-ports')
        return (_s, packet, tracer) => listed(tracer.sourcePortOf(packet))
      if (o.name === '--ports') return (s, packet, tracer) => listed(s.dport) || listed(tracer.sourcePortOf(packet))
      return unknown(`option ${o.name} of -m multiport`)
    }
    case 'comment':
      return always(!o.negated)
    case 'statistic':
      if (o.name === '--mode')
        return v === 'random' || v === 'nth' ? always(!o.negated) : unknown(`statistic mode ${v}`)
      // One in N packets: a share (the walk cannot know the connection's count); --packet says which of the N.
      if (o.name === '--every') {
        const n = /^\d{1,10}$/.test(v) ? Number(v) : NaN
        if (o.values.length !== 1 || !(n >= 1)) return unknown(`--every ${v}`)
        return always({probability: o.negated ? 1 - 1 / n : 1 / n})
      }
      if (o.name === '--packet') return always(true)
      if (o.name === '--probability') {
        const p = /^\d*\.?\d+(e-?\d+)?$/.test(v) ? Number(v) : NaN
        if (o.values.length !== 1 || !(p >= 0 && p <= 1)) return unknown(`probability ${v}`)
        return always({probability: o.negated ? 1 - p : p})
      }
      return unknown(`option ${o.name} of -m statistic`)
    case 'recent':
      if (o.name === '--set') return always(!o.negated)
      if (o.name === '--rcheck' || o.name === '--update') return always(false)
      if (['--name', '--seconds', '--reap', '--rsource', '--rdest', '--mask', '--hitcount', '--rttl'].includes(o.name))
        return always(!o.negated)
      return unknown(`option ${o.name} of -m recent`)
    case 'conntrack':
    case 'state': {
      if (o.name !== '--ctstate' && o.name !== '--state') return unknown(`option ${o.name} of -m ${module}`)
      const states = v.split(',')
      if (states.includes('NEW')) return always(true)
      if (states.includes('DNAT')) return (s) => s.dnatted
      return always(false)
    }
    case 'addrtype': {
      const types = v.split(',')
      if (o.name === '--dst-type')
        return (s, _packet, tracer) => types.some((t) => addrType(t, s.dst, tracer.isLocal(s.dst)))
      if (o.name === '--src-type')
        return (s, _packet, tracer) => {
          const src = tracer.sourceOf(s)
          return types.some((t) => addrType(t, src, tracer.isLocal(src)))
        }
      if (o.name === '--limit-iface-in' || o.name === '--limit-iface-out') return always(!o.negated)
      return unknown(`option ${o.name} of -m addrtype`)
    }
    case 'mark': {
      if (o.name !== '--mark') return unknown(`option ${o.name} of -m mark`)
      const [valueText, maskText, extra] = v.split('/')
      const value = parseU32(valueText)
      const mask = maskText === undefined ? 0xffffffff : parseU32(maskText)
      if (o.values.length !== 1 || value === undefined || mask === undefined || extra !== undefined)
        return unknown(`mark ${o.values.join(' ')} is not VALUE[/MASK]`)
      return (s) => (s.mark & mask) >>> 0 === value
    }
    case 'set': {
      if (o.name !== '--match-set') return unknown(`option ${o.name} of -m set`)
      const noIpsets = unknownResult(`-m set --match-set ${v} needs the ipsets (--ipset-save)`)
      const notKnown = unknownResult(`ipset ${v} is missing from the ipset dump or of a type the tracer does not know`)
      const flags = o.values[1] ?? ''
      return (s, packet, tracer) => {
        if (!tracer.ipsets) return noIpsets
        const r = tracer.ipsets.matches(v, flags, {
          src: tracer.sourceOf(s),
          dst: s.dst,
          proto: packet.proto,
          dport: s.dport,
          sport: tracer.sourcePortOf(packet),
        })
        return r === undefined ? notKnown : r
      }
    }
    case 'physdev': {
      if (o.name !== '--physdev-is-in') return unknown(`option ${o.name} of -m physdev`)
      const undecided = unknownResult('whether the packet came in through a bridge port is unknown here')
      // A packet from another host (known not to arrive on the node's local interfaces) is not bridged in.
      return (s, _packet, tracer) =>
        s.inIface !== undefined
          ? (tracer.bridges?.includes(s.inIface) ?? undecided)
          : s.inNotVia !== undefined
            ? false
            : undecided
    }
    case 'connmark': {
      // A new connection's mark is 0 (CONNMARK on its first packet is not followed).
      if (o.name !== '--mark') return unknown(`option ${o.name} of -m connmark`)
      const [valueText, maskText, extra] = v.split('/')
      const value = parseU32(valueText)
      const mask = maskText === undefined ? 0xffffffff : parseU32(maskText)
      if (o.values.length !== 1 || value === undefined || mask === undefined || extra !== undefined)
        return unknown(`connmark ${o.values.join(' ')} is not VALUE[/MASK]`)
      return always(value === 0)
    }
    case 'nfacct':
      // Accounting only: every packet matches, and is counted.
      return o.name === '--nfacct-name' ? always(!o.negated) : unknown(`option ${o.name} of -m nfacct`)
    case 'limit':
      // A connection's first packet is within any rate's burst.
      return o.name === '--limit' || o.name === '--limit-burst'
        ? always(!o.negated)
        : unknown(`option ${o.name} of -m limit`)
    case 'icmp':
    case 'icmp6':
      return always(false)
  }
  return unknown(`match -m ${module}`)
}

const KNOWN_MODULES = new Set([
  'tcp',
  'udp',
  'sctp',
  'multiport',
  'comment',
  'statistic',
  'recent',
  'conntrack',
  'state',
  'addrtype',
  'mark',
  'set',
  'icmp',
  'icmp6',
  'connmark',
  'physdev',
  'nfacct',
  'limit',
])

/** A rule's own non-negated -d ADDRESS/32 values (ADDRESS an IPv4 address: one address), or null for none. */
type QuickDestinations = string | string[] | null

/** Cheap test on the rule's -d before anything else: most of a huge KUBE-SERVICES chain is other Services' IPs. */
function quickDestinations(rule: ParsedRule): QuickDestinations {
  const own = rule.matches[0]
  if (!own || own.module !== '') return null
  let found: QuickDestinations = null
  for (const o of own.options) {
    const v = o.values[0]
    if (o.name !== 'd' || o.negated || v === undefined || !isQuickLead(v)) continue
    const ip = v.slice(0, -3)
    found = found === null ? ip : typeof found === 'string' ? [found, ip] : [...found, ip]
  }
  return found
}

/** The address of a "-d ADDRESS/32" the rule's text opens with (the first of quickDestinations), or null. */
function leadingQuickDestination(text: string): string | null {
  const v = leadingDestination(text)
  return v !== undefined && isQuickLead(v) ? v.slice(0, -3) : null
}

/**
 * Whether a -d value is "ADDRESS/32" with ADDRESS an IPv4 address (no string made for a plain one): one
 * address. An IPv6 "ADDRESS/32" is a network, which other addresses match.
 */
function isQuickLead(v: string): boolean {
  return v.endsWith('/32') && (isPlainIPv4(v, v.length - 3) || parseIp(v.slice(0, -3))?.family === 4)
}

/** Whether the rule cannot match a packet to dst: one of its /32 destinations is another address. */
function quickMiss(quick: string | string[], dst: string): boolean {
  return typeof quick === 'string' ? quick !== dst : quick.some((ip) => ip !== dst)
}

/**
 * Dotted decimal without leading zeros, each part at most 255: an address parseIp reads (checked without it); of
 * text[0, n) (the whole text when n is not given).
 */
function isPlainIPv4(text: string, n = text.length): boolean {
  let parts = 0
  let i = 0
  while (i < n) {
    const first = text.charCodeAt(i)
    if (first < 48 || first > 57) return false
    let value = first - 48
    let j = i + 1
    while (j < n && j - i < 3) {
      const c = text.charCodeAt(j)
      if (c < 48 || c > 57) break
      if (value === 0) return false
      value = value * 10 + c - 48
      j++
    }
    if (value > 255) return false
    parts++
    if (j === n) return parts === 4
    if (text.charCodeAt(j) !== 46 || parts === 4) return false
    i = j + 1
  }
  return false
}

function withStep(s: State, chain: Chain, index: number): State {
  let step = chain.facts.steps[index]
  if (!step) {
    const rule = chain.rules[index]
    step = chain.facts.steps[index] = {table: rule.table, chain: rule.chain, line: rule.line, rule: rule.text}
  }
  return addStep(s, step)
}

function ended(state: State, end: 'ACCEPT' | 'DROP' | 'REJECT'): Outcome {
  return {state, action: {kind: 'end', end}}
}

function unknownEnd(state: State, reason: string): Outcome {
  return {state, action: {kind: 'end', end: 'UNKNOWN', reason}}
}

/** Where a DNAT rule sends (splitAddr's reading of --to-destination), null when it is not usable. */
function dnatTarget(rule: ParsedRule): {ip: string; port?: number} | null {
  const to = rule.targetOptions.find((o) => o.name === '--to-destination')?.values[0]
  const parsed = to ? splitAddr(to) : undefined
  return !parsed || (parsed.ip !== '' && !parseIp(parsed.ip)) ? null : parsed
}

/** The priority an iptables table's base chain of a hook registers at (the kernel's NF_IP_PRI_*). */
function tablePriority(table: string, hook: string): number {
  switch (table) {
    case 'raw':
      return -300
    case 'mangle':
      return -150
    case 'nat':
      return hook === 'prerouting' || hook === 'output' ? -100 : 100
    case 'security':
      return 50
  }
  return 0
}

const policyName = (c: Chain) => ({table: c.table, chain: c.name})

/** The table's chain of that name with its rules' facts, null when the dump has none. */
function chainOf(dump: IptablesSave, table: string, name: string): Chain | null {
  if (!dump.hasChain(table, name)) return null
  const rules = dump.rules(table, name)
  const facts = ((rules as RulesWithFacts)[FACTS] ??= {
    lead: [],
    quick: [],
    recent: [],
    steps: [],
    tests: [],
    dnat: [],
  })
  return {table, name, rules, facts}
}

/**
 * One base chain of a hook as a dump has it: its table, priority and rules, or why a fragment cannot be walked there.
 * The chain's rules are those parsed when the plan was made: a base chain is the same text for the dump's life.
 */
interface HookPlan {
  table: string
  name: string
  priority: number
  chain?: Chain
  missing?: string
}

/**
 * What every tracer of one dump looks up alike (a scan makes several per Service and node): each hook's base chains,
 * worked out once per dump; and the chains by table and name, since the dump last forgot (its chains of the Service
 * judged before are then dropped here too: see IptablesSave.forgetOneOffChains).
 */
interface SharedChains {
  plans: Map<string, HookPlan[]>
  byTable: Map<string, Map<string, Chain | null>>
  forgets: number
}

const sharedByDump = new WeakMap<IptablesSave, SharedChains>()

function sharedChains(dump: IptablesSave): SharedChains {
  let shared = sharedByDump.get(dump)
  if (!shared) sharedByDump.set(dump, (shared = {plans: new Map(), byTable: new Map(), forgets: dump.forgets}))
  else if (shared.forgets !== dump.forgets) {
    shared.byTable = new Map()
    shared.forgets = dump.forgets
  }
  return shared
}

function hookPlan(dump: IptablesSave, hook: string): HookPlan[] {
  const name = hook.toUpperCase()
  return HOOK_TABLES[hook].flatMap((table): HookPlan[] => {
    const priority = tablePriority(table, hook)
    const missing = missingBaseChain(dump, table, name)
    if (missing !== undefined) return [{table, name, priority, missing}]
    const chain = chainOf(dump, table, name)
    return chain ? [{table, name, priority, chain}] : []
  })
}

/** iptables tables in the order netfilter runs them at each hook. */
const HOOK_TABLES: Record<string, string[]> = {
  prerouting: ['raw', 'mangle', 'nat'],
  input: ['mangle', 'filter', 'security', 'nat'],
  forward: ['mangle', 'filter', 'security'],
  output: ['raw', 'mangle', 'nat', 'filter', 'security'],
  postrouting: ['mangle', 'nat'],
}

/** A port number 0-65535 written in decimal; undefined otherwise. */
function parsePort(text: string): number | undefined {
  if (!/^\d{1,5}$/.test(text)) return undefined
  const n = Number(text)
  return n <= 65535 ? n : undefined
}

/** A 32-bit value in decimal or 0x hex (a mark, a mask); undefined otherwise. */
function parseU32(text: string | undefined): number | undefined {
  if (text === undefined || !/^(0x[0-9a-fA-F]{1,8}|\d{1,10})$/.test(text)) return undefined
  const n = Number(text)
  return n <= 0xffffffff ? n >>> 0 : undefined
}

/** The ports of "N", "LO:HI", "LO:" or ":HI" as [low, high]; undefined when the spec is not one of those. */
function portRange(spec: string): [number, number] | undefined {
  const [lo, hi, extra] = spec.split(':')
  if (extra !== undefined) return undefined
  const low = lo === '' && hi !== undefined ? 0 : parsePort(lo)
  const high = hi === undefined ? low : hi === '' ? 65535 : parsePort(hi)
  if (low === undefined || high === undefined) return undefined
  return [low, high]
}

const TCP_FLAGS = ['FIN', 'SYN', 'RST', 'PSH', 'ACK', 'URG', 'ECE', 'CWR']

/** A NEW connection's first packet carries SYN only. */
function tcpFlags(values: string[]): boolean | undefined {
  const [mask, comp] = values
  const set = new Set(['SYN'])
  const list = (text: string) => (text === 'ALL' ? TCP_FLAGS : text === 'NONE' ? [] : text.split(','))
  const maskFlags = list(mask)
  const compFlags = list(comp)
  if ([...maskFlags, ...compFlags].some((f) => !TCP_FLAGS.includes(f))) return undefined
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
    const [a, b, extra] = (o.values[0] ?? '').split('/')
    const value = parseU32(a)
    const mask = b === undefined ? 0xffffffff : parseU32(b)
    if (o.values.length !== 1 || value === undefined || mask === undefined || extra !== undefined) return undefined
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

/** The first entry of an ascending list that is at least `from`, or `none` when there is none. */
function firstAtOrAfter(list: number[], from: number, none: number): number {
  let lo = 0
  let hi = list.length
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if (list[mid] < from) lo = mid + 1
    else hi = mid
  }
  return lo < list.length ? list[lo] : none
}
