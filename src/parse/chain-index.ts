/**
 * A compact index from chain name to where its declaration and rules sit in a dump.
 * Built for dumps with hundreds of thousands of chains: typed arrays and one byte pool, no object per chain.
 */
export interface RuleSegment {
  start: number
  end: number
  firstLine: number
  count: number
}

const EMPTY = -1
/** The fields of a chain's record (see ChainIndex.rec). */
const RECORD = 8
const NAME_AT = 0
const NAME_LENGTH = 1
const RULES_START = 2
const RULES_END = 3
const RULE_COUNT = 4
const FIRST_LINE = 5
const POLICY = 6
/** The policy code of a chain that has rules but no declaration line (grep output, a cut table). */
const UNDECLARED = 255
const SPACE = 32
/** FNV-1a, the hash of chain names (nameHash; a caller scanning a name can compute it on the way). */
export const FNV_OFFSET = 0x811c9dc5
export const FNV_PRIME = 0x01000193

/** The FNV-1a hash of bytes[start, end) (as a signed 32-bit integer: what the slot table stores). */
export function nameHash(bytes: Uint8Array, start: number, end: number): number {
  let h = FNV_OFFSET
  for (let i = start; i < end; i++) h = Math.imul(h ^ bytes[i], FNV_PRIME)
  return h | 0
}

function grow<T extends Uint8Array | Uint32Array | Int32Array>(arr: T, size: number): T {
  const next = new (arr.constructor as new (n: number) => T)(size)
  next.set(arr)
  return next
}

/** How many names find() looks for by a pass over a table read in order before it builds the slot table instead. */
const SCANS_BEFORE_SLOTS = 64

/** A name declared twice while a table was read in order (see ChainIndex.ordered): the dump is indexed again by hash. */
export class DeclaredTwice extends Error {}

/** Entries reserved up front: large typed arrays are zero pages until written, so only the chains a dump has cost memory. */
const MAX_RESERVED_CHAINS = 1 << 22

export class ChainIndex {
  /** Open addressing, two numbers a slot: chain id + 1 (0: empty) and the name's hash, so a probe reads one place. */
  private slots: Int32Array
  private count = 0
  private pool: Uint8Array
  private poolUsed = 0
  /**
   * Per chain, one record of RECORD numbers (NAME_AT…POLICY): what indexing a line reads and writes of a chain sits in
   * one cache line, not in one array per field (a dump of 550,000 chains missed the cache once per array).
   */
  private rec: Uint32Array
  private capacity: number
  private extra = new Map<number, RuleSegment[]>()
  /**
   * While true, the table is being read as iptables-save prints it: every chain declared once, in a block before any
   * rule, and each chain's rules together, chain after chain in the order of the declarations (iptables-legacy-save and
   * iptables-nft-save both print a table so). Then no chain is looked up while the dump is read: a declaration is
   * appended, and a run of rules belongs to the next declared chain of its name (declared chains without rules are
   * skipped), compared by bytes with the names stored in order, which a pass reads one after the other. The first line
   * that does not fit (rules out of that order, a chain without a declaration, a declaration after a rule) puts every
   * chain so far in the slot table, and every later line is looked up by hash, as any input could be.
   */
  private ordered: boolean
  /** While ordered: the first declared chain no rule has named yet, and whether any rule came. */
  private nextDeclared = 0
  private anyRules = false
  /** The chains before this one are in the slot table (all of them once the table is not read in order). */
  private slotted = 0
  /** Each chain's name hash (nameHash), by id: what fills the slot table, or answers find() of a table read in order. */
  private hashes: Int32Array
  /** find()'s answers for a table read in order (a walk asks for a few dozen chains, many of them again and again). */
  private readonly found = new Map<string, number>()
  /** The chain the last rule was added to, where that rule ended, and its segment (undefined: the chain's first). */
  private lastId = EMPTY
  private lastEnd = -1
  private lastSegment: RuleSegment | undefined
  /**
   * nameEndAt's views of the bytes it was last given and of the pool, for comparing names four bytes at a time (every
   * rule line of a table read in order is compared with its chain's stored name: 1.6 million at 50,000 Services).
   */
  private viewOf: Uint8Array | undefined
  private bytesView: DataView | undefined
  private poolView: DataView | undefined

