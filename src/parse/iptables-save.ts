import {ParseError} from './parse-error.js'
import {ChainIndex, DeclaredTwice, FNV_OFFSET, FNV_PRIME, nameHash, NOT_FOUND} from './chain-index.js'
import type {DumpSource} from './dump-source.js'
import {leadingDestination, parseRule, serviceRuleTarget, type ParsedRule} from './iptables-rule.js'
import {notReadMark} from './not-read-mark.js'

/** How many values LeadingDestinations.ledBy searches for before it builds a map of every value instead. */
const SEARCHES_BEFORE_MAP = 16

/**
 * A chain's rules (as rules() gives them, by index) by the value of the -d they open with (leadingDestination). A
 * value is searched for natively in the list of every rule's value (a map of 50,000 distinct strings, one array each,
 * cost more to build than the values themselves); a caller asking for many (a scan, per Service) gets the map.
 */
export class LeadingDestinations {
  /** Per rule: the value of the -d it opens with; undefined when it opens otherwise or is not understood. */
  readonly leads: Array<string | undefined> = []
  /** The rules that open with no -d (or are not understood), in rule order. */
  readonly unled: number[] = []
  private byLead: Map<string, number[]> | undefined
  private searches = 0

  /** The rules that open with "-d `value`", in rule order. */
  ledBy(value: string): number[] {
    if (!this.byLead && ++this.searches > SEARCHES_BEFORE_MAP) {
      const byLead = (this.byLead = new Map())
      this.leads.forEach((lead, i) => {
        if (lead === undefined) return
        const list = byLead.get(lead)
        if (list) list.push(i)
        else byLead.set(lead, [i])
      })
    }
    if (this.byLead) return this.byLead.get(value) ?? []
    const out: number[] = []
    for (let i = this.leads.indexOf(value); i >= 0; i = this.leads.indexOf(value, i + 1)) out.push(i)
    return out
  }
}

/** A chain's LeadingDestinations, kept on its rules array: it goes when the dump forgets the chain (forgetOneOffChains). */
const LEADS = Symbol('rules by leading destination')

/** A run of a chain's rule lines as a dump holds it: the line number of its first rule and its bytes (a copy). */
interface ChainSegment {
  firstLine: number
  bytes: Buffer
}

/**
 * Chains parsed by one node's dump, for the other nodes' dumps of a scan: kube-proxy programs a Service's KUBE-SVC
 * and KUBE-SEP chains alike on every node, so a chain whose rule lines are the same bytes at the same line numbers
 * is parsed once, and the rules (with what the tracer works out of them, kept on the rules) are shared. Only chains
 * asked for since the last forget are held: a scan forgets after each Service, as each dump does (forgetOneOffChains).
 */
export class SharedChainParses {
  private byChain = new Map<string, {segments: ChainSegment[]; parsed: ParsedRule[]}>()

  /**
   * The rules parsed for `key` (table and chain) from the same segments as `eachSegment` gives, else undefined; and
   * the segments (copies: a segment alike the held one's is that one, so a hit copies no bytes).
   */
  find(
    key: string,
    eachSegment: (each: (bytes: Buffer, firstLine: number) => void) => void,
  ): {parsed: ParsedRule[] | undefined; segments: ChainSegment[]} {
    const held = this.byChain.get(key)
    const segments: ChainSegment[] = []
    let alike = held !== undefined
    eachSegment((bytes, firstLine) => {
      const kept = alike ? held!.segments[segments.length] : undefined
      if (kept !== undefined && kept.firstLine === firstLine && kept.bytes.equals(bytes)) segments.push(kept)
      else {
        alike = false
        segments.push({firstLine, bytes: Buffer.from(bytes)})
      }
    })
    return {parsed: alike && held!.segments.length === segments.length ? held!.parsed : undefined, segments}
  }

  /** Holds a chain's rules as parsed from `segments` (the first dump's parse of a name is the one kept). */
  add(key: string, segments: ChainSegment[], parsed: ParsedRule[]): void {
    if (!this.byChain.has(key)) this.byChain.set(key, {segments, parsed})
  }

  forget(): void {
    // A fresh map rather than a cleared one: see IptablesSave.parsedSinceForget.
    if (this.byChain.size > 0) this.byChain = new Map()
  }
}

export interface RawRule {
  table: string
  chain: string
  line: number
  text: string
}

const POLICIES = ['-', 'ACCEPT', 'DROP', 'RETURN', 'QUEUE']
/** Longest line read; iptables-save lines are far shorter, so a longer one is not a dump (or a corrupt one). */
const UNSUPPORTED_REVISION = '[unsupported revision]'
const MAX_LINE_BYTES = 1 << 20

export interface IptablesParseOptions {
  /** Refuse a dump with no table at all (what a failed `ssh node sudo iptables-save` pipes in). */
  requireTables?: boolean
  /**
   * A last table that ends without COMMIT is read as cut there (a paste copied short), not refused: its chains whose
   * rules may come after the cut are open-ended (see openEnd). A node's own dump cut short is still refused.
   */
  acceptCut?: boolean
  /**
   * A node's own read (iptables-save, or the doctor's chain-by-chain read): a chain with rules but no declaration line
   * is refused, never read as a fragment (grep output or a cut copy is only ever pasted), and so is a #kpd-not-read
   * mark (the read was not made: a recording never holds one beside a dump).
   */
  nodeRead?: boolean
}

/** Where a table of a paste was cut: its name and the chain of its last rule (undefined when it had none). */
export interface CutTable {
  table: string
  lastChain: string | undefined
}

