import {
  parseElements,
  splitTop,
  type NftChain,
  type NftElement,
  type NftRule,
  type NftRuleset,
  type NftSet,
  type NftTable,
} from '../parse/nft-ruleset.js'
import {inCidr, parseIp} from '../net/address.js'
import type {Packet, RouteGuess, TraceResult} from './types.js'
import {
  changed,
  hookChainOf,
  isLocalAddress,
  MAX_BRANCHES,
  missingHookChain,
  SourceFreeWalks,
  traceHooks,
  withStep,
  type HookChain,
  type ChainEnd,
  type ChainSource,
  type RuleAction,
  type RuleOutcome,
  type WalkState as State,
} from './walk.js'
import {splitAddr} from './iptables-tracer.js'
import {isTraceTable} from '../parse/nft-trace.js'

export interface NftTraceOptions {
  localAddresses: string[]
  locallyGenerated?: boolean
  /** The node's routing decision for a forwarded packet (after DNAT), where the packet does not name its output interface. */
  route?: (dst: string) => RouteGuess
}

type Verdict = {kind: 'accept' | 'drop' | 'reject' | 'return' | 'continue'} | {kind: 'jump' | 'goto'; target: string}

class Unknown extends Error {}

const SERVICES: Record<string, number> = {http: 80, https: 443, domain: 53, ssh: 22}
const PROTOS: Record<string, string> = {'6': 'tcp', '17': 'udp', '132': 'sctp'}

/** Splits a rule into words, keeping "{ … }" groups and quoted strings whole. */
export function nftTokens(text: string): string[] {
  const out: string[] = []
  let i = 0
  while (i < text.length) {
    if (text[i] === ' ') {
      i++
      continue
    }
    if (text[i] === '{') {
      let depth = 0
      const start = i
      for (; i < text.length; i++) {
        if (text[i] === '{') depth++
        if (text[i] === '}' && --depth === 0) break
      }
      out.push(text.slice(start, ++i))
      continue
    }
    if (text[i] === '"') {
      const end = text.indexOf('"', i + 1)
      out.push(text.slice(i, end < 0 ? text.length : end + 1))
      i = end < 0 ? text.length : end + 1
      continue
    }
    const start = i
    while (i < text.length && text[i] !== ' ') i++
    out.push(text.slice(start, i))
  }
  return out
}

/** Walks one NEW packet through an `nft list ruleset` the way the kernel would: base chains by hook and priority. */
export class NftTracer implements ChainSource<NftChain> {
  private local: Set<string>
  private packet!: Packet
  /** The walks that never read the packet's source (value() notes each read of it). */
  private readonly sourceFree = new SourceFreeWalks()
  private readonly tokenCache = new WeakMap<NftRule, string[]>()
  private readonly inlineCache = new Map<string, NftElement[]>()
  private readonly chanceCache = new WeakMap<NftRule, {share: number; rest: string[]} | string | null>()

  constructor(
    private readonly rs: NftRuleset,
    private readonly opts: NftTraceOptions,
  ) {
    this.local = new Set(opts.localAddresses)
  }

  trace(packet: Packet): TraceResult {
    this.prepare(packet)
    const localOrigin = this.opts.locallyGenerated || isLocalAddress(this.local, packet.src)
    return this.sourceFree.walk(packet, localOrigin, () =>
      traceHooks(
        packet,
        localOrigin,
        (ip) => isLocalAddress(this.local, ip),
        (hook) => this.hookChains(hook, familiesOf(packet)),
        this.opts.route,
      ),
    )
  }

  /** Sets the packet the rules are evaluated for: before walking any of this ruleset's chains (a cross walk's too). */
  prepare(packet: Packet): void {
    this.packet = packet
  }

  /**
   * The base chains of one hook of the tables of these families, by priority; tables of `skipTables` ("ip filter")
   * are left to the engine that reads them (iptables-nft's, traced from its iptables-save form).
   */
  hookChains(hook: string, families: string[], skipTables?: ReadonlySet<string>): HookChain[] {
    // A kube-proxy table pasted without the base chain of this hook: no verdict past it.
    const missing = this.rs.missingHook(hook, families)
    if (missing !== undefined) return [missingHookChain(-Infinity, missing)]
    // The doctor's own trace table (--kernel-trace makes it while the node's rules may still be being read): it only
    // marks the probes' packets for netfilter's trace, and is no part of the path kube-proxy programmed.
    return this.rs
      .baseChains(hook, families)
      .filter((c) => !skipTables?.has(c.table) && !isTraceTable(c.table))
      .map((c) => hookChainOf(this, c, c.base!.priority, c.base!.type === 'nat', policyName))
  }

