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

function fnv1a(bytes: Uint8Array, start: number, end: number): number {
  let h = 0x811c9dc5
  for (let i = start; i < end; i++) h = Math.imul(h ^ bytes[i], 0x01000193)
  return h >>> 0
}

function grow<T extends Uint8Array | Uint16Array | Uint32Array>(arr: T, size: number): T {
  const next = new (arr.constructor as new (n: number) => T)(size)
  next.set(arr)
  return next
}

export class ChainIndex {
  private slots = new Int32Array(1024).fill(EMPTY)
  private count = 0
  private pool = new Uint8Array(1 << 14)
  private poolUsed = 0
  private nameOff = new Uint32Array(256)
  private nameLen = new Uint16Array(256)
  private hash = new Uint32Array(256)
  private decl = new Uint32Array(256)
  private policyCode = new Uint8Array(256)
  private rStart = new Uint32Array(256)
  private rEnd = new Uint32Array(256)
  private rCount = new Uint32Array(256)
  private rLine = new Uint32Array(256)
  private extra = new Map<number, RuleSegment[]>()

  get size(): number {
    return this.count
  }

  /** Finds or adds the chain whose name is bytes[start, end). */
  idFromBytes(bytes: Uint8Array, start: number, end: number): number {
    const h = fnv1a(bytes, start, end)
    const mask = this.slots.length - 1
    for (let s = h & mask; ; s = (s + 1) & mask) {
      const id = this.slots[s]
      if (id === EMPTY) return this.add(bytes, start, end, h, s)
      if (this.hash[id] === h && this.sameName(id, bytes, start, end)) return id
    }
  }

  find(name: string): number {
    const bytes = Buffer.from(name, 'latin1')
    const h = fnv1a(bytes, 0, bytes.length)
    const mask = this.slots.length - 1
    for (let s = h & mask; ; s = (s + 1) & mask) {
      const id = this.slots[s]
      if (id === EMPTY) return EMPTY
      if (this.hash[id] === h && this.sameName(id, bytes, 0, bytes.length)) return id
    }
  }

  name(id: number): string {
    return Buffer.from(this.pool.buffer, this.pool.byteOffset + this.nameOff[id], this.nameLen[id]).toString('latin1')
  }

  declare(id: number, line: number, policy: number): void {
    this.decl[id] = line
    this.policyCode[id] = policy
  }

  declaredAt(id: number): number {
    return this.decl[id]
  }

  policy(id: number): number {
    return this.policyCode[id]
  }

  addRule(id: number, start: number, end: number, line: number): void {
    const n = this.rCount[id]
    if (n === 0) {
      this.rStart[id] = start
      this.rEnd[id] = end
      this.rLine[id] = line
      this.rCount[id] = 1
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
    } else if (more) more.push({start, end, firstLine: line, count: 1})
    else this.extra.set(id, [{start, end, firstLine: line, count: 1}])
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
    if (this.nameLen[id] !== len) return false
    const off = this.nameOff[id]
    for (let i = 0; i < len; i++) if (this.pool[off + i] !== bytes[start + i]) return false
    return true
  }

  private add(bytes: Uint8Array, start: number, end: number, h: number, slot: number): number {
    const id = this.count++
    if (id >= this.nameOff.length) this.growEntries()
    const len = end - start
    if (this.poolUsed + len > this.pool.length) this.pool = grow(this.pool, Math.max(this.pool.length * 2, this.poolUsed + len))
    this.pool.set(bytes.subarray(start, end), this.poolUsed)
    this.nameOff[id] = this.poolUsed
    this.nameLen[id] = len
    this.poolUsed += len
    this.hash[id] = h
    this.slots[slot] = id
    if (this.count * 2 > this.slots.length) this.rehash()
    return id
  }

  private growEntries(): void {
    const n = this.nameOff.length * 2
    this.nameOff = grow(this.nameOff, n)
    this.nameLen = grow(this.nameLen, n)
    this.hash = grow(this.hash, n)
    this.decl = grow(this.decl, n)
    this.policyCode = grow(this.policyCode, n)
    this.rStart = grow(this.rStart, n)
    this.rEnd = grow(this.rEnd, n)
    this.rCount = grow(this.rCount, n)
    this.rLine = grow(this.rLine, n)
  }

  private rehash(): void {
    const slots = new Int32Array(this.slots.length * 2).fill(EMPTY)
    const mask = slots.length - 1
    for (let id = 0; id < this.count; id++) {
      let s = this.hash[id] & mask
      while (slots[s] !== EMPTY) s = (s + 1) & mask
      slots[s] = id
    }
    this.slots = slots
  }
}

export const NOT_FOUND = EMPTY
