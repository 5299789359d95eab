import type {DumpSource} from './dump-source.js'
import {FNV_OFFSET, FNV_PRIME} from './chain-index.js'
import {nameHash, NftChainNames} from './nft-chain-names.js'
import {ParseError} from './parse-error.js'
import {IndexedSet} from './nft-lazy-sets.js'
import {baseOf, braceDelta, opensBlock, readChainBody, unquote} from './nft-statements.js'
import type {NftBase, NftChain, NftChains, NftTable} from './nft-types.js'

/**
 * `nft list ruleset` text indexed in one streaming pass over its bytes: tables, each chain's body as a byte range (typed
 * arrays, no object per chain), each set's and map's body checked (nft-lazy-sets.ts), base chains read at once.
 * A chain's rules are read, by the same statement reader, when something asks for the chain: a walk reaches a few of
 * a 50,000-Service ruleset's 550,000 chains.
 */

const isSpaceByte = (b: number) => b === 32 || (b >= 9 && b <= 13)

const enum Where {
  Top,
  Table,
  Chain,
  Set,
}

/** The bytes of "chain", "type". */
const CHAIN = [0x63, 0x68, 0x61, 0x69, 0x6e]
const TYPE = [0x74, 0x79, 0x70, 0x65]

/** The words that open a block (opensBlock), as bytes. */
const BLOCK_WORDS = ['table', 'chain', 'set', 'map'].map((w) => [...Buffer.from(w)])

/** opensBlock of the trimmed line [s, e). */
function opensBlockBytes(buf: Buffer, s: number, e: number): boolean {
  if (buf[e - 1] !== 0x7b) return false
  for (const w of BLOCK_WORDS) {
    if (!startsWith(buf, s, e, w) || s + w.length >= e) continue
    const next = buf[s + w.length]
    if (isSpaceByte(next)) return true
    // White space beyond ASCII after the word: as the regular expression knows it.
    if (next >= 0x80) return opensBlock(buf.toString('utf8', s, e))
  }
  return false
}

/** The index of the next `byte` in buf from `from`; buf.length when there is none. */
function nextOf(buf: Buffer, byte: number, from: number): number {
  const i = buf.indexOf(byte, from)
  return i < 0 ? buf.length : i
}

/** braceDelta of the line [s, e) (as bytes: a character beyond ASCII holds no quote or brace byte). */
function braceDeltaBytes(buf: Buffer, s: number, e: number): number {
  let d = 0
  let quoted = false
  for (let i = s; i < e; i++) {
    const b = buf[i]
    if (b === 0x22) quoted = !quoted
    else if (!quoted && b === 0x7b) d++
    else if (!quoted && b === 0x7d) d--
  }
  return d
}

function startsWith(buf: Uint8Array, at: number, end: number, word: number[]): boolean {
  if (end - at < word.length) return false
  for (let i = 0; i < word.length; i++) if (buf[at + i] !== word[i]) return false
  return true
}

/**
 * A table's chains: each header's declaration (NftChainNames: the name where it sits in the text), its body's byte
 * range and line; a chain is read when asked for. A name declared again keeps its first place and takes the last body,
 * as a Map's set does.
 */
class IndexedChains implements NftChains {
  private readonly names: NftChainNames
  private bodyStart: Uint32Array
  private bodyEnd: Uint32Array
  private bodyLine: Uint32Array
  private headerLine: Uint32Array
  private readonly baseDeclarations = new Map<number, NftBase>()
  private baseOrder?: number[]
  private readonly parsed = new Map<number, NftChain>()
  private readonly found = new Map<string, number>()

  constructor(
    private readonly table: string,
    private readonly source: DumpSource,
    expected: number,
  ) {
    this.names = new NftChainNames(source, expected)
    const n = Math.max(256, Math.min(1 << 22, expected))
    this.bodyStart = new Uint32Array(n)
    this.bodyEnd = new Uint32Array(n)
    this.bodyLine = new Uint32Array(n)
    this.headerLine = new Uint32Array(n)
  }

  /** A header whose name is the text's bytes [at, at + len) (`h`: their nameHash); its body starts at bodyStart. */
  declare(at: number, len: number, h: number, headerLine: number, bodyStart: number, bodyLine: number): number {
    return this.declared(this.names.declare(at, len, h), headerLine, bodyStart, bodyLine)
  }

  /** A header whose name was read as text. */
  declareName(name: string, headerLine: number, bodyStart: number, bodyLine: number): number {
    return this.declared(this.names.declareBytes(Buffer.from(name, 'utf8')), headerLine, bodyStart, bodyLine)
  }

  close(d: number, bodyEnd: number): void {
    this.bodyEnd[d] = bodyEnd
  }