  /**
   * `expectedChains`: room reserved for that many chains (more still fit: the arrays grow). `ordered`: read the table
   * in iptables-save's order until a line does not fit (see `ordered`); then, or when false, every name is looked up.
   */
  constructor(expectedChains = 256, ordered = false) {
    this.ordered = ordered
    const n = Math.max(256, Math.min(MAX_RESERVED_CHAINS, expectedChains))
    this.capacity = n
    this.rec = new Uint32Array(RECORD * n)
    this.hashes = new Int32Array(n)
    this.pool = new Uint8Array(n * 32)
    let slotCount = 1024
    while (slotCount * 3 < 4 * n) slotCount *= 2
    this.slots = new Int32Array(2 * slotCount)
  }

  get size(): number {
    return this.count
  }

  /** Finds or adds the chain whose name is bytes[start, end). */
  idFromBytes(bytes: Uint8Array, start: number, end: number): number {
    if (this.ordered) this.leaveOrder()
    return this.idFromHashed(bytes, start, end, nameHash(bytes, start, end))
  }

  /**
   * While the table is read in order: adds the chain declared by bytes[start, end) (its hash `h`) without a lookup
   * and returns its id; -1 once the table is no longer read in order (the caller looks the name up instead).
   */
  declareInOrder(bytes: Uint8Array, start: number, end: number, h: number, policy: number): number {
    if (!this.ordered) return EMPTY
    if (this.anyRules) {
      this.leaveOrder()
      return EMPTY
    }
    const id = this.append(bytes, start, end, h)
    this.rec[RECORD * id + POLICY] = policy
    return id
  }

  /** Whether a declaration now is appended by declareNextInOrder (read in order, no rule yet). */
  takesDeclarations(): boolean {
    return this.ordered && !this.anyRules
  }

  /**
   * declareInOrder for a declaration line whose name starts at bytes[start] (the line ends at `lineEnd`), when
   * takesDeclarations(): the name is found, copied and hashed in one pass; its id (declare() then sets its policy).
   */
  declareNextInOrder(bytes: Uint8Array, start: number, lineEnd: number): number {
    const id = this.count++
    if (id >= this.capacity) this.growEntries()
    if (this.poolUsed + lineEnd - start > this.pool.length)
      this.pool = grow(this.pool, Math.max(this.pool.length * 2, this.poolUsed + lineEnd - start))
    const pool = this.pool
    const at = this.poolUsed
    let h = FNV_OFFSET
    let end = start
    for (; end < lineEnd; end++) {
      const c = bytes[end]
      if (c === SPACE) break
      pool[at + end - start] = c
      h = Math.imul(h ^ c, FNV_PRIME)
    }
    this.record(id, at, end - start, h | 0)
    return id
  }

  /**
   * While the table is read in order: the chain of a run of rules named bytes[start, end), the one the last run went
   * to or the next declared one with that name; -1 when there is none (the table is then no longer read in order and
   * the caller looks the name up).
   */
  ruleChainInOrder(bytes: Uint8Array, start: number, end: number): number {
    if (!this.ordered) return EMPTY
    this.anyRules = true
    const last = this.nextDeclared - 1
    if (last >= 0 && this.sameName(last, bytes, start, end)) return last
    for (let id = this.nextDeclared; id < this.count; id++)
      if (this.sameName(id, bytes, start, end)) {
        this.nextDeclared = id + 1
        return id
      }
    this.leaveOrder()
    return EMPTY
  }

  /** Whether the table is still read in iptables-save's order (see `ordered`). */
  readsInOrder(): boolean {
    return this.ordered
  }

  /**
   * ruleChainInOrder for a rule line whose chain name starts at bytes[start] and whose line ends at `lineEnd`, when
   * that chain is the one the last run went to or the next declared one (the name then ends at start + its length, at
   * a space or the line's end): its id, found by comparing the name in place (no scan for the name's end first);
   * else -1, with nothing changed (the caller finds the name's end and asks ruleChainInOrder).
   */
  nextRunChain(bytes: Uint8Array, start: number, lineEnd: number): number {
    if (!this.ordered) return EMPTY
    // The next declared chain first: a run of the last one's comes only after a line broke it (a comment). The two
    // never share a name here (a name declared twice is found at the end, and the dump read again by hash).
    const next = this.nextDeclared
    if (next < this.count && this.nameEndAt(next, bytes, start, lineEnd) >= 0) {
      this.anyRules = true
      this.nextDeclared = next + 1
      return next
    }
    if (next > 0 && this.nameEndAt(next - 1, bytes, start, lineEnd) >= 0) return next - 1
    return EMPTY
  }