  private tableOf(chain: NftChain): NftTable {
    return this.rs.table(chain.table)!
  }

  private tokensOf(rule: NftRule): string[] {
    let toks = this.tokenCache.get(rule)
    if (!toks) {
      toks = nftTokens(rule.text)
      this.tokenCache.set(rule, toks)
    }
    return toks
  }

  /** The elements of an inline `{ … }` set or map, parsed once per distinct text. */
  private elementsOf(braced: string): NftElement[] {
    let els = this.inlineCache.get(braced)
    if (!els) {
      try {
        els = parseElements(braced.slice(1, -1))
      } catch (e) {
        throw new Unknown((e as Error).message, {cause: e})
      }
      if (this.inlineCache.size > 10_000) this.inlineCache.clear()
      this.inlineCache.set(braced, els)
    }
    return els
  }

  ruleCount(chain: NftChain): number {
    return chain.rules.length
  }

  chainName(chain: NftChain): string {
    return `${chain.table}/${chain.name}`
  }

  describe(chain: NftChain, index: number): string {
    const rule = chain.rules[index]
    return rule ? `${chain.table}/${chain.name} rule ${index + 1} (line ${rule.line})` : `${chain.table}/${chain.name}`
  }

  fallOff(chain: NftChain): ChainEnd {
    if (chain.base) return chain.base.policy === 'drop' ? 'DROP' : 'ACCEPT'
    return 'RETURN'
  }

  evaluate(chain: NftChain, index: number, state: State): Array<RuleOutcome<NftChain>> {
    const rule = chain.rules[index]
    let outcomes: Array<{state: State; verdict?: Verdict; probability: number}>
    try {
      const chance = this.chanceOf(rule)
      if (chance === undefined) outcomes = this.evalRule(rule, state, this.packet, this.tokensOf(rule))
      else {
        // A rule that matches by chance (iptables-nft's -m statistic): its share walks the rest of the rule, the rest passes.
        outcomes =
          chance.share > 0
            ? this.evalRule(
                rule,
                changed(state, {probability: state.probability * chance.share}),
                this.packet,
                chance.rest,
              )
            : [{state, probability: 1}]
        if (outcomes.length === 1 && outcomes[0].verdict === undefined && outcomes[0].state.steps === state.steps)
          outcomes = [{state, probability: 1}]
        else if (chance.share < 1)
          outcomes.push({state: changed(state, {probability: state.probability * (1 - chance.share)}), probability: 1})
      }
    } catch (e) {
      if (e instanceof Unknown)
        return [{state: step(state, rule), action: {kind: 'end', end: 'UNKNOWN', reason: `${e.message}: ${rule.text}`}}]
      throw e
    }
    return outcomes.map((o) => ({state: o.state, action: this.action(chain, o.verdict)}))
  }

  private action(chain: NftChain, v: Verdict | undefined): RuleAction<NftChain> {
    if (!v || v.kind === 'continue') return {kind: 'next'}
    switch (v.kind) {
      case 'accept':
        return {kind: 'end', end: 'ACCEPT'}
      case 'drop':
        return {kind: 'end', end: 'DROP'}
      case 'reject':
        return {kind: 'end', end: 'REJECT'}
      case 'return':
        return {kind: 'return'}
    }
    if (v.kind !== 'jump' && v.kind !== 'goto')
      return {kind: 'end', end: 'UNKNOWN', reason: `verdict ${v.kind} not understood`}
    const target = this.tableOf(chain).chains.get(v.target)
    if (!target)
      return {
        kind: 'end',
        end: 'UNKNOWN',
        reason: `${v.kind} to chain ${v.target}, which table ${chain.table} does not have`,
      }
    return {kind: v.kind, chain: target}
  }