/** The built-in chains of each table, as iptables-save always declares them. */
export const BUILT_IN_CHAINS: Record<string, readonly string[]> = {
  raw: ['PREROUTING', 'OUTPUT'],
  mangle: ['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING'],
  nat: ['PREROUTING', 'INPUT', 'OUTPUT', 'POSTROUTING'],
  filter: ['INPUT', 'FORWARD', 'OUTPUT'],
  security: ['INPUT', 'FORWARD', 'OUTPUT'],
}
const NL = 10
const CR = 13
const SPACE = 32

/** How a dump the doctor put together from `iptables -S CHAIN` reads begins (its backend follows, as iptables -V says it). */
export const CHAIN_BY_CHAIN_HEADER = '# Generated by kproxy-doctor from '

/**
 * An iptables-save dump (nat, filter, mangle, raw; legacy or nft backend), indexed in one streaming pass.
 * Rule text stays in the source; a chain's rules are read and parsed only when asked for.
 */
export class IptablesSave {
  private readonly tables = new Map<string, ChainIndex>()
  private readonly tableOrder: string[] = []
  private readonly parsedCache = new Map<string, ParsedRule[]>()
  /**
   * Chains parsed since the last forgetOneOffChains, and every chain that call has seen (see there). A fresh map each
   * time rather than entries deleted from a long-lived one: V8 keeps a grown map's old table with its entries, and an
   * old table in the old generation would keep every Service's parsed chains alive through young collections.
   */
  private parsedSinceForget = new Map<string, ParsedRule[]>()
  private readonly seenByForget = new Set<string>()
  /** "legacy" or "nft", from the "# Generated by iptables-nft-save" header when present. */
  backend: 'legacy' | 'nft' | 'unknown' = 'unknown'
  lineCount = 0

  private constructor(readonly source: DumpSource) {}

  static parse(source: DumpSource, opts: IptablesParseOptions = {}): IptablesSave {
    const dump = new IptablesSave(source)
    dump.index(opts.acceptCut === true)
    if (opts.requireTables && dump.tableOrder.length === 0)
      throw new ParseError(
        0,
        source.size === 0
          ? 'the input is empty: no iptables-save output was read'
          : 'no "*table" line: not iptables-save output',
      )
    if (opts.nodeRead) {
      const mark = dump.notReadAt && notReadMark(dump.notReadAt.text)
      if (mark)
        throw new ParseError(
          dump.notReadAt!.line,
          `a #kpd-not-read mark: ${mark.command} was not read (${mark.code === null ? 'no exit status' : `exit ${mark.code}`}${mark.stderr ? `: ${mark.stderr}` : ''})`,
        )
      dump.refuseUndeclared()
    }
    return dump
  }

  /** The first #kpd-not-read line of the input (see IptablesParseOptions.nodeRead). */
  private notReadAt: {line: number; text: string} | undefined

  /** Refuses a chain with rules but no declaration line (see IptablesParseOptions.nodeRead), naming its first rule. */
  private refuseUndeclared(): void {
    for (const table of this.tableOrder) {
      const t = this.tables.get(table)!
      if (!t.hasUndeclared()) continue
      for (const id of t.ids())
        if (!t.declared(id))
          throw new ParseError(
            t.segments(id)[0]?.firstLine ?? 0,
            `chain ${t.name(id)} of table ${table} has rules but no ":${t.name(id)}" declaration: iptables-save declares every chain (a cut or edited copy?)`,
          )
    }
  }

  /** The file the dump was read from (a node's iptables-save.txt): a rule's parse error names it with its line. */
  file: string | undefined

  private addressFamilyCache: 4 | 6 | undefined | null = null

  /** The family of the addresses the rules name (4 for iptables-save, 6 for ip6tables-save); undefined when none do. */
  addressFamily(): 4 | 6 | undefined {
    if (this.addressFamilyCache !== null) return this.addressFamilyCache
    let found: 4 | 6 | undefined
    outer: for (const table of this.tableOrder) {
      const t = this.tables.get(table)!
      for (const id of t.ids()) {
        for (const seg of t.segments(id)) {
          // A segment holds whole rule lines, each starting "-A": no match runs from one line into the next.
          const m = ADDRESS_IN_RULE.exec(this.source.read(seg.start, seg.end).toString('latin1'))
          if (m) {
            found = m[1].includes(':') && !/^\d+\.\d+\.\d+\.\d+:/.test(m[1]) ? 6 : 4
            break outer
          }
        }
      }
    }
    this.addressFamilyCache = found
    return found
  }

  tableNames(): string[] {
    return [...this.tableOrder]
  }

  hasTable(table: string): boolean {
    return this.tables.has(table)
  }

  hasChain(table: string, chain: string): boolean {
    const t = this.tables.get(table)
    return t !== undefined && t.find(chain) !== NOT_FOUND
  }

  /** ACCEPT/DROP for built-in chains, '-' for user chains, undefined when the chain is absent. */
  policy(table: string, chain: string): string | undefined {
    const t = this.tables.get(table)
    const id = t?.find(chain) ?? NOT_FOUND
    if (!t || id === NOT_FOUND) return undefined
    return POLICIES[t.policy(id)] ?? '-'
  }

  ruleCount(table: string, chain: string): number {
    const t = this.tables.get(table)
    const id = t?.find(chain) ?? NOT_FOUND
    return !t || id === NOT_FOUND ? 0 : t.ruleCount(id)
  }

  chainNames(table: string): string[] {
    const t = this.tables.get(table)
    if (!t) return []
    return [...t.ids()].map((id) => t.name(id))
  }

  /** The chains of a table whose names begin with `prefix` (a dump of 550,000 chains makes no string for the others). */
  chainNamesStartingWith(table: string, prefix: string): string[] {
    const t = this.tables.get(table)
    if (!t) return []
    return t.idsStartingWith(prefix).map((id) => t.name(id))
  }