  /**
   * Where the chain's name ends when bytes[start, …) begins with it, followed by a space or `lineEnd` (a rule line of
   * that chain); else -1.
   */
  nameEndAt(id: number, bytes: Uint8Array, start: number, lineEnd: number): number {
    const rec = this.rec
    const len = rec[RECORD * id + NAME_LENGTH]
    const end = start + len
    if (end > lineEnd || (end < lineEnd && bytes[end] !== SPACE)) return EMPTY
    const at = rec[RECORD * id + NAME_AT]
    if (bytes !== this.viewOf || this.bytesView === undefined) {
      this.viewOf = bytes
      this.bytesView = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
    }
    const pool = this.pool
    if (this.poolView === undefined || this.poolView.buffer !== pool.buffer)
      this.poolView = new DataView(pool.buffer, pool.byteOffset, pool.byteLength)
    const poolView = this.poolView
    const bytesView = this.bytesView
    let i = 0
    for (; i + 4 <= len; i += 4) if (poolView.getInt32(at + i) !== bytesView.getInt32(start + i)) return EMPTY
    for (; i < len; i++) if (pool[at + i] !== bytes[start + i]) return EMPTY
    return end
  }

  /** Ends reading in order: every chain so far goes into the slot table (a name declared twice: DeclaredTwice). */
  private leaveOrder(): void {
    this.ordered = false
    while (this.count * 8 > this.slots.length * 3) this.slots = doubledSlots(this.slots)
    const slots = this.slots
    const mask = (slots.length >> 1) - 1
    const hashes = this.hashes
    for (let id = this.slotted; id < this.count; id++) {
      const h = hashes[id]
      let s = h & mask
      for (; slots[2 * s] !== 0; s = (s + 1) & mask)
        if (slots[2 * s + 1] === h) this.notDeclaredTwice(slots[2 * s] - 1, id)
      slots[2 * s] = id + 1
      slots[2 * s + 1] = h
    }
    this.slotted = this.count
  }

  private notDeclaredTwice(a: number, b: number): void {
    const at = this.rec[RECORD * b + NAME_AT]
    if (this.sameName(a, this.pool, at, at + this.rec[RECORD * b + NAME_LENGTH]))
      throw new DeclaredTwice(`chain ${this.name(b)} is declared twice`)
  }

  /**
   * The end of the dump for a table still read in order: no slot table is built (find() searches the hashes by id);
   * a name declared twice throws DeclaredTwice (the caller indexes the dump again by hash, which keeps one chain per
   * name). Names are checked twice only where the hashes' low bits say they may be (idsWhoseLowBitsMeet).
   */
  finishOrdered(): void {
    // The dump's bytes are not kept past its reading (a file's reads share one buffer).
    this.viewOf = this.bytesView = undefined
    if (!this.ordered || this.count < 2) return
    const met = idsWhoseLowBitsMeet(this.hashes, this.count)
    if (met.length === 0) return
    // Of those, names are compared only where the whole hashes are equal, in place, through a small slot table of
    // their hashes (a string per such chain, about 36,000 of 550,000 chains, cost more than the rest of this check; a
    // Map of them, in a loop V8 compiled before it had seen one, was dropped back to the interpreter twice).
    let slotCount = 1024
    while (slotCount < 2 * met.length) slotCount *= 2
    const mask = slotCount - 1
    const slots = new Int32Array(slotCount)
    const hashes = this.hashes
    for (let i = 0; i < met.length; i++) {
      const id = met[i]
      const h = hashes[id]
      let s = h & mask
      for (; slots[s] !== 0; s = (s + 1) & mask) if (hashes[slots[s] - 1] === h) this.notDeclaredTwice(slots[s] - 1, id)
      slots[s] = id + 1
    }
  }