  /**
   * Evaluates a rule's expressions left to right. Returns the ways it can end: no match (the input state, no
   * verdict), or a verdict with the state its statements left (several ways for numgen).
   */
  /**
   * The share of new connections a rule matches by chance, and its other words: iptables-nft prints `-m statistic
   * --mode random` as `meta random & 2147483647 < N` (N / 2^31 of them; `>=` for the negated form) and `--mode nth` as
   * `numgen inc mod N [offset O] V` (one in N: a share, the walk cannot know the packet's count). Undefined when the
   * rule has neither.
   */
  private chanceOf(rule: NftRule): {share: number; rest: string[]} | undefined {
    if (!rule.text.includes('meta random') && !rule.text.includes('numgen inc')) return undefined
    let c = this.chanceCache.get(rule)
    if (c === undefined) {
      c = chanceIn(this.tokensOf(rule))
      this.chanceCache.set(rule, c)
    }
    if (typeof c === 'string') throw new Unknown(c)
    return c ?? undefined
  }

  private evalRule(
    rule: NftRule,
    input: State,
    packet: Packet,
    toks: string[],
  ): Array<{state: State; verdict?: Verdict; probability: number}> {
    let s = input
    let i = 0
    const noMatch = [{state: input, probability: 1}]
    const matched = () => (s === input ? step(input, rule) : s)
    while (i < toks.length) {
      const t = toks[i]
      if (t === 'counter') {
        i++
        while (toks[i] === 'packets' || toks[i] === 'bytes') i += 2
        continue
      }
      if (t === 'comment') {
        i += 2
        continue
      }
      if (t === 'log') {
        i++
        while (['prefix', 'level', 'flags', 'group'].includes(toks[i])) i += 2
        continue
      }
      if (t === 'xt') {
        const effect = xtEffect(toks[i + 1], unquote(toks[i + 2] ?? ''))
        if (effect === 'reject') return [{state: matched(), verdict: {kind: 'reject'}, probability: 1}]
        if (effect !== 'pass') throw new Unknown(effect)
        i += 3
        continue
      }
      if (t === 'limit' && toks[i + 1] === 'rate') {
        // A connection's first packet is within any rate's burst: `limit rate N/unit` matches it, `over` does not.
        if (toks[i + 2] === 'over') return noMatch
        i += 3
        if (toks[i] === 'burst') i += 3
        continue
      }
      if (t === 'ct' && toks[i + 1] === 'mark' && toks[i + 2] === 'set') {
        // The connection's mark: only read by later packets of the connection (and by `ct mark` matches, see value()).
        s = matched()
        i += 4
        continue
      }
      if (['accept', 'drop', 'reject', 'return', 'continue'].includes(t))
        return [{state: matched(), verdict: {kind: t as 'accept'}, probability: 1}]
      if (t === 'jump' || t === 'goto')
        return [{state: matched(), verdict: {kind: t, target: unquote(toks[i + 1] ?? '')}, probability: 1}]
      if (t === 'dnat' || t === 'snat' || t === 'redirect') {
        i++
        if (toks[i] === 'ip' || toks[i] === 'ip6') i++
        if (toks[i] === 'to') i++
        const to = toks[i] ?? ''
        if (t === 'snat')
          return [{state: changed(matched(), {masquerade: true}), verdict: {kind: 'accept'}, probability: 1}]
        if (t === 'redirect')
          return [
            {
              state: changed(matched(), {
                dst: '127.0.0.1',
                dport: Number(to.replace(/^:/, '')) || s.dport,
                dnatted: true,
              }),
              verdict: {kind: 'accept'},
              probability: 1,
            },
          ]
        const a = splitAddr(to)
        if (!a || !a.ip) throw new Unknown(`dnat target "${to}" not understood`)
        return [
          {
            state: changed(matched(), {dst: a.ip, dport: a.port ?? s.dport, dnatted: true}),
            verdict: {kind: 'accept'},
            probability: 1,
          },
        ]
      }
      if (t === 'masquerade')
        return [{state: changed(matched(), {masquerade: true}), verdict: {kind: 'accept'}, probability: 1}]
      if (t === 'meta' && toks[i + 1] === 'mark' && toks[i + 2] === 'set') {
        const r = markSet(toks.slice(i + 3), s.mark)
        s = changed(matched(), {mark: r.mark})
        i += 3 + r.used
        continue
      }
      if ((t === 'update' || t === 'add') && toks[i + 1]?.startsWith('@')) {
        s = changed(matched(), {sticky: true})
        i += 3
        continue
      }
      if (t === 'numgen') {
        if (toks[i + 1] !== 'random' || toks[i + 2] !== 'mod') throw new Unknown('numgen other than "random mod N"')
        const {n, offset, next} = numgenModulus(toks, i)
        const j = next
        if (!Number.isSafeInteger(n) || n < 1 || n > MAX_BRANCHES || !Number.isSafeInteger(offset) || offset < 0)
          throw new Unknown(`numgen modulus ${toks[i + 3]} / offset ${offset} not usable`)
        if (toks[j] !== 'vmap' || !toks[j + 1]?.startsWith('{')) throw new Unknown('numgen without an inline vmap')
        const slots = numgenSlots(this.elementsOf(toks[j + 1]), offset, n)
        const base = matched()
        const out: Array<{state: State; verdict?: Verdict; probability: number}> = []
        let missing = 0
        for (const value of slots) {
          if (value === undefined) {
            missing++
            continue
          }
          out.push({
            state: changed(base, {probability: base.probability / n}),
            verdict: parseVerdict(value),
            probability: 1 / n,
          })
        }
        if (missing > 0)
          out.push({state: changed(input, {probability: (input.probability * missing) / n}), probability: missing / n})
        return out
      }
      // A match: selector ( . selector )* [op] value | vmap value
      const sel: string[] = []
      for (;;) {
        const r = selector(toks, i)
        if (!r) throw new Unknown(`expression "${toks.slice(i, i + 3).join(' ')}" not known to the tracer`)
        sel.push(r.name)
        i = r.next
        if (toks[i] === '.') {
          i++
          continue
        }
        break
      }
      const actual = sel.map((name) => this.value(name, s, packet))
      if (toks[i] === 'vmap') {
        const v = this.lookup(rule, toks[i + 1] ?? '', sel, actual)
        if (v === undefined) return noMatch
        return [{state: matched(), verdict: parseVerdict(v), probability: 1}]
      }
      let negate = false
      if (toks[i] === '!=' || toks[i] === '==') {
        negate = toks[i] === '!='
        i++
      }
      const spec = toks[i++] ?? ''
      const hit = this.matchSpec(rule, spec, sel, actual)
      if (hit === negate) return noMatch
      s = matched()
    }
    return [{state: matched(), probability: 1}]
  }