  rawRules(table: string, chain: string): RawRule[] {
    const t = this.tables.get(table)
    const id = t?.find(chain) ?? NOT_FOUND
    if (!t || id === NOT_FOUND) return []
    const out: RawRule[] = []
    this.eachSegment(t, id, (bytes, firstLine) => {
      const text = bytes.toString('latin1')
      let line = firstLine
      for (const l of text.split('\n')) {
        const trimmed = l.endsWith('\r') ? l.slice(0, -1) : l
        if (trimmed.length === 0) continue
        out.push({table, chain, line: line++, text: trimmed})
      }
    })
    return out
  }

  rules(table: string, chain: string): ParsedRule[] {
    const key = `${table}\0${chain}`
    const cached = this.parsedCache.get(key) ?? this.parsedSinceForget.get(key)
    if (cached) return cached
    const t = this.tables.get(table)
    const id = t?.find(chain) ?? NOT_FOUND
    let parsed: ParsedRule[] = []
    if (t && id !== NOT_FOUND) {
      // Every rule is parsed here (a broken one is refused now, naming its line), but a long chain keeps only what
      // its callers scan it for (text, target) and parses a rule again when one reads the rest. There a rule of
      // kube-proxy's usual shape (serviceRuleTarget) is not tokenized at all: its shape proves that it parses.
      const lazy = t.ruleCount(id) > LAZY_CHAIN_RULES
      if (this.sharedParses && !lazy) {
        const {parsed: shared, segments} = this.sharedParses.find(key, (each) => this.eachSegment(t, id, each))
        if (shared) parsed = shared
        else {
          for (const {bytes, firstLine} of segments) this.parseSegment(table, chain, false, bytes, firstLine, parsed)
          this.sharedParses.add(key, segments, parsed)
        }
      } else
        this.eachSegment(t, id, (bytes, firstLine) => this.parseSegment(table, chain, lazy, bytes, firstLine, parsed))
    }
    this.parsedSinceForget.set(key, parsed)
    return parsed
  }

  /** Parses one segment's rule lines into `parsed`, as rawRules reads them, without an object per line on the way. */
  private parseSegment(
    table: string,
    chain: string,
    lazy: boolean,
    bytes: Buffer,
    firstLine: number,
    parsed: ParsedRule[],
  ): void {
    const text = bytes.toString('latin1')
    // Where the -d value of a rule of that shape starts: after "-A CHAIN -d ".
    const leadAt = 3 + chain.length + 4
    let line = firstLine
    let pos = 0
    while (pos < text.length) {
      let nl = text.indexOf('\n', pos)
      if (nl < 0) nl = text.length
      const e = nl > pos && text.charCodeAt(nl - 1) === 13 ? nl - 1 : nl
      if (e > pos) {
        const ruleText = text.slice(pos, e)
        // A rule of kube-proxy's usual shape is known to parse (see serviceRuleTarget): its target is read in place.
        const target = lazy ? serviceRuleTarget(ruleText) : undefined
        if (target !== undefined) parsed.push(new LazyRule(table, line, ruleText, target, false, leadAt))
        else {
          const rule = parseLine(table, chain, line, ruleText, this.file)
          parsed.push(
            lazy && rule.unparsable === undefined
              ? new LazyRule(table, line, ruleText, rule.target, rule.isGoto)
              : rule,
          )
        }
        line++
      }
      pos = nl + 1
    }
  }

  /**
   * The pool of parsed chains this dump shares with other nodes' dumps (a scan's: see SharedChainParses); kept for
   * the dump's life. A chain the pool holds with the same bytes at the same lines is not parsed again.
   */
  private sharedParses: SharedChainParses | undefined

  shareParses(pool: SharedChainParses): void {
    this.sharedParses ??= pool
  }

  sharesParses(): boolean {
    return this.sharedParses !== undefined
  }

  /**
   * The chain's rules by the -d they open with (see LeadingDestinations), made on the first ask for the rules parsed
   * now and shared by every later one (the model's lookup of a Service's rules in KUBE-SERVICES and the tracer's skip
   * over other Services' rules read the same index).
   */
  rulesByLeadingDestination(table: string, chain: string): LeadingDestinations {
    const rules = this.rules(table, chain) as ParsedRule[] & {[LEADS]?: LeadingDestinations}
    let index = rules[LEADS]
    if (!index) {
      index = new LeadingDestinations()
      for (let i = 0; i < rules.length; i++) {
        const rule = rules[i]
        const lead =
          rule instanceof LazyRule && rule.leadAt >= 0
            ? rule.text.slice(rule.leadAt, rule.text.indexOf(' ', rule.leadAt))
            : rule.unparsable === undefined
              ? leadingDestination(rule.text)
              : undefined
        index.leads.push(lead)
        if (lead === undefined) index.unled.push(i)
      }
      rules[LEADS] = index
    }
    return index
  }

  /** Whether some rule of the chain holds `text` (a native search in its bytes; no string or object per rule). */
  chainHolds(table: string, chain: string, text: string): boolean {
    const t = this.tables.get(table)
    const id = t?.find(chain) ?? NOT_FOUND
    if (!t || id === NOT_FOUND) return false
    const needle = Buffer.from(text, 'latin1')
    let found = false
    this.eachSegment(t, id, (bytes) => {
      found ||= bytes.indexOf(needle) >= 0
    })
    return found
  }

  /**
   * Calls `each` with the bytes of each of the chain's segments (runs of consecutive rule lines), in order, valid only
   * during the call. Segments are read through a window of the source: a chain whose rules are spread over the dump in
   * many short runs (KUBE-SERVICES when its rules come between each Service's chains: 50,000 runs of one line) costs a
   * few large reads instead of a read and a buffer per run.
   */
  private windowBuffer: Buffer | undefined