  /** idFromBytes when the caller has the name's hash (nameHash) already and the slot table holds every chain. */
  private idFromHashed(bytes: Uint8Array, start: number, end: number, h: number): number {
    const slots = this.slots
    const mask = (slots.length >> 1) - 1
    for (let s = h & mask; ; s = (s + 1) & mask) {
      const entry = slots[2 * s]
      if (entry === 0) return this.add(bytes, start, end, h, s)
      if (slots[2 * s + 1] === h && this.sameName(entry - 1, bytes, start, end)) return entry - 1
    }
  }

  /** The chain named `name` (read as latin1, as the dump is), or -1; without a buffer per call (a trace asks often). */
  find(name: string): number {
    let h = FNV_OFFSET
    for (let i = 0; i < name.length; i++) h = Math.imul(h ^ (name.charCodeAt(i) & 0xff), FNV_PRIME)
    h |= 0
    if (this.slotted < this.count) return this.findInOrder(name, h)
    const slots = this.slots
    const mask = (slots.length >> 1) - 1
    for (let s = h & mask; ; s = (s + 1) & mask) {
      const entry = slots[2 * s]
      if (entry === 0) return EMPTY
      if (slots[2 * s + 1] === h && this.hasName(entry - 1, name)) return entry - 1
    }
  }

  /**
   * find() in a table read in order (no slot table): one pass over the hashes by id, each answer remembered. A caller
   * asking for many chains (every chain of the table, one after the other) gets the slot table after SCANS_BEFORE_SLOTS
   * passes, so that asking for all of them is not quadratic.
   */
  private findInOrder(name: string, h: number): number {
    const known = this.found.get(name)
    if (known !== undefined) return known
    if (this.found.size >= SCANS_BEFORE_SLOTS) {
      this.leaveOrder()
      return this.find(name)
    }
    const hashes = this.hashes
    let id = EMPTY
    for (let i = 0; i < this.count; i++)
      if (hashes[i] === h && this.hasName(i, name)) {
        id = i
        break
      }
    this.found.set(name, id)
    return id
  }

  private hasName(id: number, name: string): boolean {
    if (this.rec[RECORD * id + NAME_LENGTH] !== name.length) return false
    const pool = this.pool
    const at = this.rec[RECORD * id + NAME_AT]
    for (let i = 0; i < name.length; i++) if (pool[at + i] !== (name.charCodeAt(i) & 0xff)) return false
    return true
  }

  name(id: number): string {
    return Buffer.from(
      this.pool.buffer,
      this.pool.byteOffset + this.rec[RECORD * id + NAME_AT],
      this.rec[RECORD * id + NAME_LENGTH],
    ).toString('latin1')
  }