  private value(name: string, s: State, packet: Packet): string | undefined {
    switch (name) {
      case 'ip saddr':
      case 'ip6 saddr':
        this.sourceFree.sourceRead = true
        return s.src
      case 'ip daddr':
      case 'ip6 daddr':
        return s.dst
      case 'meta l4proto':
      case 'ip protocol':
        return packet.proto
      case 'th dport':
        return String(s.dport)
      case 'th sport':
        this.sourceFree.sourceRead = true
        return String(packet.sport)
      case 'tcp dport':
      case 'udp dport':
      case 'sctp dport':
        return name.startsWith(packet.proto) ? String(s.dport) : undefined
      case 'tcp sport':
      case 'udp sport':
      case 'sctp sport':
        this.sourceFree.sourceRead = true
        return name.startsWith(packet.proto) ? String(packet.sport) : undefined
      case 'ct state':
        return 'new'
      case 'ct status':
        return s.dnatted ? 'dnat' : ''
      case 'fib daddr type':
        return isLocalAddress(this.local, s.dst) ? 'local' : 'unicast'
      case 'fib saddr type':
        this.sourceFree.sourceRead = true
        return isLocalAddress(this.local, s.src) ? 'local' : 'unicast'
      case 'iifname':
      case 'meta iifname':
        if (s.inIface === undefined) throw new Unknown('the outcome depends on the input interface, unknown here')
        return s.inIface
      case 'oifname':
      case 'meta oifname':
        if (s.outIface === undefined) throw new Unknown('the outcome depends on the output interface, unknown here')
        return s.outIface
      case 'meta nfproto':
        return s.dst.includes(':') ? 'ipv6' : 'ipv4'
      case 'ct mark':
        // A new connection's mark is 0 (a `ct mark set` on its first packet is not followed: see evalRule).
        return '0'
    }
    if (name.startsWith('ct mark &')) return '0'
    if (name.startsWith('ct mark &')) return '0'
    if (name.startsWith('meta mark')) {
      const mask = name.split('&')[1]
      return String(mask ? (s.mark & Number(mask.trim())) >>> 0 : s.mark)
    }
    throw new Unknown(`selector "${name}"`)
  }

