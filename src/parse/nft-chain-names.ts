import {doubledSlots, FNV_OFFSET, FNV_PRIME} from './chain-index.js'
import type {DumpSource} from './dump-source.js'

/**
 * A table's chain names, each found by name: kept as where the name sits in the ruleset's bytes (offset and length,
 * typed arrays), not copied and not made a string; a name is read back from the source when a lookup's hash and
 * length agree with it. A 50,000-Service ruleset has 550,000 chains, and a walk asks for about 15.
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
  /** Open addressing, two numbers a slot: chain id + 1 (0: empty) and the name's hash. */
  private slots: Int32Array
  private at: Uint32Array
  private length: Uint32Array
  private readonly aside = new Map<number, Buffer>()
  private count = 0

  constructor(
    private readonly source: DumpSource,
    expected: number,
  ) {
    const n = Math.max(256, Math.min(1 << 22, expected))
    this.at = new Uint32Array(n)
    this.length = new Uint32Array(n)
    let slotCount = 1024
    while (slotCount * 3 < 4 * n) slotCount *= 2
    this.slots = new Int32Array(2 * slotCount)
  }

  get size(): number {
    return this.count
  }

  /**
   * The id of the name at buf[start, end) (`h`: its nameHash), added when new; `base`: where buf starts in the
   * source (the name stays there).
   */
  idAt(buf: Buffer, start: number, end: number, base: number, h: number): number {
    const slots = this.slots
    const mask = (slots.length >> 1) - 1
    const len = end - start
    for (let s = h & mask; ; s = (s + 1) & mask) {
      const entry = slots[2 * s]
      if (entry === 0) return this.add(base + start, len, h, s)
      if (slots[2 * s + 1] === h && this.length[entry - 1] === len && this.is(entry - 1, buf, start, end, base))
        return entry - 1
    }
  }

  /** The id of a name given as its bytes (a header read as text), added when new. */
  idOfBytes(bytes: Buffer): number {
    const h = nameHash(bytes, 0, bytes.length)
    const slots = this.slots
    const mask = (slots.length >> 1) - 1
    for (let s = h & mask; ; s = (s + 1) & mask) {
      const entry = slots[2 * s]
      if (entry === 0) {
        const id = this.add(ASIDE, bytes.length, h, s)
        this.aside.set(id, bytes)
        return id
      }
      if (slots[2 * s + 1] === h && this.length[entry - 1] === bytes.length && this.bytesOf(entry - 1).equals(bytes))
        return entry - 1
    }
  }

  /** The chain named `name`, or -1. */
  find(name: string): number {
    const bytes = Buffer.from(name, 'utf8')
    const h = nameHash(bytes, 0, bytes.length)
    const slots = this.slots
    const mask = (slots.length >> 1) - 1
    for (let s = h & mask; ; s = (s + 1) & mask) {
      const entry = slots[2 * s]
      if (entry === 0) return -1
      if (slots[2 * s + 1] === h && this.length[entry - 1] === bytes.length && this.bytesOf(entry - 1).equals(bytes))
        return entry - 1
    }
  }

  name(id: number): string {
    return this.bytesOf(id).toString('utf8')
  }

  /** Whether chain `id`'s name is buf[start, end) (buf starting at `base` in the source). */
  private is(id: number, buf: Buffer, start: number, end: number, base: number): boolean {
    const at = this.at[id]
    // Still in this piece: compared there, without reading the source again.
    if (at !== ASIDE && at >= base && at + this.length[id] <= base + buf.length)
      return buf.compare(buf, at - base, at - base + this.length[id], start, end) === 0
    return this.bytesOf(id).equals(buf.subarray(start, end))
  }

  private bytesOf(id: number): Buffer {
    const at = this.at[id]
    return at === ASIDE ? this.aside.get(id)! : this.source.read(at, at + this.length[id])
  }

  private add(at: number, len: number, h: number, slot: number): number {
    const id = this.count++
    if (id >= this.at.length) {
      this.at = grown(this.at)
      this.length = grown(this.length)
    }
    this.at[id] = at
    this.length[id] = len
    this.slots[2 * slot] = id + 1
    this.slots[2 * slot + 1] = h
    if (this.count * 8 > this.slots.length * 3) this.rehash()
    return id
  }

  /** Doubles the slot table (kept at most three quarters full). */
  private rehash(): void {
    this.slots = doubledSlots(this.slots)
  }
}

function grown(a: Uint32Array): Uint32Array {
  const next = new Uint32Array(a.length * 2)
  next.set(a)
  return next
}