  /**
   * The ids of the chains whose names begin with `prefix`, in id order. The names sit one after the other in the pool,
   * in id order: one native search of the pool for the prefix, each place it occurs mapped to its chain by a binary
   * search of the names' offsets, kept where a name starts there (no loop in JS over every chain, no string per chain).
   */
  idsStartingWith(prefix: string): number[] {
    const out: number[] = []
    if (prefix.length === 0) {
      for (let id = 0; id < this.count; id++) out.push(id)
      return out
    }
    if (this.count === 0) return out
    const needle = Buffer.from(prefix, 'latin1')
    const pool = Buffer.from(this.pool.buffer, this.pool.byteOffset, this.poolUsed)
    const rec = this.rec
    for (let at = pool.indexOf(needle); at >= 0; at = pool.indexOf(needle, at + 1)) {
      // The last chain whose name starts at or before `at` (a name of no bytes shares its offset with the next one).
      let lo = 0
      let hi = this.count - 1
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1
        if (rec[RECORD * mid + NAME_AT] <= at) lo = mid
        else hi = mid - 1
      }
      if (rec[RECORD * lo + NAME_AT] === at && rec[RECORD * lo + NAME_LENGTH] >= needle.length) out.push(lo)
    }
    return out
  }

  /** The length of the chain's name; -1 for no such chain. */
  nameLength(id: number): number {
    return id >= 0 && id < this.count ? this.rec[RECORD * id + NAME_LENGTH] : -1
  }

  /** Whether the chain's name is bytes[start, start + its length). */
  nameAt(id: number, bytes: Uint8Array, start: number): boolean {
    return this.sameName(id, bytes, start, start + this.rec[RECORD * id + NAME_LENGTH])
  }

  declare(id: number, policy: number): void {
    this.rec[RECORD * id + POLICY] = policy
  }

  /** The chain's policy code as declared; UNDECLARED (255) when no declaration line named it. */
  policy(id: number): number {
    return this.rec[RECORD * id + POLICY]
  }

  /** Whether some chain has rules but no declaration line. */
  hasUndeclared(): boolean {
    for (let id = 0; id < this.count; id++) if (this.rec[RECORD * id + POLICY] === UNDECLARED) return true
    return false
  }

  /** Whether a declaration line (":CHAIN POLICY [p:b]") named the chain. */
  declared(id: number): boolean {
    return this.rec[RECORD * id + POLICY] !== UNDECLARED
  }

  /** Adds `count` consecutive rule lines of the chain, bytes [start, end) of the dump, the first on line `line`. */
  addRules(id: number, start: number, end: number, line: number, count: number): void {
    const rec = this.rec
    const at = RECORD * id
    // The common case: the next rules of the chain the last ones went to, right after them.
    if (id === this.lastId && start === this.lastEnd) {
      if (this.lastSegment) {
        this.lastSegment.end = end
        this.lastSegment.count += count
      } else rec[at + RULES_END] = end
      rec[at + RULE_COUNT] += count
      this.lastEnd = end
      return
    }
    this.lastId = id
    this.lastEnd = end
    const n = rec[at + RULE_COUNT]
    if (n === 0) {
      rec[at + RULES_START] = start
      rec[at + RULES_END] = end
      rec[at + FIRST_LINE] = line
      rec[at + RULE_COUNT] = count
      this.lastSegment = undefined
      return
    }
    const more = this.extra.get(id)
    const last = more ? more[more.length - 1] : undefined
    const lastEnd = last ? last.end : rec[at + RULES_END]
    if (lastEnd === start) {
      if (last) {
        last.end = end
        last.count += count
      } else rec[at + RULES_END] = end
      this.lastSegment = last
    } else {
      const segment = {start, end, firstLine: line, count}
      if (more) more.push(segment)
      else this.extra.set(id, [segment])
      this.lastSegment = segment
    }
    rec[at + RULE_COUNT] = n + count
  }

  /**
   * idFromHashed for `n` names at once, bytes[starts[i], ends[i]) with hashes[i], into ids[i], found or added in order.
   * First it touches each name's slot, then the record and the stored name of the chain there, in loops whose loads do
   * not wait on one another, so their cache misses overlap (a table of 550,000 chains misses on nearly every lookup)
   * instead of coming one after the other.
   */
  idsFromHashed(
    bytes: Uint8Array,
    starts: Uint32Array,
    ends: Uint32Array,
    hashes: Int32Array,
    from: number,
    n: number,
    ids: Int32Array,
  ): void {
    if (this.ordered) this.leaveOrder()
    const slots = this.slots
    const mask = (slots.length >> 1) - 1
    const rec = this.rec
    const pool = this.pool
    for (let i = from; i < n; i++) ids[i] = slots[2 * (hashes[i] & mask)]
    for (let i = from; i < n; i++) {
      const entry = ids[i]
      ids[i] = entry !== 0 ? rec[RECORD * (entry - 1) + NAME_AT] : -1
    }
    let touched = 0
    for (let i = from; i < n; i++) if (ids[i] >= 0) touched += pool[ids[i]]
    this.touched = touched
    for (let i = from; i < n; i++) ids[i] = this.idFromHashed(bytes, starts[i], ends[i], hashes[i])
  }

  /** A sum of what idsFromHashed read ahead, kept so that the reads are not optimised away; means nothing. */
  touched = 0

  ruleCount(id: number): number {
    return this.rec[RECORD * id + RULE_COUNT]
  }

  segments(id: number): RuleSegment[] {
    if (this.rec[RECORD * id + RULE_COUNT] === 0) return []
    const more = this.extra.get(id)
    const firstCount = more
      ? this.rec[RECORD * id + RULE_COUNT] - more.reduce((a, s) => a + s.count, 0)
      : this.rec[RECORD * id + RULE_COUNT]
    const first = {
      start: this.rec[RECORD * id + RULES_START],
      end: this.rec[RECORD * id + RULES_END],
      firstLine: this.rec[RECORD * id + FIRST_LINE],
      count: firstCount,
    }
    return more ? [first, ...more] : [first]
  }

  *ids(): Iterable<number> {
    for (let id = 0; id < this.count; id++) yield id
  }

  private sameName(id: number, bytes: Uint8Array, start: number, end: number): boolean {
    const len = end - start
    if (this.rec[RECORD * id + NAME_LENGTH] !== len) return false
    const off = this.rec[RECORD * id + NAME_AT]
    const pool = this.pool
    for (let i = 0; i < len; i++) if (pool[off + i] !== bytes[start + i]) return false
    return true
  }

  private add(bytes: Uint8Array, start: number, end: number, h: number, slot: number): number {
    const id = this.append(bytes, start, end, h)
    this.slots[2 * slot] = id + 1
    this.slots[2 * slot + 1] = h
    this.slotted = this.count
    if (this.count * 8 > this.slots.length * 3) this.rehash()
    return id
  }

  /** A new chain named bytes[start, end), undeclared until declare(); not in the slot table. */
  private append(bytes: Uint8Array, start: number, end: number, h: number): number {
    const id = this.count++
    if (id >= this.capacity) this.growEntries()
    const len = end - start
    if (this.poolUsed + len > this.pool.length)
      this.pool = grow(this.pool, Math.max(this.pool.length * 2, this.poolUsed + len))
    const pool = this.pool
    const at = this.poolUsed
    for (let i = 0; i < len; i++) pool[at + i] = bytes[start + i]
    this.record(id, at, len, h)
    return id
  }

  /** The new chain `id`'s name (pool[at, at + len), its hash h), undeclared until declare(). */
  private record(id: number, at: number, len: number, h: number): void {
    this.rec[RECORD * id + NAME_AT] = at
    this.rec[RECORD * id + NAME_LENGTH] = len
    this.rec[RECORD * id + POLICY] = UNDECLARED
    this.hashes[id] = h
    this.poolUsed += len
  }

  private growEntries(): void {
    this.capacity *= 2
    this.rec = grow(this.rec, RECORD * this.capacity)
    this.hashes = grow(this.hashes, this.capacity)
  }

  /** Doubles the slot table (kept at most three quarters full). */
  private rehash(): void {
    this.slots = doubledSlots(this.slots)
  }
}