  private matchSpec(rule: NftRule, spec: string, sel: string[], actual: Array<string | undefined>): boolean {
    if (actual.some((a) => a === undefined)) return false
    if (spec.startsWith('@')) {
      const set = this.rs.table(rule.table)?.sets.get(spec.slice(1))
      if (!set) throw new Unknown(`set ${spec} is not in the ruleset`)
      return elementsFor(set, sel, actual).some((e) => e.key.every((k, n) => matchOne(sel[n], actual[n]!, k)))
    }
    if (spec.startsWith('{'))
      return this.elementsOf(spec).some((el) => el.key.every((k, n) => matchOne(sel[n], actual[n]!, k)))
    if (sel.length > 1) return splitTop(spec, ' . ').every((k, n) => matchOne(sel[n], actual[n]!, k))
    return matchOne(sel[0], actual[0]!, spec)
  }

  private lookup(rule: NftRule, spec: string, sel: string[], actual: Array<string | undefined>): string | undefined {
    if (actual.some((a) => a === undefined)) return undefined
    let elements: Array<{key: string[]; value?: string}>
    if (spec.startsWith('@')) {
      const set = this.rs.table(rule.table)?.sets.get(spec.slice(1))
      if (!set) throw new Unknown(`map ${spec} is not in the ruleset`)
      elements = elementsFor(set, sel, actual)
    } else if (spec.startsWith('{')) elements = this.elementsOf(spec)
    else throw new Unknown(`vmap "${spec}" not understood`)
    return elements.find((e) => e.key.every((k, n) => matchOne(sel[n], actual[n]!, k)))?.value
  }
}

/**
 * The elements of a set that can match a packet's values, in order: where the first selector compares an address
 * (`ip daddr`: a plain key by equality), only those whose first key part is the packet's, when the set can find them
 * without reading every element (a 50,000-element map); else every element.
 */
function elementsFor(set: NftSet, sel: string[], actual: Array<string | undefined>): NftElement[] {
  const first = sel[0]
  if ((first.endsWith('saddr') || first.endsWith('daddr')) && !first.startsWith('fib') && set.elementsStartingWith)
    return set.elementsStartingWith(actual[0]!) ?? set.elements
  return set.elements
}

/** The families of tables a packet passes: its own (ip, ip6) and inet. */
export function familiesOf(packet: Packet): string[] {
  return packet.dst.includes(':') ? ['ip6', 'inet'] : ['ip', 'inet']
}

const policyName = (c: NftChain) => ({table: c.table, chain: c.name})

function step(s: State, rule: NftRule): State {
  return withStep(s, {table: rule.table, chain: rule.chain, line: rule.line, rule: rule.text})
}

function unquote(s: string): string {
  // A map's 50,000 keys are matched one by one: most words hold no quote, and need no regular expression.
  return s.charCodeAt(0) === 0x22 /* " */ ? s.replace(/^"(.*)"$/, '$1') : s
}

function parseVerdict(text: string): Verdict {
  const [kind, target] = text.trim().split(/\s+/)
  if (kind === 'jump' || kind === 'goto') return {kind, target: unquote(target ?? '')}
  if (['accept', 'drop', 'reject', 'return', 'continue'].includes(kind)) return {kind: kind as 'accept'}
  throw new Unknown(`verdict "${text}" not understood`)
}

/** For each numgen result offset..offset+n-1, the value of the first element whose key ("N" or "LO-HI") holds it. */
function numgenSlots(elements: NftElement[], offset: number, n: number): Array<string | undefined> {
  const slots = new Array<string | undefined>(n).fill(undefined)
  for (const e of elements) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(e.key[0] ?? '')
    if (!m || e.key.length !== 1 || e.value === undefined)
      throw new Unknown(`numgen map element "${e.key.join(' . ')}" not understood`)
    const lo = Math.max(Number(m[1]), offset)
    const hi = Math.min(m[2] === undefined ? Number(m[1]) : Number(m[2]), offset + n - 1)
    for (let k = lo; k <= hi; k++) if (slots[k - offset] === undefined) slots[k - offset] = e.value
  }
  return slots
}