  private eachSegment(t: ChainIndex, id: number, each: (bytes: Buffer, firstLine: number) => void): void {
    const segments = t.segments(id)
    let window: Buffer | undefined
    let windowStart = 0
    for (const seg of segments) {
      if (segments.length < SEGMENTS_READ_ONE_BY_ONE || seg.end - seg.start > SEGMENT_WINDOW_BYTES) {
        each(this.source.read(seg.start, seg.end), seg.firstLine)
        continue
      }
      if (!window || seg.start < windowStart || seg.end > windowStart + window.length) {
        // One buffer for every window (a fresh one each time cost more, in page faults, than the reads).
        this.windowBuffer ??= Buffer.allocUnsafeSlow(Math.min(this.source.size, SEGMENT_WINDOW_BYTES))
        windowStart = seg.start
        window = this.windowBuffer.subarray(0, this.source.readInto(this.windowBuffer, seg.start))
      }
      // A source that shrank since it was indexed ends the window early: the segment is read as it is (short) now.
      if (seg.end > windowStart + window.length) each(this.source.read(seg.start, seg.end), seg.firstLine)
      else each(window.subarray(seg.start - windowStart, seg.end - windowStart), seg.firstLine)
    }
  }

  /**
   * Drops the parsed rules of chains asked for once since the last call and never before (a scan's per-Service
   * chains: KUBE-SVC-*, KUBE-SEP-* of the Service just judged), keeping those asked for again later (KUBE-SERVICES and
   * the other chains every Service walks). A scan calls it after each Service, so its memory stays that of the shared
   * chains instead of growing with every Service's; a dropped chain is parsed again if asked for.
   */
  forgetOneOffChains(): void {
    this.forgets++
    for (const [key, parsed] of this.parsedSinceForget) {
      if (this.seenByForget.has(key)) this.parsedCache.set(key, parsed)
      else this.seenByForget.add(key)
    }
    this.parsedSinceForget = new Map()
    this.sharedParses?.forget()
  }

  /**
   * How many times forgetOneOffChains has run: rules a reader keeps from rules() are the dump's own until it changes
   * (a scan's tracers share a dump's chains for one Service).
   */
  forgets = 0

  close(): void {
    this.source.close()
  }

  /** Whether the doctor read these rules chain by chain (only the chains a Service's packets reach; see readScopedRules). */
  readChainByChain(): boolean {
    return (
      this.source.size > CHAIN_BY_CHAIN_HEADER.length &&
      this.source.read(0, CHAIN_BY_CHAIN_HEADER.length).toString('latin1') === CHAIN_BY_CHAIN_HEADER
    )
  }

  /** The table the input was cut in (a paste that ends without its last COMMIT, read with acceptCut). */
  cut: CutTable | undefined

  /** Whether a declaration line named the chain (a chain with rules but none comes from grep output or a cut copy). */
  declared(table: string, chain: string): boolean {
    const t = this.tables.get(table)
    const id = t?.find(chain) ?? NOT_FOUND
    return t !== undefined && id !== NOT_FOUND && t.declared(id)
  }

  /**
   * Whether the input is known to hold only part of the node's rules: a chain with rules but no declaration, a table
   * without its built-in chains, a table cut short. The doctor's own chain-by-chain read is partial by design and
   * holds every chain a Service's packets reach, so it is never a fragment.
   */
  isFragment(): boolean {
    return (this.fragmentCache ??=
      !this.readChainByChain() &&
      (this.cut !== undefined ||
        this.tableOrder.some(
          (table) =>
            this.tables.get(table)!.hasUndeclared() ||
            (BUILT_IN_CHAINS[table] ?? []).some((c) => !this.hasChain(table, c)),
        )))
  }

  private fragmentCache: boolean | undefined

  /**
   * Why the walk cannot know what happens after the last rule of this chain in this input (undefined: it can): its
   * declaration is missing (a grep keeps only the lines it matched), or the table is cut where its rules may go on.
   * iptables-save prints each chain's rules in the order it declared the chains, so in a cut table the chain of the
   * last rule and the empty chains declared after it may have lost rules; the chains before it are whole.
   */
  openEnd(table: string, chain: string): string | undefined {
    if (!this.isFragment()) return undefined
    const t = this.tables.get(table)
    const id = t?.find(chain) ?? NOT_FOUND
    if (!t || id === NOT_FOUND) return undefined
    const whole = `paste \`iptables-save -t ${table}\` whole`
    if (!t.declared(id))
      return `${table}/${chain} is not declared in this input (no ":${chain}" line: grep output or a cut copy), so its other rules${BUILT_IN_CHAINS[table]?.includes(chain) ? ' and its policy' : ''} are not known; ${whole}`
    const cut = this.cut
    if (cut?.table === table) {
      const last = cut.lastChain === undefined ? -1 : t.find(cut.lastChain)
      if (id === last || (id > last && t.ruleCount(id) === 0))
        return `table ${table} is cut short in this input${cut.lastChain ? ` (its last rule is on ${cut.lastChain})` : ''}: the rest of ${chain}'s rules may have been after the cut; ${whole}`
    }
    return undefined
  }

  private index(acceptCut: boolean): void {
    let scan: IndexScan
    try {
      scan = this.scan(acceptCut, true)
    } catch (e) {
      if (!(e instanceof DeclaredTwice)) throw e
      // A chain declared twice (a hand-edited or concatenated dump), found without its line: read again, every name
      // looked up as it comes, which refuses the second declaration naming its line.
      this.tables.clear()
      this.tableOrder.length = 0
      scan = this.scan(acceptCut, false)
    }
    if (scan.backend !== 'unknown') this.backend = scan.backend
    this.notReadAt = scan.notReadAt
    // An empty dump (no tables at all) is what a node without iptables rules prints, e.g. one in nftables mode.
    this.lineCount = scan.lineNo
  }