  markBase(d: number, base: NftBase): void {
    this.baseDeclarations.set(d, base)
  }

  get size(): number {
    return this.names.declarations === 0 ? 0 : this.names.distinct().first.length
  }

  private declared(d: number, headerLine: number, bodyStart: number, bodyLine: number): number {
    if (d >= this.bodyStart.length) this.grow()
    this.headerLine[d] = headerLine
    this.bodyStart[d] = bodyStart
    this.bodyEnd[d] = bodyStart
    this.bodyLine[d] = bodyLine
    return d
  }

  /** The declaration of a chain asked for by name (-1: none); a walk asks for the same few names again and again. */
  private declarationOf(name: string): number {
    let d = this.found.get(name)
    if (d === undefined) {
      d = this.names.last(name)
      this.found.set(name, d)
    }
    return d
  }

  private chain(d: number): NftChain {
    let chain = this.parsed.get(d)
    if (!chain) {
      chain = {table: this.table, name: this.names.name(d), line: this.headerLine[d], rules: []}
      const text = this.source.read(this.bodyStart[d], this.bodyEnd[d]).toString('utf8')
      readChainBody(text, this.bodyLine[d], chain)
      this.parsed.set(d, chain)
    }
    return chain
  }

  get(name: string): NftChain | undefined {
    const d = this.declarationOf(name)
    return d < 0 ? undefined : this.chain(d)
  }

  has(name: string): boolean {
    return this.declarationOf(name) >= 0
  }

  /** The base chains (a name declared again is a base chain when its last declaration is), in their names' order. */
  bases(): NftChain[] {
    this.baseOrder ??= [...this.baseDeclarations.keys()]
      .filter((d) => this.names.isLast(d))
      .map((d) => ({d, place: this.names.first(d)}))
      .sort((a, b) => a.place - b.place)
      .map((b) => b.d)
    return this.baseOrder.map((d) => this.chain(d))
  }

  *keys(): MapIterator<string> {
    for (const d of this.names.distinct().first) yield this.names.name(d)
  }

  *values(): MapIterator<NftChain> {
    for (const d of this.names.distinct().last) yield this.chain(d)
  }

  *entries(): MapIterator<[string, NftChain]> {
    const {first, last} = this.names.distinct()
    for (let i = 0; i < first.length; i++) yield [this.names.name(first[i]), this.chain(last[i])]
  }

  [Symbol.iterator](): MapIterator<[string, NftChain]> {
    return this.entries()
  }

  forEach(fn: (value: NftChain, key: string, map: ReadonlyMap<string, NftChain>) => void): void {
    for (const [k, v] of this.entries()) fn(v, k, this)
  }

  private grow(): void {
    const n = this.bodyStart.length * 2
    const grow = (a: Uint32Array) => {
      const next = new Uint32Array(n)
      next.set(a)
      return next
    }
    this.bodyStart = grow(this.bodyStart)
    this.bodyEnd = grow(this.bodyEnd)
    this.bodyLine = grow(this.bodyLine)
    this.headerLine = grow(this.headerLine)
  }
}

export interface NftIndexOptions {
  /** Sees each chunk of the text before it is indexed (a chunk holds whole lines); may throw to stop the pass. */
  beforeChunk?: (chunk: Buffer) => void
}