const SELECTORS = [
  'ip saddr',
  'ip daddr',
  'ip6 saddr',
  'ip6 daddr',
  'ip protocol',
  'meta l4proto',
  'meta nfproto',
  'th dport',
  'th sport',
  'tcp dport',
  'tcp sport',
  'udp dport',
  'udp sport',
  'sctp dport',
  'sctp sport',
  'ct state',
  'ct status',
  'meta iifname',
  'meta oifname',
]

function selector(toks: string[], i: number): {name: string; next: number} | undefined {
  const two = `${toks[i]} ${toks[i + 1]}`
  if (two === 'meta mark' || two === 'ct mark') {
    if (toks[i + 2] === '&') return {name: `${two} & ${toks[i + 3]}`, next: i + 4}
    return {name: two, next: i + 2}
  }
  if (toks[i] === 'fib' && toks[i + 2] === 'type' && (toks[i + 1] === 'daddr' || toks[i + 1] === 'saddr'))
    return {name: `fib ${toks[i + 1]} type`, next: i + 3}
  if (SELECTORS.includes(two)) return {name: two, next: i + 2}
  if (toks[i] === 'iifname' || toks[i] === 'oifname') return {name: toks[i], next: i + 1}
  return undefined
}

function matchOne(sel: string, actual: string, spec: string): boolean {
  const v = unquote(spec.trim())
  if (sel.endsWith('saddr') || sel.endsWith('daddr')) {
    if (sel.startsWith('fib'))
      return v
        .split(',')
        .map((x) => x.trim())
        .includes(actual)
    if (v.includes('/')) return inCidr(v, actual)
    if (v.includes('-') && !v.includes(':')) {
      const [lo, hi] = v.split('-').map((x) => parseIp(x)?.value)
      const a = parseIp(actual)?.value
      return lo !== undefined && hi !== undefined && a !== undefined && a >= lo && a <= hi
    }
    return v === actual
  }
  if (sel.endsWith('dport') || sel.endsWith('sport')) {
    const port = Number(actual)
    const num = (x: string) => SERVICES[x] ?? Number(x)
    const [lo, hi] = v.split('-').map(num)
    return hi === undefined ? port === lo : port >= lo && port <= hi
  }
  if (sel === 'meta l4proto' || sel === 'ip protocol') return (PROTOS[v] ?? v) === actual
  if (sel === 'ct state' || sel === 'ct status')
    return v
      .split(',')
      .map((x) => x.trim())
      .includes(actual)
  if (sel.startsWith('meta mark') || sel.startsWith('ct mark')) return Number(v) >>> 0 === Number(actual)
  if (sel === 'iifname' || sel === 'oifname' || sel.startsWith('meta '))
    return v.endsWith('*') ? actual.startsWith(v.slice(0, -1)) : v === actual
  return v === actual
}

const MARK_OPS: Record<string, (a: number, b: number) => number> = {
  '|': (a, b) => (a | b) >>> 0,
  or: (a, b) => (a | b) >>> 0,
  '^': (a, b) => (a ^ b) >>> 0,
  xor: (a, b) => (a ^ b) >>> 0,
  '&': (a, b) => (a & b) >>> 0,
  and: (a, b) => (a & b) >>> 0,
}

/**
 * meta mark set EXPR: `meta mark | X` (kube-proxy's), iptables-nft's `mark or X`, `mark and X xor Y` (-j MARK
 * --set-xmark), `mark and X`, `mark xor X`, or a constant.
 */
function markSet(toks: string[], mark: number): {mark: number; used: number} {
  const from = toks[0] === 'meta' && toks[1] === 'mark' ? 2 : toks[0] === 'mark' ? 1 : -1
  if (from >= 0) {
    let value = mark
    let i = from
    while (MARK_OPS[toks[i]] !== undefined) {
      const v = parseMarkValue(toks[i + 1])
      if (v === undefined) throw new Unknown(`meta mark set with operand "${toks[i + 1] ?? ''}"`)
      value = MARK_OPS[toks[i]](value, v)
      i += 2
    }
    if (i === from) throw new Unknown(`meta mark set with operator "${toks[i] ?? ''}"`)
    return {mark: value, used: i}
  }
  const v = Number(toks[0])
  if (Number.isNaN(v)) throw new Unknown(`meta mark set "${toks[0]}"`)
  return {mark: v >>> 0, used: 1}
}

