import stringWidth from 'string-width'
import Table from 'cli-table3'
import wrapAnsi from 'wrap-ansi'

/**
 * How wide the human output may be: the terminal's width when stdout is one; else $COLUMNS when set (a positive
 * integer); else unlimited, so a pipe or a log file without $COLUMNS gets whole lines (a grep finds a whole finding).
 * Below MIN_WIDTH the output is laid out for MIN_WIDTH.
 */
export function outputWidth(stream: {isTTY?: boolean; columns?: number}, env: NodeJS.ProcessEnv = process.env): number {
  if (stream.isTTY && stream.columns && stream.columns > 0) return Math.max(stream.columns, MIN_WIDTH)
  const n = Number(env.COLUMNS)
  if (Number.isInteger(n) && n > 0) return Math.max(n, MIN_WIDTH)
  return Number.POSITIVE_INFINITY
}

const MIN_WIDTH = 40

/** Columns a string takes on a terminal: ANSI escapes count 0, ✓ ✗ → count 1, wide CJK 2. */
export function displayWidth(s: string): number {
  // Printable ASCII and the report's own signs are one column a character: string-width segments every string by
  // grapheme (Intl.Segmenter), the largest self time of the bundled example's report in a CPU profile of svc, and its
  // first use loads ICU's data (the bundle loads string-width on its first call: scripts/bundle.mjs).
  if (ONE_COLUMN_EACH.test(s)) return s.length
  const plain = s.replace(COLOUR, '')
  return ONE_COLUMN_EACH.test(plain) ? plain.length : stringWidth(s)
}

/** Printable ASCII and the signs the report prints (× – ’ … → ⇒ box drawing ✓ ✗): string-width counts each 1. */
export const ONE_COLUMN_EACH = /^[\x20-\x7e\u00d7\u2013\u2019\u2026\u2192\u21d2\u2500-\u257f\u2713\u2717]*$/

/** chalk's colour and style sequences (SGR), which take no column. */
// eslint-disable-next-line no-control-regex -- the escape character starts every such sequence
const COLOUR = /\x1b\[[0-9;]*m/g

/** The widest line of a block. */
function widest(text: string): number {
  return Math.max(0, ...text.split('\n').map(displayWidth))
}

/**
 * Prose wrapped at word boundaries (a word longer than a line is cut): the first line starts with `first`, the
 * others with `hang`.
 */
export function wrapProse(text: string, width: number, first = '', hang = first + '  '): string[] {
  if (!Number.isFinite(width) || displayWidth(first + text) <= width) return [first + text]
  const room = Math.max(width - displayWidth(hang), 20)
  // A first line with a wider start than the others: a placeholder glued to the first word takes the difference.
  const extra = Math.max(0, Math.min(displayWidth(first) - displayWidth(hang), room - 10))
  const lines = wrapAnsi(PAD.repeat(extra) + text, room, {hard: true, trim: true}).split('\n')
  return lines.map((l, i) => (i === 0 ? first + l.slice(extra) : hang + l))
}

/** A placeholder character: neither space nor control, so wrap-ansi neither breaks at it nor trims it. */
const PAD = 'x'

/** A rule or other verbatim line: cut anywhere, continuation lines indented by `hang`. */
export function wrapVerbatim(text: string, width: number, first: string, hang: string): string[] {
  if (!Number.isFinite(width) || displayWidth(first + text) <= width) return [first + text]
  const room = Math.max(width - Math.max(displayWidth(first), displayWidth(hang)), 20)
  return wrapAnsi(text, room, {hard: true, trim: false, wordWrap: true})
    .split('\n')
    .map((l, i) => (i === 0 ? first : hang) + l.trimEnd())
}

/**
 * A shell command split into its words as the shell would (quotes and backslashes kept in the words), and the
 * trailing comment (`# ...`) if any. An unmatched quote makes the rest of the line one word.
 */
function shellWords(cmd: string): {words: string[]; comment: string | null} {
  const words: string[] = []
  let i = 0
  while (i < cmd.length) {
    while (cmd[i] === ' ' || cmd[i] === '\t') i++
    if (i >= cmd.length) break
    if (cmd[i] === '#') return {words, comment: cmd.slice(i)}
    let word = ''
    while (i < cmd.length && cmd[i] !== ' ' && cmd[i] !== '\t') {
      const ch = cmd[i]
      if (ch === '\\' && i + 1 < cmd.length) {
        word += cmd.slice(i, i + 2)
        i += 2
      } else if (ch === "'" || ch === '"') {
        let j = i + 1
        while (j < cmd.length && cmd[j] !== ch) j += ch === '"' && cmd[j] === '\\' ? 2 : 1
        if (j >= cmd.length) {
          words.push(word + cmd.slice(i))
          return {words, comment: null}
        }
        word += cmd.slice(i, j + 1)
        i = j + 1
      } else {
        word += ch
        i++
      }
    }
    words.push(word)
  }
  return {words, comment: null}
}

/**
 * A command that stays pasteable: broken only between words outside quotes, each broken line ending in ` \` (a shell
 * line continuation), so pasting the lines runs the same command. A trailing `# comment` goes on lines of its own,
 * each starting with `#`. A word longer than the line is left whole.
 */
export function wrapCommand(cmd: string, width: number, first: string, hang: string): string[] {
  if (!Number.isFinite(width) || displayWidth(first + cmd) <= width) return [first + cmd]
  const {words, comment} = shellWords(cmd)
  const lines: string[] = []
  let line = first
  let empty = true
  for (const w of words) {
    if (!empty && displayWidth(`${line} ${w} \\`) > width) {
      lines.push(line + ' \\')
      line = hang + w
    } else line = empty ? line + w : `${line} ${w}`
    empty = false
  }
  if (comment !== null) {
    const text = comment.replace(/^#+\s*/, '')
    if (displayWidth(`${line}   ${comment}`) <= width) line = `${line}   ${comment}`
    else {
      lines.push(line)
      line = ''
      lines.push(...wrapProse(text, width, hang + '# ', hang + '# '))
    }
  }
  if (line) lines.push(line)
  return lines
}

/** A table's cell: text, or one cell spanning the rest of the row. */
export type Cell = string | {colSpan: number; content: string}

/**
 * A table if one fits the width: with the full heading, else with the short one (and its legend); else nothing, and
 * the caller prints its per-row list instead.
 */
export function fittingTable(
  heads: Array<{head: string[]; legend?: string}>,
  rows: Cell[][],
  width: number,
): string[] | undefined {
  for (const {head, legend} of heads) {
    // No rule between rows. cli-table3 still draws the junctions of a row spanning columns where that rule would be
    // (a stray `┴┴┴` line): compact leaves out the rules between body rows, and the one under the heading is dropped.
    const table = new Table({
      head,
      style: {head: [], border: [], compact: true},
      chars: {mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': ''},
    })
    table.push(...rows)
    const text = table
      .toString()
      .split('\n')
      .filter((l) => !/^[┴┬┼]+$/.test(l))
      .join('\n')
    if (widest(text) <= width) return [text, ...(legend ? wrapProse(legend, width, '', '  ') : [])]
  }
  return undefined
}