  /** One pass over the dump; `inOrder`: each table is first read as iptables-save prints it (see ChainIndex.ordered). */
  private scan(acceptCut: boolean, inOrder: boolean): IndexScan {
    const scan = new IndexScan(this.tables, this.tableOrder, Math.ceil(this.source.size / 256), inOrder)
    this.source.chunks((chunk, base) => scan.chunk(chunk, base))
    this.cut = scan.end(this.source.size, acceptCut)
    for (const table of this.tables.values()) table.finishOrdered()
    return scan
  }
}

/** How much of the source one read of a chain's segments takes at most (see eachSegment). */
const SEGMENT_WINDOW_BYTES = 4 << 20
/** A chain of fewer segments than this is read a segment at a time (a whole dump's chains have one or two). */
const SEGMENTS_READ_ONE_BY_ONE = 16

const ADDRESS_IN_RULE = / (?:-[sd]|--to-destination) !?\s*([0-9a-fA-F:.[\]]+)/

/** Chains with more rules than this are kept as LazyRules (KUBE-SERVICES of a big cluster: tens of thousands). */
const LAZY_CHAIN_RULES = 256

/**
 * A rule of a long chain, parsed once or of serviceRuleTarget's shape (so known to parse): keeps its text and target, and parses again
 * (once) when its matches or target options are read, which for a long chain is for the few rules a caller looks at.
 */
class LazyRule implements ParsedRule {
  private parsed: ParsedRule | undefined
  constructor(
    readonly table: string,
    readonly line: number,
    readonly text: string,
    readonly target: string | undefined,
    readonly isGoto: boolean,
    /** Where the value of the -d it opens with starts, for a rule of serviceRuleTarget's shape (else -1). */
    readonly leadAt = -1,
  ) {}

  get chain(): string {
    return this.full().chain
  }

  get matches(): ParsedRule['matches'] {
    return this.full().matches
  }

  get targetOptions(): ParsedRule['targetOptions'] {
    return this.full().targetOptions
  }

  get unparsable(): string | undefined {
    return undefined
  }

  private full(): ParsedRule {
    return (this.parsed ??= parseRule(this.table, this.line, this.text))
  }
}

function parseLine(table: string, chain: string, line: number, text: string, file?: string): ParsedRule {
  // iptables-nft prints a rule whose match revision it does not know with this marker: the rule is real, only
  // unreadable here, so only the branches that reach it are UNKNOWN. Any other broken line is a broken dump.
  if (text.includes(UNSUPPORTED_REVISION))
    return {
      table,
      chain,
      line,
      text,
      matches: [],
      isGoto: false,
      targetOptions: [],
      unparsable: `iptables-nft printed it as ${UNSUPPORTED_REVISION}`,
    }
  try {
    return parseRule(table, line, text)
  } catch (e) {
    throw new ParseError(line, (e as Error).message, {what: file, cause: e})
  }
}

const NOT_READ_PREFIX = Buffer.from('#kpd-not-read ', 'latin1')
/** A second rule run together on one line always holds this; the exact check (findRunTogether) runs only where it does. */
const RUN_TOGETHER_HINT = Buffer.from(' -A', 'latin1')
const POLICY_BYTES = POLICIES.map((p) => Buffer.from(p, 'latin1'))

/** How many declarations and runs of rules IndexScan gathers before it looks their chains up together. */
const BATCH = 512
const DECLARATION = 0
const RULES = 1

/**
 * The one pass over a dump's bytes that indexes it: every line is checked (what it is, its length, a second rule run
 * into it), but a rule line costs no string and no object: a line naming the chain of the rule line right before it
 * extends that run of rules; any other line's chain name is hashed. Declarations and runs are then looked up in the
 * chain index a batch at a time (see ChainIndex.idsFromHashed), in the order of their lines.
 */
class IndexScan {
  lineNo = 0
  backend: 'legacy' | 'nft' | 'unknown' = 'unknown'
  /** The first #kpd-not-read line (see IptablesParseOptions.nodeRead). */
  notReadAt: {line: number; text: string} | undefined
  private table: ChainIndex | undefined
  private tableName = ''
  private tableLine = 0
  /** The line of each table's "*table" line. */
  private readonly tableLines = new Map<string, number>()
  /** The previous rule line's chain in `table` (-1: none), once its batch is looked up. */
  private lastId = -1
  /** Declarations and runs of rules not yet looked up, their names in `batchBuf`; `batchLength` of them. */
  private batchBuf: Buffer | undefined
  private batchLength = 0
  private readonly kind = new Uint8Array(BATCH)
  private readonly nameStarts = new Uint32Array(BATCH)
  private readonly nameEnds = new Uint32Array(BATCH)
  private readonly hashes = new Int32Array(BATCH)
  private readonly ids = new Int32Array(BATCH)
  /** A declaration's policy code and line; a run's first line, the count of its lines, and its bytes in the dump. */
  private readonly policies = new Uint8Array(BATCH)
  private readonly firstLines = new Uint32Array(BATCH)
  private readonly counts = new Uint32Array(BATCH)
  private readonly runStarts = new Float64Array(BATCH)
  private readonly runEnds = new Float64Array(BATCH)
  /**
   * While the table is read in order and no batch waits: the run of rules being read (its chain, -1 for none; its
   * bytes in the dump, first line and count), recorded when the next run starts or a batch is flushed. Such a run's
   * lines are compared with its chain's stored name, and a new run with the next declared chain's, in place: no
   * batch entry, no scan for the name's end, no second comparison in flush.
   */
  private runId = -1
  private runStart = 0
  private runEnd = 0
  private runFirstLine = 0
  private runCount = 0
  /** A line that began in the previous chunk. */
  private carry: Buffer | undefined
  /** In `hintBuf`: where RUN_TOGETHER_HINT occurs next at or after the last position asked for; -1 for nowhere. */
  private hintBuf: Buffer | undefined
  private hintAt = -1

