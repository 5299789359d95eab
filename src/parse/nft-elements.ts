import {ParseError} from './parse-error.js'
/**
 * The element list of an nftables set or map, as `nft list ruleset` prints it and as it appears inline in a rule:
 * `10.96.7.7 . tcp . 80 comment "shop/web:http" : goto svc-x, 10.0.0.0/8 timeout 1h expires 59m counter packets 0 bytes 0`.
 * Read in one pass over the text: element comments, timeouts, expiry and counters are attributes, never part of the key.
 */
export interface NftElement {
  /** The key parts, split on " . " (one part for a plain set). */
  key: string[]
  /** For maps: the value text, e.g. "goto reject-chain", "drop", "10.244.1.5 . 8080". */
  value?: string
  comment?: string
}

/**
 * What separates words: any white space, as JavaScript's \s knows it, so the one test that skips white space is the
 * one that ends a word (a vertical tab, a form feed or a no-break space pasted from a web page included).
 */
const SPACE = /\s/
const QUOTE = 0x22

/** Whether the character code is white space as SPACE knows it (ASCII decided without a regular expression call). */
function isSpace(code: number): boolean {
  if (code < 128) return code === 32 || (code >= 9 && code <= 13)
  return SPACE.test(String.fromCharCode(code))
}

/** Words of one element, quoted strings kept whole (quotes included). */
function words(text: string): string[] {
  const out: string[] = []
  let i = 0
  const n = text.length
  while (i < n) {
    if (isSpace(text.charCodeAt(i))) {
      i++
      continue
    }
    const start = i
    if (text.charCodeAt(i) === QUOTE) {
      const end = text.indexOf('"', i + 1)
      if (end < 0) throw new ParseError(0, `unterminated quote in element "${text.slice(0, 80)}"`)
      i = end + 1
    } else while (i < n && !isSpace(text.charCodeAt(i))) i++
    out.push(text.slice(start, i))
  }
  return out
}

/** A quoted word without its quotes; any other word as it is. */
function unquoted(word: string): string {
  return word.length >= 2 && word.charCodeAt(0) === QUOTE && word.charCodeAt(word.length - 1) === QUOTE
    ? word.slice(1, -1)
    : word
}

// One pass, no array or closure per element beyond its words (a map of 50,000 elements is read whole).
function parseOne(text: string): NftElement {
  const ws = words(text)
  const key: string[] = []
  /** The key part being read: its words joined by a space (undefined: none yet). */
  let pending: string | undefined
  let comment: string | undefined
  let value: string | undefined
  let i = 0
  while (i < ws.length) {
    const w = ws[i]
    if (w === 'comment') {
      const c = ws[i + 1]
      if (c === undefined) throw new ParseError(0, `element comment without text in "${text.slice(0, 80)}"`)
      comment = unquoted(c)
      i += 2
    } else if (w === 'timeout' || w === 'expires') i += 2
    else if (w === 'counter') {
      i++
      while (ws[i] === 'packets' || ws[i] === 'bytes') i += 2
    } else if (w === '.') {
      if (pending !== undefined) key.push(pending)
      pending = undefined
      i++
    } else if (w === ':') {
      if (pending !== undefined) key.push(pending)
      pending = undefined
      value = ''
      for (let j = i + 1; j < ws.length; j++) value = j === i + 1 ? ws[j] : `${value} ${ws[j]}`
      if (value === '') throw new ParseError(0, `map element without a value in "${text.slice(0, 80)}"`)
      break
    } else {
      pending = pending === undefined ? w : `${pending} ${w}`
      i++
    }
  }
  if (pending !== undefined) key.push(pending)
  if (key.length === 0) throw new ParseError(0, `element without a key in "${text.slice(0, 80)}"`)
  const el: NftElement = {key}
  if (value !== undefined) el.value = value
  if (comment !== undefined) el.comment = comment
  return el
}

/** Whether text[start, end) holds something beside white space. */
function hasWord(text: string, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (!isSpace(text.charCodeAt(i))) return true
  return false
}

/** Parses the inside of `{ … }`: elements separated by commas outside quotes and nested braces. */
export function parseElements(body: string): NftElement[] {
  const out: NftElement[] = []
  let depth = 0
  let start = 0
  const n = body.length
  for (let i = 0; i < n; i++) {
    const ch = body.charCodeAt(i)
    if (ch === QUOTE) {
      const end = body.indexOf('"', i + 1)
      if (end < 0) throw new ParseError(0, `unterminated quote in element list "${body.slice(i, i + 80)}"`)
      i = end
    } else if (ch === 0x7b /* { */) depth++
    else if (ch === 0x7d /* } */) depth--
    else if (ch === 0x2c /* , */ && depth === 0) {
      if (hasWord(body, start, i)) out.push(parseOne(body.slice(start, i)))
      start = i + 1
    }
  }
  if (hasWord(body, start, n)) out.push(parseOne(body.slice(start)))
  return out
}