/** Indexes the ruleset text `source` holds (see the top of this file); the source is read again for each chain asked. */
export function indexNftRuleset(source: DumpSource, options: NftIndexOptions = {}): NftTable[] {
  const tables: NftTable[] = []
  // Reserved, not touched: large typed arrays are zero pages until written (kube-proxy writes a chain per 240 bytes).
  const expectedChains = Math.ceil(source.size / 200)
  let where = Where.Top
  let table: (NftTable & {chains: IndexedChains}) | undefined
  let chainId = -1
  let set: IndexedSet | undefined
  let setBodyStart = 0
  let setBodyLine = 0
  let lineNo = 0
  /** An open statement's braces, its first line and where it starts (0 depth: none open). */
  let contDepth = 0
  let contLine = 0
  let contStart = 0
  /** Whether the open statement starts with "type" (in a chain: maybe its base chain's statement). */
  let contIsType = false

  /** The text of the statement at [start, end): its lines trimmed and joined by a space, as one line. */
  const statementText = (start: number, end: number, buf: Buffer, base: number): string => {
    const bytes = start >= base ? buf.subarray(start - base, end - base) : source.read(start, end)
    const text = bytes.toString('utf8')
    return text.includes('\n')
      ? text
          .split('\n')
          .map((l) => l.trim())
          .join(' ')
      : text.trim()
  }

  const readOpenSet = (end: number) => {
    if (set && end > setBodyStart) set.readBody({bytes: source.read(setBodyStart, end), line: setBodyLine})
  }

  /** A statement of one line or more, [start, end) in the text, whose first line is `line`. */
  const onStatement = (
    line: string | undefined,
    start: number,
    end: number,
    first: number,
    buf: Buffer,
    base: number,
  ) => {
    const text = () => line ?? statementText(start, end, buf, base)
    if (where === Where.Top) {
      const s = text()
      const m = /^table\s+(ip|ip6|inet|arp|bridge|netdev)\s+(\S+)\s*\{$/.exec(s)
      if (!m) throw new ParseError(first, `expected "table FAMILY NAME {", found "${s.slice(0, 60)}"`)
      const id = `${m[1]} ${unquote(m[2])}`
      table = {
        family: m[1],
        name: unquote(m[2]),
        id,
        chains: new IndexedChains(id, source, expectedChains),
        sets: new Map(),
      }
      tables.push(table)
      where = Where.Table
      return
    }
    if (where === Where.Chain) {
      // Only a `type … hook …` statement is read now (a base chain); rules wait until the chain is asked for.
      const found = baseOf(text(), first)
      if (found) table!.chains.markBase(chainId, found)
      return
    }
    if (where === Where.Set) return
    // In a table: a chain (most of them: read from the bytes), a set or map, a comment or flags.
    const s = text()
    let m = /^chain\s+(\S+)\s*\{$/.exec(s)
    if (m) {
      chainId = table!.chains.declareName(unquote(m[1]), first, end + 1, first + 1)
      where = Where.Chain
      return
    }
    m = /^(set|map)\s+(\S+)\s*\{$/.exec(s)
    if (m) {
      set = new IndexedSet(table!.id, unquote(m[2]), first, m[1] === 'map')
      table!.sets.set(set.name, set)
      setBodyStart = end + 1
      setBodyLine = first + 1
      where = Where.Set
      return
    }
    if (/^(comment|flags)\s/.test(s)) return
    throw new ParseError(first, `unexpected "${s.slice(0, 60)}" in table ${table!.id}`)
  }

  /** A `}` statement at [start, …): closes the innermost block. */
  const onClose = (start: number) => {
    if (where === Where.Set) {
      readOpenSet(start)
      set = undefined
      where = Where.Table
    } else if (where === Where.Chain) {
      table!.chains.close(chainId, start)
      where = Where.Table
    } else if (where === Where.Table) {
      table = undefined
      where = Where.Top
    } else throw new ParseError(lineNo, 'unbalanced "}"')
  }

  /**
   * A table-level line `chain NAME {`, [s, e) trimmed, whose line ends at nl: declares the chain and returns true;
   * false when it is not one (or not ASCII).
   */
  const chainHeader = (buf: Buffer, s: number, e: number, nl: number, base: number): boolean => {
    if (
      e - s < 8 ||
      buf[s] !== 0x63 ||
      buf[e - 1] !== 0x7b ||
      !startsWith(buf, s, e, CHAIN) ||
      !isSpaceByte(buf[s + 5])
    )
      return false
    let p = s + 5
    while (p < e && isSpaceByte(buf[p])) p++
    let r = e - 1
    while (r > p && isSpaceByte(buf[r - 1])) r--
    if (r <= p) return false
    // The name's bytes are checked and hashed in one loop (550,000 names at 50,000 Services).
    let h = FNV_OFFSET
    for (let i = p; i < r; i++) {
      const b = buf[i]
      // One test for a printable ASCII byte (nearly every one), then the two that refuse one.
      if ((b <= 0x20 || b >= 0x7f) && (b >= 0x80 || isSpaceByte(b))) return false
      h = Math.imul(h ^ b, FNV_PRIME)
    }
    h |= 0
    // A quoted name loses its quotes (unquote).
    if (buf[p] === 0x22 && r - p >= 2 && buf[r - 1] === 0x22) {
      p++
      r--
      h = nameHash(buf, p, r)
    }
    chainId = table!.chains.declare(base + p, r - p, h, lineNo, base + nl + 1, lineNo + 1)
    where = Where.Chain
    return true
  }

  const onChunk = (buf: Buffer, base: number) => {
    const n = buf.length
    let pos = 0
    // Where the next `{`, `}` and quote are (native searches, each byte looked at once): most lines hold none, and
    // their brace balance is known without reading them.
    let nextOpen = -1
    let nextClose = -1
    let nextQuote = -1
    /**
     * braceDelta of the line [ls, nl), which holds a brace: counted by the native searches when it holds no quote (an
     * inline `vmap { … }` of a service chain: a long line with one of each).
     */
    const lineBraces = (ls: number, nl: number): number => {
      if (nextQuote < nl) return braceDeltaBytes(buf, ls, nl)
      let d = 0
      while (nextOpen < nl) {
        d++
        nextOpen = nextOf(buf, 0x7b, nextOpen + 1)
      }
      while (nextClose < nl) {
        d--
        nextClose = nextOf(buf, 0x7d, nextClose + 1)
      }
      return d
    }
    while (pos < n) {
      let nl = buf.indexOf(10, pos)
      if (nl < 0) nl = n
      const ls = pos
      pos = nl + 1
      lineNo++
      if (nextOpen < ls) nextOpen = nextOf(buf, 0x7b, ls)
      if (nextClose < ls) nextClose = nextOf(buf, 0x7d, ls)
      if (nextQuote < ls) nextQuote = nextOf(buf, 0x22, ls)
      // Whether the line holds a brace (its balance is read only where it counts: not for a block's own header or its
      // closing line, half of a kube-proxy ruleset's lines; a line without one has none, quoted or not).
      const mayBrace = nextOpen < nl || nextClose < nl
      let s = ls
      let e = nl
      while (s < e && isSpaceByte(buf[s])) s++
      while (e > s && isSpaceByte(buf[e - 1])) e--
      let line: string | undefined
      if (s < e && (buf[s] >= 0x80 || buf[e - 1] >= 0x80)) {
        // White space beyond ASCII may end the line (a no-break space, a byte order mark): as trim() knows it.
        line = buf.toString('utf8', s, e).trim()
      }
      if (contDepth > 0) {
        contDepth += line !== undefined ? braceDelta(line) : mayBrace ? lineBraces(ls, nl) : 0
        if (contDepth <= 0) {
          contDepth = 0
          if ((where !== Where.Chain || contIsType) && where !== Where.Set)
            onStatement(undefined, contStart, base + nl, contLine, buf, base)
        }
        continue
      }
      if (line !== undefined ? line === '' || line.startsWith('#') : s === e || buf[s] === 0x23) continue
      const closes = line !== undefined ? line === '}' : e - s === 1 && buf[s] === 0x7d
      if (closes) {
        onClose(base + ls)
        continue
      }
      if (where === Where.Table && line === undefined) {
        // Most lines of a table are chain headers, read from the bytes.
        if (chainHeader(buf, s, e, nl, base)) continue
      }
      const opens = line !== undefined ? opensBlock(line) : opensBlockBytes(buf, s, e)
      const delta = opens ? 0 : line !== undefined ? braceDelta(line) : mayBrace ? lineBraces(ls, nl) : 0
      if (delta > 0) {
        contDepth = delta
        contLine = lineNo
        contStart = base + ls
        contIsType = line !== undefined ? line.startsWith('type') : startsWith(buf, s, e, TYPE)
        continue
      }
      if (where === Where.Chain) {
        if (line === undefined ? startsWith(buf, s, e, TYPE) : line.startsWith('type'))
          onStatement(line ?? buf.toString('utf8', s, e), base + ls, base + nl, lineNo, buf, base)
        continue
      }
      if (where === Where.Set) continue
      onStatement(line ?? buf.toString('utf8', s, e), base + ls, base + nl, lineNo, buf, base)
    }
  }

  // The source's pieces (one buffer, reused), cut at line ends: a line a piece cuts is carried to the next.
  let carry: Buffer | undefined
  let carryBase = 0
  const take = (piece: Buffer, base: number) => {
    options.beforeChunk?.(piece)
    onChunk(piece, base)
  }
  source.chunks((chunk, base) => {
    let from = 0
    if (carry) {
      const nl = chunk.indexOf(10)
      if (nl < 0) {
        carry = Buffer.concat([carry, chunk])
        return
      }
      take(Buffer.concat([carry, chunk.subarray(0, nl + 1)]), carryBase)
      carry = undefined
      from = nl + 1
    }
    const cut = chunk.lastIndexOf(10) + 1
    if (cut > from) take(chunk.subarray(from, cut), base + from)
    const tail = Math.max(cut, from)
    if (tail < chunk.length) {
      carry = Buffer.from(chunk.subarray(tail))
      carryBase = base + tail
    }
  })
  if (carry) take(carry, carryBase)
  // `text.split('\n').length`: a text ending in a newline has one more, empty, line.
  const lines = source.size === 0 || source.read(source.size - 1, source.size)[0] === 10 ? lineNo + 1 : lineNo
  if (contDepth > 0) {
    readOpenSet(contStart)
    throw new ParseError(contLine, `"{" opened here is never closed (cut-off ruleset?)`)
  }
  if (table) {
    readOpenSet(source.size)
    throw new ParseError(lines, `table ${table.id} is not closed`)
  }
  if (tables.length === 0) throw new ParseError(1, 'no "table" found: not `nft list ruleset` output')
  return tables
}