  constructor(
    private readonly tables: Map<string, ChainIndex>,
    private readonly tableOrder: string[],
    /** Room each table reserves up front (kube-proxy dumps hold a chain per ~300 bytes). */
    private readonly expectedChains: number,
    /** Each table is first read in iptables-save's order, without lookups (see ChainIndex.ordered). */
    private readonly inOrder: boolean,
  ) {}

  chunk(chunk: Buffer, base: number): void {
    let pos = 0
    if (this.carry) {
      const nl = chunk.indexOf(NL)
      if (nl < 0) {
        this.carry = Buffer.concat([this.carry, chunk])
        // A line already over the cap is refused now, not after reading the rest of it.
        if (this.carry.length > MAX_LINE_BYTES)
          throw new ParseError(this.lineNo + 1, `line longer than ${MAX_LINE_BYTES} bytes: not iptables-save output`)
        return
      }
      const line = Buffer.concat([this.carry, chunk.subarray(0, nl + 1)])
      this.carry = undefined
      this.line(line, 0, line.length - 1, base - (line.length - nl - 1), base + nl + 1)
      this.flush()
      pos = nl + 1
    }
    for (;;) {
      const nl = chunk.indexOf(NL, pos)
      if (nl < 0) break
      this.line(chunk, pos, nl, base + pos, base + nl + 1)
      pos = nl + 1
    }
    // The chunk's buffer is reused for the next: the names in it are looked up now.
    this.flush()
    if (pos < chunk.length) {
      this.carry = Buffer.from(chunk.subarray(pos))
      if (this.carry.length > MAX_LINE_BYTES)
        throw new ParseError(this.lineNo + 1, `line longer than ${MAX_LINE_BYTES} bytes: not iptables-save output`)
    }
  }

  /** The end of the input; the table it cuts when acceptCut (else a table without COMMIT is refused). */
  end(size: number, acceptCut: boolean): CutTable | undefined {
    const b = this.carry
    if (b && b.length > 0) this.line(b, 0, b.length, size - b.length, size)
    this.flush()
    this.carry = undefined
    if (this.table && acceptCut)
      return {table: this.tableName, lastChain: this.lastId >= 0 ? this.table.name(this.lastId) : undefined}
    if (this.table)
      throw new ParseError(
        this.lineNo,
        `table ${this.tableName} (line ${this.tableLine}) never ends with COMMIT: the dump is cut off`,
      )
    return undefined
  }

  /** The line buf[start, end) (end: its newline, or the end of the dump), at fileOffset; the next line starts at nextOffset. */
  private line(buf: Buffer, start: number, end: number, fileOffset: number, nextOffset: number): void {
    const lineNo = ++this.lineNo
    if (end - start > MAX_LINE_BYTES)
      throw new ParseError(lineNo, `line longer than ${MAX_LINE_BYTES} bytes: not iptables-save output`)
    let e = end
    if (e > start && buf[e - 1] === CR) e--
    if (e === start) return
    const c = buf[start]
    if (c === 0x2d /* - */) this.rule(buf, start, e, fileOffset, nextOffset, lineNo)
    else if (c === 0x3a /* : */) this.declaration(buf, start, e, lineNo)
    else if (c === 0x2a /* * */) {
      this.flush()
      if (this.table)
        throw new ParseError(
          lineNo,
          `table ${this.tableName} (line ${this.tableLine}) has no COMMIT before the next "*table" line: cut-off dump?`,
        )
      this.tableName = buf.toString('latin1', start + 1, e).trim()
      this.tableLine = lineNo
      if (!/^[a-z_]+$/.test(this.tableName)) throw new ParseError(lineNo, `bad table name "${this.tableName}"`)
      // iptables-save prints each table once: a table named again is a second dump run into the first.
      const first = this.tableLines.get(this.tableName)
      if (first !== undefined)
        throw new ParseError(
          lineNo,
          `table ${this.tableName} begins again (first on line ${first}): iptables-save prints each table once (two dumps run together?)`,
        )
      this.tableLines.set(this.tableName, lineNo)
      const table = new ChainIndex(this.expectedChains, this.inOrder)
      this.tables.set(this.tableName, table)
      this.tableOrder.push(this.tableName)
      this.table = table
      this.lastId = this.runId = -1
    } else if (c === 0x23 /* # */) {
      if (this.backend === 'unknown') {
        this.backend = backendNamedBy(buf.toString('latin1', start, Math.min(e, start + 120))) ?? 'unknown'
      }
      if (this.notReadAt === undefined && buf.subarray(start, e).indexOf(NOT_READ_PREFIX) === 0)
        this.notReadAt = {line: lineNo, text: buf.toString('utf8', start, Math.min(e, start + 500))}
    } else if (c === 0x43 /* C */ && buf.toString('latin1', start, e).trim() === 'COMMIT') {
      if (!this.table)
        throw new ParseError(lineNo, 'COMMIT outside a table (no "*table" line before it since the last COMMIT)')
      this.flush()
      this.table = undefined
      this.lastId = this.runId = -1
    } else {
      throw new ParseError(lineNo, `not iptables-save output: "${clip(buf, start, e)}"`)
    }
  }

