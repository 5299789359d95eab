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
/** The policy code of a chain that has rules but no declaration line (grep output, a cut table). */
const UNDECLARED = 255
/** FNV-1a, the hash of chain names (nameHash; a caller scanning a name can compute it on the way). */
export const FNV_OFFSET = 0x811c9dc5
export const FNV_PRIME = 0x01000193

/** The FNV-1a hash of bytes[start, end) (as a signed 32-bit integer: what the slot table stores). */
function nameHash(bytes: Uint8Array, start: number, end: number): number {
  let h = FNV_OFFSET
  for (let i = start; i < end; i++) h = Math.imul(h ^ bytes[i], FNV_PRIME)
  return h | 0
}

function grow<T extends Uint8Array | Uint32Array>(arr: T, size: number): T {
  const next = new (arr.constructor as new (n: number) => T)(size)
  next.set(arr)
  return next
}

/** Entries reserved up front: large typed arrays are zero pages until written, so only the chains a dump has cost memory. */
const MAX_RESERVED_CHAINS = 1 << 22

export class ChainIndex {
  /** Open addressing, two numbers a slot: chain id + 1 (0: empty) and the name's hash, so a probe reads one place. */
  private slots: Int32Array
  private count = 0
  private pool: Uint8Array
  private poolUsed = 0
  /** Per chain, two numbers: where its name starts in `pool`, and its length. */
  private names: Uint32Array
  private policyCode: Uint8Array
  private rStart: Uint32Array
  private rEnd: Uint32Array
  private rCount: Uint32Array
  private rLine: Uint32Array
  private extra = new Map<number, RuleSegment[]>()
  /** The chain the last rule was added to, where that rule ended, and its segment (undefined: the chain's first). */
  private lastId = EMPTY
  private lastEnd = -1
  private lastSegment: RuleSegment | undefined

  /** `expectedChains`: room reserved for that many chains (more still fit: the arrays grow). */
  constructor(expectedChains = 256) {
    const n = Math.max(256, Math.min(MAX_RESERVED_CHAINS, expectedChains))
    this.names = new Uint32Array(2 * n)
    this.policyCode = new Uint8Array(n)
    this.rStart = new Uint32Array(n)
    this.rEnd = new Uint32Array(n)
    this.rCount = new Uint32Array(n)
    this.rLine = new Uint32Array(n)
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
    return this.idFromHashed(bytes, start, end, nameHash(bytes, start, end))
  }

  /** idFromBytes when the caller has the name's hash (nameHash) already. */
  idFromHashed(bytes: Uint8Array, start: number, end: number, h: number): number {
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
    const slots = this.slots
    const mask = (slots.length >> 1) - 1
    for (let s = h & mask; ; s = (s + 1) & mask) {
      const entry = slots[2 * s]
      if (entry === 0) return EMPTY
      if (slots[2 * s + 1] === h && this.hasName(entry - 1, name)) return entry - 1
    }
  }

  private hasName(id: number, name: string): boolean {
    if (this.names[2 * id + 1] !== name.length) return false
    const pool = this.pool
    const at = this.names[2 * id]
    for (let i = 0; i < name.length; i++) if (pool[at + i] !== (name.charCodeAt(i) & 0xff)) return false
    return true
  }

  name(id: number): string {
    return Buffer.from(this.pool.buffer, this.pool.byteOffset + this.names[2 * id], this.names[2 * id + 1]).toString(
      'latin1',
    )
  }

  /** Whether the chain's name begins with `prefix` (compared in the byte pool: no string made per chain). */
  nameStartsWith(id: number, prefix: string): boolean {
    if (this.names[2 * id + 1] < prefix.length) return false
    const pool = this.pool
    const at = this.names[2 * id]
    for (let i = 0; i < prefix.length; i++) if (pool[at + i] !== (prefix.charCodeAt(i) & 0xff)) return false
    return true
  }

  /** The length of the chain's name; -1 for no such chain. */
  nameLength(id: number): number {
    return id >= 0 && id < this.count ? this.names[2 * id + 1] : -1
  }

  /** Whether the chain's name is bytes[start, start + its length). */
  nameAt(id: number, bytes: Uint8Array, start: number): boolean {
    return this.sameName(id, bytes, start, start + this.names[2 * id + 1])
  }

