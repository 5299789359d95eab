import {parseElements, type NftElement} from './nft-elements.js'
import {readSetBody} from './nft-statements.js'
import type {NftSet} from './nft-types.js'

/**
 * A set or map of an indexed ruleset whose body is checked byte by byte while the ruleset is indexed and read when
 * something asks for its elements: a 50,000-Service ruleset's `service-ips` and `cluster-ips` hold 50,000 elements
 * each, and a walk looks up one key in each.
 *
 * The check accepts only bodies the element reader (readSetBody) reads without a fault, in a plain form: printable
 * ASCII, one `elements = { … }` statement per body whose words are keys, `.`, `:` values, and the attributes
 * `comment "…"`, `timeout`, `expires`, `counter`; a quote only as a word of its own on one line, no nested braces.
 * Anything else is read whole at once, as before, so a body the reader refuses is refused while the ruleset is indexed,
 * with the reader's own message, whether or not a rule reaches the set.
 */

const SPACE = 32
const TAB = 9
const NEWLINE = 10
const QUOTE = 0x22
const HASH = 0x23
const COMMA = 0x2c
const OPEN = 0x7b
const CLOSE = 0x7d

/** Where the check found each element (offsets into the body) and, when every one's is one plain address, its first key part. */
interface BodyShape {
  count: number
  start: Uint32Array
  end: Uint32Array
  /** Each element's first key part; undefined when some element's is not one word of address characters. */
  keyAt?: Uint32Array
  keyLength?: Uint32Array
}

const WORDS = Object.fromEntries(
  ['elements', 'comment', 'timeout', 'expires', 'counter', 'packets', 'bytes'].map((w) => [w, [...Buffer.from(w)]]),
)

function isWord(b: Uint8Array, s: number, e: number, word: number[]): boolean {
  if (e - s !== word.length) return false
  for (let i = 0; i < word.length; i++) if (b[s + i] !== word[i]) return false
  return true
}

/** A character of an address as `ip daddr` compares it: digits, hex letters, `.` and `:` (no prefix, range or quote). */
function isAddressByte(c: number): boolean {
  return (c >= 0x30 && c <= 0x3a) || c === 0x2e || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46)
}

/** A byte a word may hold outside quotes: printable ASCII but for the characters the check leaves to the reader. */
function isWordByte(c: number): boolean {
  return c > SPACE && c < 0x7f && c !== QUOTE && c !== HASH && c !== COMMA && c !== OPEN && c !== CLOSE
}

/** Reusable lists: word ranges of the element being read, and the elements found. */
class Found {
  wordStart = new Int32Array(64)
  wordEnd = new Int32Array(64)
  quoted = new Uint8Array(64)
  words = 0
  start = new Uint32Array(1024)
  end = new Uint32Array(1024)
  keyAt = new Uint32Array(1024)
  keyLength = new Uint32Array(1024)
  count = 0
  plain = true

  addWord(s: number, e: number, quoted: boolean): void {
    if (this.words === this.wordStart.length) {
      this.wordStart = grown(this.wordStart)
      this.wordEnd = grown(this.wordEnd)
      this.quoted = grown(this.quoted)
    }
    this.wordStart[this.words] = s
    this.wordEnd[this.words] = e
    this.quoted[this.words++] = quoted ? 1 : 0
  }

  addElement(s: number, e: number, keyAt: number, keyLength: number): void {
    if (this.count === this.start.length) {
      this.start = grown(this.start)
      this.end = grown(this.end)
      this.keyAt = grown(this.keyAt)
      this.keyLength = grown(this.keyLength)
    }
    this.start[this.count] = s
    this.end[this.count] = e
    this.keyAt[this.count] = keyAt
    this.keyLength[this.count++] = keyLength
  }
}

function grown<T extends Int32Array | Uint32Array | Uint8Array>(a: T): T {
  const next = new (a.constructor as new (n: number) => T)(a.length * 2)
  next.set(a)
  return next
}

/**
 * The element just read (its words in `found`), as parseOne reads it: whether it reads without a fault (false: leave
 * the body to the reader), noting where it is and its first key part.
 */