  private rule(buf: Buffer, start: number, e: number, fileOffset: number, nextOffset: number, lineNo: number): void {
    if (buf[start + 1] !== 0x41 /* A */ || buf[start + 2] !== SPACE)
      throw new ParseError(lineNo, `expected "-A CHAIN ..." but found "${clip(buf, start, e)}"`)
    if (!this.table) throw new ParseError(lineNo, 'rule before any "*table" line')
    const nameStart = start + 3
    let nameEnd = this.runInOrder(buf, nameStart, e, fileOffset, nextOffset, lineNo)
    if (nameEnd >= 0) {
      // Read in order: the run went on or a new one began (see runId).
    } else if ((nameEnd = this.sameRun(buf, nameStart, e, fileOffset)) >= 0) {
      // Most lines name the chain of the rule line right before them (iptables-save prints a chain's rules together).
      const b = this.batchLength - 1
      this.runEnds[b] = nextOffset
      this.counts[b]++
    } else {
      nameEnd = nameStart
      while (nameEnd < e && buf[nameEnd] !== SPACE) nameEnd++
      const b = this.push(buf, RULES, nameStart, nameEnd)
      this.firstLines[b] = lineNo
      this.counts[b] = 1
      this.runStarts[b] = fileOffset
      this.runEnds[b] = nextOffset
    }
    if (this.hintBefore(buf, nameEnd - 1, e)) {
      const runTogether = findRunTogether(buf, nameEnd, e)
      if (runTogether >= 0)
        throw new ParseError(
          lineNo,
          `two rules run together on one line (a second "-A" at column ${runTogether - start + 1}); iptables-restore would refuse it`,
        )
    }
  }

  /**
   * While the table is read in order and no batch waits: the end of the chain name at nameStart when the line continues
   * the run being read, or begins a run of its chain or of the next declared chain (the run being read is then recorded
   * and this one begun); else -1 (the line is batched, as any other).
   */
  private runInOrder(
    buf: Buffer,
    nameStart: number,
    e: number,
    fileOffset: number,
    nextOffset: number,
    lineNo: number,
  ): number {
    if (this.batchLength > 0) return -1
    const table = this.table!
    if (this.runId >= 0 && this.runEnd === fileOffset) {
      const nameEnd = table.nameEndAt(this.runId, buf, nameStart, e)
      if (nameEnd >= 0) {
        this.runEnd = nextOffset
        this.runCount++
        return nameEnd
      }
    }
    let id = table.nextRunChain(buf, nameStart, e)
    if (id < 0) {
      // Declared chains without rules are skipped (ruleChainInOrder); a name out of order leaves the order, and the
      // line is batched and looked up by hash.
      if (!table.readsInOrder()) return -1
      let nameEnd = nameStart
      while (nameEnd < e && buf[nameEnd] !== SPACE) nameEnd++
      id = table.ruleChainInOrder(buf, nameStart, nameEnd)
      if (id < 0) return -1
    }
    this.recordRun()
    this.runId = this.lastId = id
    this.runStart = fileOffset
    this.runEnd = nextOffset
    this.runFirstLine = lineNo
    this.runCount = 1
    return nameStart + table.nameLength(id)
  }

  /** Records the run of rules read in order (see runId), if any, before anything else reaches the table. */
  private recordRun(): void {
    if (this.runCount === 0) return
    this.table!.addRules(this.runId, this.runStart, this.runEnd, this.runFirstLine, this.runCount)
    // The run may go on (in the next chunk): its next lines are added after these.
    this.runStart = this.runEnd
    this.runFirstLine += this.runCount
    this.runCount = 0
  }

  /** The end of the chain name at nameStart when the line continues the run of rules batched last (else -1). */
  private sameRun(buf: Buffer, nameStart: number, e: number, fileOffset: number): number {
    const b = this.batchLength - 1
    if (b < 0 || this.kind[b] !== RULES || this.runEnds[b] !== fileOffset || this.batchBuf !== buf) return -1
    const runName = this.nameStarts[b]
    const nameEnd = nameStart + this.nameEnds[b] - runName
    if (nameEnd > e || (nameEnd < e && buf[nameEnd] !== SPACE)) return -1
    for (let i = nameStart, j = runName; i < nameEnd; i++, j++) if (buf[i] !== buf[j]) return -1
    return nameEnd
  }

  /** Adds a declaration or a run of rules, named by buf[nameStart, nameEnd), to the batch; returns its place there. */
  private push(buf: Buffer, kind: number, nameStart: number, nameEnd: number): number {
    this.recordRun()
    if (this.batchLength === BATCH || (this.batchBuf !== buf && this.batchLength > 0)) this.flush()
    const b = this.batchLength++
    this.batchBuf = buf
    this.kind[b] = kind
    this.nameStarts[b] = nameStart
    this.nameEnds[b] = nameEnd
    return b
  }

  /**
   * Finds the batch's chains (in order while the table is read in order, else by hash, adding new ones) and records
   * its declarations and rules, in the order of the lines.
   */
  private flush(): void {
    this.recordRun()
    const n = this.batchLength
    if (n === 0) return
    const table = this.table!
    const buf = this.batchBuf!
    let b = 0
    for (; b < n; b++) {
      const id =
        this.kind[b] === DECLARATION
          ? table.declareInOrder(buf, this.nameStarts[b], this.nameEnds[b], this.hashes[b], this.policies[b])
          : table.ruleChainInOrder(buf, this.nameStarts[b], this.nameEnds[b])
      if (id < 0) break
      if (this.kind[b] === RULES) {
        table.addRules(id, this.runStarts[b], this.runEnds[b], this.firstLines[b], this.counts[b])
        this.lastId = id
      }
    }
    if (b < n) this.flushHashed(table, buf, b, n)
    this.batchLength = 0
    this.batchBuf = undefined
  }