  declare(id: number, policy: number): void {
    this.policyCode[id] = policy
  }

  /** The chain's policy code as declared; UNDECLARED (255) when no declaration line named it. */
  policy(id: number): number {
    return this.policyCode[id]
  }

  /** Whether some chain has rules but no declaration line. */
  hasUndeclared(): boolean {
    for (let id = 0; id < this.count; id++) if (this.policyCode[id] === UNDECLARED) return true
    return false
  }

  /** Whether a declaration line (":CHAIN POLICY [p:b]") named the chain. */
  declared(id: number): boolean {
    return this.policyCode[id] !== UNDECLARED
  }

  addRule(id: number, start: number, end: number, line: number): void {
    // The common case: the next rule of the chain the last one went to, right after it.
    if (id === this.lastId && start === this.lastEnd) {
      if (this.lastSegment) {
        this.lastSegment.end = end
        this.lastSegment.count++
      } else this.rEnd[id] = end
      this.rCount[id]++
      this.lastEnd = end
      return
    }
    this.lastId = id
    this.lastEnd = end
    const n = this.rCount[id]
    if (n === 0) {
      this.rStart[id] = start
      this.rEnd[id] = end
      this.rLine[id] = line
      this.rCount[id] = 1
      this.lastSegment = undefined
      return
    }
    const more = this.extra.get(id)
    const last = more ? more[more.length - 1] : undefined
    const lastEnd = last ? last.end : this.rEnd[id]
    if (lastEnd === start) {
      if (last) {
        last.end = end
        last.count++
      } else this.rEnd[id] = end
      this.lastSegment = last
    } else {
      const segment = {start, end, firstLine: line, count: 1}
      if (more) more.push(segment)
      else this.extra.set(id, [segment])
      this.lastSegment = segment
    }
    this.rCount[id] = n + 1
  }

  ruleCount(id: number): number {
    return this.rCount[id]
  }

  segments(id: number): RuleSegment[] {
    if (this.rCount[id] === 0) return []
    const more = this.extra.get(id)
    const firstCount = more ? this.rCount[id] - more.reduce((a, s) => a + s.count, 0) : this.rCount[id]
    const first = {start: this.rStart[id], end: this.rEnd[id], firstLine: this.rLine[id], count: firstCount}
    return more ? [first, ...more] : [first]
  }

  *ids(): Iterable<number> {
    for (let id = 0; id < this.count; id++) yield id
  }

  private sameName(id: number, bytes: Uint8Array, start: number, end: number): boolean {
    const len = end - start
    if (this.names[2 * id + 1] !== len) return false
    const off = this.names[2 * id]
    const pool = this.pool
    for (let i = 0; i < len; i++) if (pool[off + i] !== bytes[start + i]) return false
    return true
  }

  private add(bytes: Uint8Array, start: number, end: number, h: number, slot: number): number {
    const id = this.count++
    if (id >= this.rCount.length) this.growEntries()
    const len = end - start
    if (this.poolUsed + len > this.pool.length)
      this.pool = grow(this.pool, Math.max(this.pool.length * 2, this.poolUsed + len))
    const pool = this.pool
    const at = this.poolUsed
    for (let i = 0; i < len; i++) pool[at + i] = bytes[start + i]
    this.names[2 * id] = at
    this.names[2 * id + 1] = len
    this.policyCode[id] = UNDECLARED
    this.poolUsed += len
    this.slots[2 * slot] = id + 1
    this.slots[2 * slot + 1] = h
    if (this.count * 8 > this.slots.length * 3) this.rehash()
    return id
  }

  private growEntries(): void {
    const n = this.rCount.length * 2
    this.names = grow(this.names, 2 * n)
    this.policyCode = grow(this.policyCode, n)
    this.rStart = grow(this.rStart, n)
    this.rEnd = grow(this.rEnd, n)
    this.rCount = grow(this.rCount, n)
    this.rLine = grow(this.rLine, n)
  }

  /** Doubles the slot table (kept at most three quarters full). */
  private rehash(): void {
    const old = this.slots
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
    this.slots = slots
  }
}

export const NOT_FOUND = EMPTY