function endElement(b: Uint8Array, found: Found, elementStart: number, elementEnd: number): boolean {
  const n = found.words
  if (n === 0) return true
  found.words = 0
  const ws = found.wordStart
  const we = found.wordEnd
  let parts = 0
  let pending = 0
  let firstWords = 0
  let keyAt = 0
  let keyLength = 0
  let i = 0
  while (i < n) {
    const s = ws[i]
    const e = we[i]
    if (isWord(b, s, e, WORDS.comment)) {
      if (i + 1 >= n) return false
      i += 2
    } else if (isWord(b, s, e, WORDS.timeout) || isWord(b, s, e, WORDS.expires)) i += 2
    else if (isWord(b, s, e, WORDS.counter)) {
      i++
      while (i < n && (isWord(b, ws[i], we[i], WORDS.packets) || isWord(b, ws[i], we[i], WORDS.bytes))) i += 2
    } else if (e - s === 1 && b[s] === 0x2e /* . */) {
      if (pending > 0) parts++
      pending = 0
      i++
    } else if (e - s === 1 && b[s] === 0x3a /* : */) {
      if (pending > 0) parts++
      pending = 0
      if (i + 1 >= n) return false
      break
    } else {
      // A quoted key: the reader keeps its quotes; left to it.
      if (found.quoted[i]) return false
      if (parts === 0) {
        if (firstWords++ === 0) {
          keyAt = s
          keyLength = e - s
        }
      }
      pending++
      i++
    }
  }
  if (pending > 0) parts++
  if (parts === 0) return false
  if (firstWords !== 1) found.plain = false
  else for (let k = keyAt; k < keyAt + keyLength; k++) if (!isAddressByte(b[k])) found.plain = false
  found.addElement(elementStart, elementEnd, keyAt, keyLength)
  return true
}

/**
 * Reads the elements of `elements = { … }` from body[p] (just past its `{`) to its `}`: the index past that `}`, or -1
 * when the body is not of the plain form (see the top of this file).
 */
function checkElements(b: Uint8Array, p: number, found: Found): number {
  const n = b.length
  let elementStart = p
  let wordStart = -1
  while (p < n) {
    const c = b[p]
    if (isWordByte(c)) {
      if (wordStart < 0) wordStart = p
      p++
      continue
    }
    if (wordStart >= 0) {
      found.addWord(wordStart, p, false)
      wordStart = -1
    }
    if (c === SPACE || c === TAB || c === NEWLINE) p++
    else if (c === QUOTE) {
      // A word of its own: after a separator, closed on its line, followed by one.
      const prev = b[p - 1]
      if (prev !== SPACE && prev !== TAB && prev !== NEWLINE && prev !== COMMA && prev !== OPEN) return -1
      let q = p + 1
      while (q < n && b[q] !== QUOTE) {
        const d = b[q]
        if (d < SPACE || d >= 0x7f || d === OPEN || d === CLOSE) return -1
        q++
      }
      if (q >= n) return -1
      const next = b[q + 1]
      if (next !== SPACE && next !== TAB && next !== NEWLINE && next !== COMMA && next !== CLOSE) return -1
      found.addWord(p, q + 1, true)
      p = q + 1
    } else if (c === COMMA) {
      if (!endElement(b, found, elementStart, p)) return -1
      elementStart = ++p
    } else if (c === CLOSE) {
      if (!endElement(b, found, elementStart, p)) return -1
      return p + 1
    } else return -1
  }
  return -1
}

