/**
 * What a terminal would act on rather than show, in text that came from a node or the API: C0 and C1 controls (line
 * breaks, tabs and ESC included), DEL, the Unicode line and paragraph separators, and format characters (bidi
 * overrides and isolates, zero-width characters, the byte order mark). One iptables comment or one object name can
 * otherwise clear the screen, move the cursor, set the window title, write the clipboard (OSC 52), reorder a line, or
 * start a line of its own that forges a verdict.
 */
const CONTROL = '[\\p{Cc}\\p{Cf}\\p{Zl}\\p{Zp}]'

/**
 * The blocks every character CONTROL matches lies in (C0, DEL and C1 with U+00AD, Arabic and Syriac, Mongolian, General
 * Punctuation, U+FEFF, Specials; one beyond the BMP is a surrogate pair), as json-writer.ts MAYBE_CONTROLS: text with
 * no code unit in them (nearly all) is shown as it is, found by this plain search. The Unicode property search is made
 * on first need: V8 builds its classes from ICU's tables when it makes the expression, a part of every short run's
 * start. hostile-output.test.ts checks every code point of the running Node.js's Unicode against it.
 */
// eslint-disable-next-line no-control-regex -- the C0 controls are what it looks for
const MAYBE_CONTROL = /[\x00-\x1f\x7f-\xad\u0600-\u08ff\u180e\u2000-\u206f\ud800-\udfff\ufeff\ufff0-\uffff]/
let controls: RegExp | undefined

const NAMED: Record<string, string> = {'\n': '\\n', '\r': '\\r', '\t': '\\t'}

const hex = (n: number, digits: number) => n.toString(16).padStart(digits, '0')

/** One control as the escape a reader recognises: \n, \r, \t, \x1b, \u202e, \u{e0001}. */
function escaped(c: string): string {
  const code = c.codePointAt(0)!
  return (
    NAMED[c] ?? (code <= 0xff ? `\\x${hex(code, 2)}` : code <= 0xffff ? `\\u${hex(code, 4)}` : `\\u{${hex(code, 1)}}`)
  )
}

/**
 * The text with every control shown as its escape (ESC as \x1b, a line break as \n), so it prints as one harmless
 * line that still says what was there: a name with a line break in it cannot start a line of its own.
 */
export function printable(text: string): string {
  return MAYBE_CONTROL.test(text) ? text.replace((controls ??= new RegExp(CONTROL, 'gu')), escaped) : text
}

/**
 * The longest string a human format shows whole (a kube-proxy rule is a few hundred characters). A longer one is cut,
 * saying how much was left out: a rule of 40,000 characters in a paste took 4 s to wrap to a terminal's width, each
 * time it was shown; -o json keeps every string whole.
 */
const MAX_SHOWN = 2_000

/** The printable text, cut after MAX_SHOWN characters (never inside a surrogate pair). */
function shown(text: string): string {
  const p = printable(text)
  if (p.length <= MAX_SHOWN) return p
  const end = /[\ud800-\udbff]/.test(p[MAX_SHOWN - 1]) ? MAX_SHOWN - 1 : MAX_SHOWN
  return `${p.slice(0, end)}… (${p.length - end} more characters, in -o json)`
}

/**
 * A copy of a document (a report, a trace, a scan, a map of them) with every string in it made printable, keys
 * included, and cut when very long: what the human renderers are given, so that no string they lay out can reach the
 * terminal as a control. The layout's own line breaks and colours are added after. Typed arrays and other non-plain
 * objects are kept as they are (they are not text).
 */
export function printableDocument<T>(document: T): T {
  return printableValue(document) as T
}

function printableValue(value: unknown): unknown {
  if (typeof value === 'string') return shown(value)
  if (Array.isArray(value)) return value.map(printableValue)
  if (value instanceof Map) return new Map([...value].map(([k, v]) => [printableValue(k), printableValue(v)]))
  if (value === null || typeof value !== 'object') return value
  const proto = Object.getPrototypeOf(value)
  if (proto !== Object.prototype && proto !== null) return value
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(value)) out[shown(k)] = printableValue(v)
  return out
}