  /** The batch's entries from `from` on, looked up by hash a batch at a time (see ChainIndex.idsFromHashed). */
  private flushHashed(table: ChainIndex, buf: Buffer, from: number, n: number): void {
    const ids = this.ids
    // A declaration's name was hashed as it was read (declareInOrder keeps the hash); a run's only now.
    for (let b = from; b < n; b++)
      if (this.kind[b] === RULES) this.hashes[b] = nameHash(buf, this.nameStarts[b], this.nameEnds[b])
    table.idsFromHashed(buf, this.nameStarts, this.nameEnds, this.hashes, from, n, ids)
    for (let b = from; b < n; b++) {
      if (this.kind[b] === DECLARATION) {
        if (table.declared(ids[b]))
          throw new ParseError(
            this.firstLines[b],
            `chain ${table.name(ids[b])} is declared twice in table ${this.tableName}: iptables-save declares each chain once (two dumps run together?)`,
          )
        table.declare(ids[b], this.policies[b])
      } else {
        table.addRules(ids[b], this.runStarts[b], this.runEnds[b], this.firstLines[b], this.counts[b])
        this.lastId = ids[b]
      }
    }
  }

  private declaration(buf: Buffer, start: number, e: number, lineNo: number): void {
    const table = this.table
    if (!table) throw new ParseError(lineNo, 'chain declaration before any "*table" line')
    // Read in order, no rule yet, no batch waiting: appended at once, its name copied and hashed in one pass.
    if (this.batchLength === 0 && table.takesDeclarations()) {
      const id = table.declareNextInOrder(buf, start + 1, e)
      const nameEnd = start + 1 + table.nameLength(id)
      table.declare(id, policyCode(buf, nameEnd + 1, Math.min(e, nameEnd + 8)))
      return
    }
    let h = FNV_OFFSET
    let nameEnd = start + 1
    while (nameEnd < e) {
      const c = buf[nameEnd]
      if (c === SPACE) break
      h = Math.imul(h ^ c, FNV_PRIME)
      nameEnd++
    }
    const policy = policyCode(buf, nameEnd + 1, Math.min(e, nameEnd + 8))
    // Read in order after a rule, with no batch waiting: declareInOrder leaves the order (the line is then batched).
    if (this.batchLength === 0) {
      this.recordRun()
      if (table.declareInOrder(buf, start + 1, nameEnd, h | 0, policy) >= 0) return
    }
    const b = this.push(buf, DECLARATION, start + 1, nameEnd)
    this.hashes[b] = h | 0
    this.policies[b] = policy
    this.firstLines[b] = lineNo
  }

  /** Whether RUN_TOGETHER_HINT starts in buf[from, end). Lines are asked for in order: the search resumes, never repeats. */
  private hintBefore(buf: Buffer, from: number, end: number): boolean {
    if (buf !== this.hintBuf) {
      this.hintBuf = buf
      // Searched backwards first, once per buffer: Node then looks for the needle's last byte, "A" (4.5M in the 50k
      // dump), not its first, a space (13.5M), about half the time; a buffer without it has no line to check.
      this.hintAt = buf.lastIndexOf(RUN_TOGETHER_HINT) < from ? -1 : buf.indexOf(RUN_TOGETHER_HINT, from)
    } else if (this.hintAt >= 0 && this.hintAt < from) this.hintAt = buf.indexOf(RUN_TOGETHER_HINT, from)
    return this.hintAt >= 0 && this.hintAt < end
  }
}

function sameBytes(buf: Buffer, start: number, name: Uint8Array, len: number): boolean {
  for (let i = 0; i < len; i++) if (buf[start + i] !== name[i]) return false
  return true
}

/** The policy of a chain declaration: the word at buf[start, end) up to a space, as an index of POLICIES (0 when none). */
function policyCode(buf: Buffer, start: number, end: number): number {
  let wordEnd = start
  while (wordEnd < end && buf[wordEnd] !== SPACE) wordEnd++
  const len = wordEnd - start
  for (let code = 0; code < POLICY_BYTES.length; code++) {
    const p = POLICY_BYTES[code]
    if (p.length === len && sameBytes(buf, start, p, len)) return code
  }
  return 0
}

/** Where a second " -A " or " --append " starts outside quotes in buf[from, end), or -1. */
function findRunTogether(buf: Buffer, from: number, end: number): number {
  let quoted = false
  for (let i = from; i < end; i++) {
    const c = buf[i]
    if (c === 0x22 /* " */ && buf[i - 1] !== 0x5c /* \ */) quoted = !quoted
    else if (
      !quoted &&
      c === 0x2d &&
      buf[i - 1] === SPACE &&
      buf[i + 1] === 0x41 &&
      (buf[i + 2] === SPACE || i + 2 === end)
    )
      return i
  }
  return -1
}

function clip(buf: Buffer, start: number, end: number): string {
  const s = buf.toString('latin1', start, Math.min(end, start + 60))
  return end - start > 60 ? s + '…' : s
}

/**
 * The backend an iptables-save "# Generated by" line names ("iptables-nft-save v1.8.9", "iptables-save v1.8.9
 * (nf_tables)"), if any. Other comments say nothing of it: iptables-nft's "# Warning: iptables-legacy tables present,
 * use iptables-legacy-save to see them" names the other backend.
 */
export function backendNamedBy(comment: string): 'legacy' | 'nft' | undefined {
  if (!comment.startsWith('# Generated by')) return undefined
  if (/ip6?tables-nft-save|nf_tables/.test(comment)) return 'nft'
  if (/ip6?tables-(legacy-)?save|\(legacy\)/.test(comment)) return 'legacy'
  return undefined
}