/** The shape of a set's body (the lines between its header and its `}`), or undefined: read it whole now. */
export function checkSetBody(b: Uint8Array): BodyShape | undefined {
  const n = b.length
  const found = new Found()
  let pos = 0
  let seenElements = false
  while (pos < n) {
    let s = pos
    let e = b.indexOf(NEWLINE, pos)
    if (e < 0) e = n
    pos = e + 1
    while (s < e && (b[s] === SPACE || b[s] === TAB)) s++
    while (e > s && (b[e - 1] === SPACE || b[e - 1] === TAB)) e--
    if (s === e || b[s] === HASH) continue
    if (!(e - s > 8 && isWord(b, s, s + 8, WORDS.elements))) {
      // Another statement (type, flags, comment, …): the reader passes over it when it holds no brace.
      for (let i = s; i < e; i++) {
        const c = b[i]
        if (c === OPEN || c === CLOSE || (c < SPACE && c !== TAB) || c >= 0x7f) return undefined
      }
      continue
    }
    // One `elements = {` statement per body (more are read whole).
    if (seenElements) return undefined
    seenElements = true
    let p = s + 8
    while (p < e && (b[p] === SPACE || b[p] === TAB)) p++
    if (b[p] !== 0x3d /* = */) return undefined
    p++
    while (p < e && (b[p] === SPACE || b[p] === TAB)) p++
    if (p >= e || b[p] !== OPEN) return undefined
    const after = checkElements(b, p + 1, found)
    if (after < 0) return undefined
    // Nothing but white space after the `}` on its line.
    let q = after
    while (q < n && (b[q] === SPACE || b[q] === TAB)) q++
    if (q < n && b[q] !== NEWLINE) return undefined
    pos = q + 1
  }
  const shape: BodyShape = {count: found.count, start: found.start, end: found.end}
  if (found.plain) {
    shape.keyAt = found.keyAt
    shape.keyLength = found.keyLength
  }
  return shape
}

/** Where the index found a set: its body's bytes and first line. */
export interface SetBody {
  bytes: Buffer
  line: number
}

/** A set or map of an indexed ruleset (see the top of this file); `elements` is read on first use. */
export class IndexedSet implements NftSet {
  declare readonly elements: NftElement[]
  #elements: NftElement[] | undefined = []
  #body: SetBody | undefined
  #shape: BodyShape | undefined

  constructor(
    readonly table: string,
    readonly name: string,
    readonly line: number,
    readonly isMap: boolean,
  ) {
    // An own property, as a plain set's: what compares sets compares their elements.
    Object.defineProperty(this, 'elements', {enumerable: true, get: () => this.#read()})
  }

  /** The set's body, found by the index: checked now, read whole now when the check cannot vouch for it. */
  readBody(body: SetBody): void {
    const shape = checkSetBody(body.bytes)
    if (!shape) {
      readSetBody(body.bytes.toString('utf8'), body.line, this)
      return
    }
    this.#elements = undefined
    this.#body = body
    this.#shape = shape
  }

  /**
   * The elements whose first key part is exactly `first`, in order, found by a native search of the body when every
   * element's first key part is one plain address (an `ip daddr` compares such a key by equality); undefined when the
   * set cannot tell that way (look at every element).
   */
  elementsStartingWith(first: string): NftElement[] | undefined {
    const shape = this.#shape
    if (this.#elements !== undefined || !shape?.keyAt || !shape.keyLength) return undefined
    // No plain key equals a text with other characters.
    for (let i = 0; i < first.length; i++) if (!isAddressByte(first.charCodeAt(i))) return []
    const bytes = this.#body!.bytes
    const key = Buffer.from(first, 'latin1')
    const out: NftElement[] = []
    for (let at = bytes.indexOf(key); at >= 0; at = bytes.indexOf(key, at + 1)) {
      const i = indexOfKey(shape.keyAt, shape.count, at)
      if (i >= 0 && shape.keyLength[i] === key.length) out.push(...this.#parse(shape.start[i], shape.end[i]))
    }
    return out
  }

  #parse(start: number, end: number): NftElement[] {
    return parseElements(this.#body!.bytes.toString('utf8', start, end))
  }

  #read(): NftElement[] {
    if (this.#elements === undefined) {
      const elements: NftElement[] = []
      const {bytes, line} = this.#body!
      readSetBody(bytes.toString('utf8'), line, {
        table: this.table,
        name: this.name,
        line: this.line,
        isMap: this.isMap,
        elements,
      })
      this.#elements = elements
      this.#body = undefined
      this.#shape = undefined
    }
    return this.#elements
  }
}

/** The index of `at` in the ascending keyAt[0, count), or -1. */
function indexOfKey(keyAt: Uint32Array, count: number, at: number): number {
  let lo = 0
  let hi = count - 1
  while (lo <= hi) {
    const mid = (lo + hi) >> 1
    const v = keyAt[mid]
    if (v === at) return mid
    if (v < at) lo = mid + 1
    else hi = mid - 1
  }
  return -1
}
