/**
 * What JSON.stringify leaves as it is that a terminal acts on: DEL, C1 controls, the line and paragraph separators,
 * format characters (bidi overrides, zero-width characters, the byte order mark). It escapes C0 controls itself.
 * In JSON text these can stand only inside strings, where \uXXXX means the same character: escaping them changes no
 * value, and a document piped to a terminal cannot act on it. Made on first need (V8 builds a Unicode property's class
 * from ICU's tables when it makes the expression, a part of a short run's start).
 */
let rawControls: RegExp | undefined
const RAW_CONTROLS = () => (rawControls ??= /[\u007f-\u009f\u2028\u2029\p{Cf}]/gu)

const escape = (c: string) =>
  Array.from({length: c.length}, (_, i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`).join('')

/**
 * The blocks every character RAW_CONTROLS matches lies in (the C1 controls and U+00AD, Arabic and Syriac, Mongolian,
 * General Punctuation, U+FEFF, Specials; one beyond the BMP is a surrogate pair): text with no code unit in them is
 * left as it is, found by this plain search. A scan writes tens of MB of JSON, nearly all ASCII with a few arrows and
 * ticks, and the Unicode property search over all of it was a measurable part of a scan. json-writer.test.ts checks
 * every code point of the running Node.js's Unicode against it.
 */
const MAYBE_CONTROLS = /[\u007f-\u00ad\u0600-\u08ff\u180e\u2000-\u206f\ud800-\udfff\ufeff\ufff0-\uffff]/

/** JSON text with the characters above escaped; the same value when parsed. */
export function escapeJsonControls(json: string): string {
  return MAYBE_CONTROLS.test(json) ? json.replace(RAW_CONTROLS(), escape) : json
}

/** Pieces are gathered up to this many characters before they are written. */
const PIECE = 1 << 16

/**
 * Writes `value` as JSON.stringify(value, null, 2) and a newline would (controls escaped as above), in pieces of
 * about 64 KB: a document of any size is written, where one string of it would be limited to V8's longest string
 * (about 512 MB: `svc -o json --explain` of a Service with 20,000 endpoints, or of a walk through jump loops, failed
 * with "Invalid string length").
 */
export function writeJson(value: unknown, write: (chunk: string) => void): void {
  const parts: string[] = []
  let size = 0
  const push = (s: string) => {
    parts.push(s)
    size += s.length
    if (size >= PIECE) flush()
  }
  const flush = () => {
    if (parts.length > 0) write(escapeJsonControls(parts.join('')))
    parts.length = 0
    size = 0
  }
  emit(value, '', push)
  push('\n')
  flush()
}

/** Whether JSON.stringify leaves a property out (undefined, a function, a symbol). */
const omitted = (v: unknown) => v === undefined || typeof v === 'function' || typeof v === 'symbol'

function emit(input: unknown, indent: string, push: (s: string) => void): void {
  let value = input
  if (value !== null && typeof value === 'object' && typeof (value as {toJSON?: unknown}).toJSON === 'function')
    value = (value as {toJSON: () => unknown}).toJSON()
  if (value === null || typeof value !== 'object') {
    push(JSON.stringify(value) ?? 'null')
    return
  }
  const inner = `${indent}  `
  if (Array.isArray(value)) {
    if (value.length === 0) return push('[]')
    push('[\n')
    value.forEach((v, i) => {
      push(inner)
      if (omitted(v)) push('null')
      else emit(v, inner, push)
      push(i < value.length - 1 ? ',\n' : '\n')
    })
    push(`${indent}]`)
    return
  }
  const keys = Object.keys(value).filter((k) => !omitted((value as Record<string, unknown>)[k]))
  if (keys.length === 0) return push('{}')
  push('{\n')
  keys.forEach((k, i) => {
    push(`${inner}${JSON.stringify(k)}: `)
    emit((value as Record<string, unknown>)[k], inner, push)
    push(i < keys.length - 1 ? ',\n' : '\n')
  })
  push(`${indent}}`)
}
