import {doubledSlots, FNV_OFFSET, FNV_PRIME} from './chain-index.js'
import type {DumpSource} from './dump-source.js'

/**
 * A table's chain declarations, in the order of their headers: each name kept as where it sits in the ruleset's bytes
 * (offset and length) and its hash, in typed arrays written one after another as the pass meets the headers. Nothing is
 * looked up while the ruleset is indexed (a hash table's insert is a cache miss per chain, 550,000 at 50,000 Services):
 * the first lookup by name sorts the declarations by their hash's low bits into buckets of about 64 (a counting sort:
 * two passes in order, over a table that stays in cache), and a lookup reads back the names in its bucket whose hash
 * agrees (a walk asks for about 15 names). A name declared twice (a paste) is told at lookup: its chain is the last
 * declaration's, in the first one's place.
 */

/** Marks a name that is not in the source as it is (read from a header as text): its bytes are kept in `aside`. */
const ASIDE = 0xffffffff

/** The FNV-1a hash of bytes[start, end), as the slot table stores it (a signed 32-bit integer). */
export function nameHash(bytes: Uint8Array, start: number, end: number): number {
  let h = FNV_OFFSET
  for (let i = start; i < end; i++) h = Math.imul(h ^ bytes[i], FNV_PRIME)
  return h | 0
}

export class NftChainNames {
  private at: Uint32Array
  private length: Uint32Array
  private hash: Int32Array
  private readonly aside = new Map<number, Buffer>()
  private count = 0
  /** Each name's first and last declaration, in the order of the first ones (made when asked for: see distinct()). */
  private names?: {first: number[]; last: number[]}
  /** The declarations by their hash's low bits: bucket b's are order[start[b], start[b + 1]), in order (see buckets()). */
  private byHash?: {mask: number; start: Uint32Array; order: Uint32Array}

  constructor(
    private readonly source: DumpSource,
    expected: number,
  ) {
    const n = Math.max(256, Math.min(1 << 22, expected))
    this.at = new Uint32Array(n)
    this.length = new Uint32Array(n)
    this.hash = new Int32Array(n)
  }

  /** How many headers were declared (a name declared twice counts twice). */
  get declarations(): number {
    return this.count
  }

  /**
   * A header whose name is the source's bytes [at, at + len), `h` their nameHash: its declaration number (the next).
   */
  declare(at: number, len: number, h: number): number {
    const d = this.count++
    if (d >= this.at.length) {
      this.at = grown(this.at)
      this.length = grown(this.length)
      this.hash = grown(this.hash)
    }
    this.at[d] = at
    this.length[d] = len
    this.hash[d] = h
    this.names = undefined
    this.byHash = undefined
    return d
  }

  /** A header whose name is given as its bytes (read as text): its declaration number. */
  declareBytes(bytes: Buffer): number {
    const d = this.declare(ASIDE, bytes.length, nameHash(bytes, 0, bytes.length))
    this.aside.set(d, bytes)
    return d
  }

  /** The last declaration of `name`, or -1. */
  last(name: string): number {
    const bytes = Buffer.from(name, 'utf8')
    const h = nameHash(bytes, 0, bytes.length)
    const {mask, start, order} = this.buckets()
    for (let i = start[(h & mask) + 1] - 1; i >= start[h & mask]; i--) {
      const d = order[i]
      if (this.hash[d] === h && this.length[d] === bytes.length && this.bytesOf(d).equals(bytes)) return d
    }
    return -1
  }

  /** The first declaration of declaration d's name. */
  first(d: number): number {
    const {mask, start, order} = this.buckets()
    const h = this.hash[d]
    for (let i = start[h & mask]; order[i] < d; i++)
      if (this.hash[order[i]] === h && this.same(order[i], d)) return order[i]
    return d
  }

  /** Whether no later header declares declaration d's name again. */
  isLast(d: number): boolean {
    const {mask, start, order} = this.buckets()
    const h = this.hash[d]
    for (let i = start[(h & mask) + 1] - 1; order[i] > d; i--)
      if (this.hash[order[i]] === h && this.same(order[i], d)) return false
    return true
  }

  private buckets(): {mask: number; start: Uint32Array; order: Uint32Array} {
    if (this.byHash) return this.byHash
    let buckets = 256
    while (buckets * 64 < this.count) buckets *= 2
    const mask = buckets - 1
    const start = new Uint32Array(buckets + 1)
    const hash = this.hash
    for (let d = 0; d < this.count; d++) start[(hash[d] & mask) + 1]++
    for (let b = 0; b < buckets; b++) start[b + 1] += start[b]
    const next = start.slice(0, buckets)
    const order = new Uint32Array(this.count)
    for (let d = 0; d < this.count; d++) order[next[hash[d] & mask]++] = d
    this.byHash = {mask, start, order}
    return this.byHash
  }

  /** Each name's first and last declaration, in the order of the first ones. */
  distinct(): {first: number[]; last: number[]} {
    if (this.names) return this.names
    // A slot table from each name's hash to its place among the distinct names (+ 1; 0: empty), made once.
    let slots: Int32Array = new Int32Array(2048)
    let used = 0
    const first: number[] = []
    const last: number[] = []
    for (let d = 0; d < this.count; d++) {
      const h = this.hash[d]
      const mask = (slots.length >> 1) - 1
      let s = h & mask
      for (; slots[2 * s] !== 0; s = (s + 1) & mask) {
        const k = slots[2 * s] - 1
        if (slots[2 * s + 1] === h && this.same(first[k], d)) break
      }
      if (slots[2 * s] !== 0) {
        last[slots[2 * s] - 1] = d
        continue
      }
      first.push(d)
      last.push(d)
      slots[2 * s] = first.length
      slots[2 * s + 1] = h
      if (++used * 8 > slots.length * 3) slots = doubledSlots(slots)
    }
    this.names = {first, last}
    return this.names
  }

  name(d: number): string {
    return this.bytesOf(d).toString('utf8')
  }

  /** Whether declarations d and e name the same chain. */
  private same(d: number, e: number): boolean {
    return this.length[d] === this.length[e] && this.bytesOf(d).equals(this.bytesOf(e))
  }

  private bytesOf(d: number): Buffer {
    const at = this.at[d]
    return at === ASIDE ? this.aside.get(d)! : this.source.read(at, at + this.length[d])
  }
}

function grown<T extends Uint32Array | Int32Array>(a: T): T {
  const next = new (a.constructor as new (n: number) => T)(a.length * 2)
  next.set(a)
  return next
}