export const NOT_FOUND = EMPTY

/**
 * The ids, in order, of the chains whose hash shares its low bits with another chain's, by a bitmap of those bits:
 * about 16 bits per chain, at most 2^24 (a small table's bitmap is small: zeroing 2 MiB for each of a snapshot's
 * tables cost a short run more than its reading). Its own function, so that V8 compiles its loops with what they do.
 */
function idsWhoseLowBitsMeet(hashes: Int32Array, count: number): Int32Array {
  let bits = 1024
  while (bits < 16 * count && bits < 1 << 24) bits *= 2
  const low = bits - 1
  const seen = new Int32Array(bits >>> 5)
  const again = new Int32Array(bits >>> 5)
  let met = 0
  for (let id = 0; id < count; id++) {
    const k = hashes[id] & low
    const bit = 1 << (k & 31)
    if (seen[k >>> 5] & bit) {
      // Each chain whose bits were met before it is counted, the first of each such bit below.
      if ((again[k >>> 5] & bit) === 0) met++
      again[k >>> 5] |= bit
      met++
    } else seen[k >>> 5] |= bit
  }
  const out = new Int32Array(met)
  if (met === 0) return out
  let n = 0
  for (let id = 0; id < count; id++) {
    const k = hashes[id] & low
    if (again[k >>> 5] & (1 << (k & 31))) out[n++] = id
  }
  return out
}

/**
 * An open-addressing slot table (two numbers a slot: entry + 1, 0 for empty, and the entry's hash) at twice the size,
 * every entry placed again by its hash.
 */
export function doubledSlots(old: Int32Array): Int32Array {
  const slots = new Int32Array(old.length * 2)
  const mask = (slots.length >> 1) - 1
  for (let i = 0; i < old.length; i += 2) {
    const entry = old[i]
    if (entry === 0) continue
    let s = old[i + 1] & mask
    while (slots[2 * s] !== 0) s = (s + 1) & mask
    slots[2 * s] = entry
    slots[2 * s + 1] = old[i + 1]
  }
  return slots
}