function parseMarkValue(text: string | undefined): number | undefined {
  if (text === undefined || !/^(0x[0-9a-fA-F]{1,8}|\d{1,10})$/.test(text)) return undefined
  const n = Number(text)
  return n <= 0xffffffff ? n >>> 0 : undefined
}

/**
 * What an `xt` expression does (iptables-nft's matches and targets that nft does not translate: `xt match NAME`,
 * `xt target NAME`; nft prints no options): pass (the walk goes on), reject, or why it cannot be told.
 */
function xtEffect(kind: string | undefined, name: string): 'pass' | 'reject' | string {
  if (kind === 'match' && XT_MATCHES_PASSED.has(name)) return 'pass'
  if (kind === 'target' && XT_TARGETS_PASSED.has(name)) return 'pass'
  if (kind === 'target' && name === 'REJECT') return 'reject'
  return `iptables-nft's ${kind === 'target' ? '-j' : '-m'} ${name} (nft prints it as "xt ${kind ?? ''} ${name}" without its options): read this table with iptables-nft-save`
}

/** Matches every new packet passes: a comment, an accounting object (it only counts). */
const XT_MATCHES_PASSED: ReadonlySet<string> = new Set(['comment', 'nfacct'])
/** Targets that change nothing the walk follows and go on to the next rule. */
const XT_TARGETS_PASSED: ReadonlySet<string> = new Set([
  'LOG',
  'NFLOG',
  'TRACE',
  'AUDIT',
  'CHECKSUM',
  'TCPMSS',
  'CONNMARK',
])

/** 2^31: `meta random & 2147483647` is uniform below it. */
const RANDOM_RANGE = 2 ** 31

/**
 * The chance words of a rule (see NftTracer.chanceOf): its share and its other words; null for none; a string: why
 * the chance cannot be told.
 */
function chanceIn(toks: string[]): {share: number; rest: string[]} | string | null {
  for (let i = 0; i < toks.length; i++) {
    if (toks[i] === 'meta' && toks[i + 1] === 'random') {
      if (toks[i + 2] !== '&' || Number(toks[i + 3]) !== RANDOM_RANGE - 1)
        return `"${toks.slice(i, i + 4).join(' ')}" is not iptables-nft's statistic form`
      const op = toks[i + 4]
      const n = Number(toks[i + 5])
      if (!Number.isSafeInteger(n) || n < 0 || !['<', '>=', '<=', '>'].includes(op))
        return `"${toks.slice(i, i + 6).join(' ')}" is not iptables-nft's statistic form`
      const below = Math.min(1, (op === '<=' || op === '>' ? n + 1 : n) / RANDOM_RANGE)
      return {share: op === '<' || op === '<=' ? below : 1 - below, rest: [...toks.slice(0, i), ...toks.slice(i + 6)]}
    }
    if (toks[i] === 'numgen' && toks[i + 1] === 'inc' && toks[i + 2] === 'mod') {
      const {n, offset, next} = numgenModulus(toks, i)
      let j = next
      let negate = false
      if (toks[j] === '==' || toks[j] === '!=') negate = toks[j++] === '!='
      const v = Number(toks[j])
      if (!Number.isSafeInteger(n) || n < 1 || !Number.isSafeInteger(offset) || !Number.isSafeInteger(v))
        return `"${toks.slice(i, j + 1).join(' ')}" is not iptables-nft's statistic nth form`
      const hit = v >= offset && v < offset + n ? 1 / n : 0
      return {share: negate ? 1 - hit : hit, rest: [...toks.slice(0, i), ...toks.slice(j + 1)]}
    }
  }
  return null
}

/** `numgen random|inc mod N [offset O]` at toks[i]: N, O (0 when absent) and the index of the token after them. */
function numgenModulus(toks: string[], i: number): {n: number; offset: number; next: number} {
  const n = Number(toks[i + 3])
  if (toks[i + 4] !== 'offset') return {n, offset: 0, next: i + 4}
  return {n, offset: Number(toks[i + 5]), next: i + 6}
}
