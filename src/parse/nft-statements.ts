import {ParseError} from './parse-error.js'
import {parseElements} from './nft-elements.js'
import type {NftBase, NftChain, NftSet} from './nft-types.js'

/**
 * The statements of a block of `nft list ruleset` text (a chain's or a set's body), as the ruleset's index found them:
 * one line each, or the lines a statement's open braces hold together (multi-line element lists, anonymous sets).
 */

const PRIORITY_NAMES: Record<string, number> = {
  raw: -300,
  mangle: -150,
  dstnat: -100,
  filter: 0,
  security: 50,
  srcnat: 100,
  out: 100,
  first: -2147483648,
  last: 2147483647,
}

function parsePriority(text: string, line: number): number {
  const m = /^([a-z]+|-?\d+)\s*(?:([+-])\s*(\d+))?$/.exec(text.trim())
  if (!m) throw new ParseError(line, `priority "${text}" not understood`)
  const base = /^-?\d+$/.test(m[1]) ? Number(m[1]) : PRIORITY_NAMES[m[1]]
  if (base === undefined) throw new ParseError(line, `priority name "${m[1]}" not known`)
  return base + (m[2] ? (m[2] === '-' ? -1 : 1) * Number(m[3]) : 0)
}

/** A chain's `type T hook H priority P; policy X;` statement, or undefined when the statement is not one (a rule). */
export function baseOf(statement: string, line: number): NftBase | undefined {
  const m =
    /^type\s+(\w+)\s+hook\s+(\w+)(?:\s+device\s+\S+)?\s+priority\s+([^;]+);\s*(?:policy\s+(accept|drop);)?/.exec(
      statement,
    )
  if (!m) return undefined
  return {
    type: m[1],
    hook: m[2],
    priority: parsePriority(m[3], line),
    policy: (m[4] as 'accept' | 'drop') ?? 'accept',
  }
}

/** Whether a line opens a table, chain, set or map (its brace is the block's, not a statement's to close). */
export function opensBlock(line: string): boolean {
  return line.endsWith('{') && /^(table|chain|set|map)\s/.test(line)
}

/** The `{` a line opens minus the `}` it closes, outside quotes. */
export function braceDelta(text: string): number {
  // Most lines (rules, elements) hold no brace at all.
  if (text.indexOf('{') < 0 && text.indexOf('}') < 0) return 0
  let d = 0
  let quoted = false
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i)
    if (ch === 0x22 /* " */) quoted = !quoted
    else if (!quoted && ch === 0x7b /* { */) d++
    else if (!quoted && ch === 0x7d /* } */) d--
  }
  return d
}

export function unquote(s: string): string {
  return s.charCodeAt(0) === 0x22 /* " */ ? s.replace(/^"(.*)"$/, '$1') : s
}

/** Each statement of a body's text, with its first line's number (`firstLine`: the number of the text's first line). */
function forEachStatement(text: string, firstLine: number, onStatement: (line: string, lineNo: number) => void): void {
  const lines = text.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const lineNo = firstLine + i
    let line = lines[i].trim()
    if (line === '' || line.startsWith('#')) continue
    let depth = braceDelta(line)
    if (!opensBlock(line) && depth > 0) {
      const parts = [line]
      while (depth > 0 && i + 1 < lines.length) {
        const next = lines[++i].trim()
        parts.push(next)
        depth += braceDelta(next)
      }
      if (depth > 0) throw new ParseError(lineNo, `"{" opened here is never closed (cut-off ruleset?)`)
      line = parts.join(' ')
    }
    onStatement(line, lineNo)
  }
}

/** Reads a chain's body (the lines between its `chain NAME {` and its `}`) into its base and rules. */
export function readChainBody(text: string, firstLine: number, chain: NftChain): void {
  forEachStatement(text, firstLine, (line, lineNo) => {
    // Most lines of a chain are rules: a prefix test spares them the regular expressions.
    const base = line.startsWith('type') ? baseOf(line, lineNo) : undefined
    if (base) {
      chain.base = base
      return
    }
    if (line.startsWith('comment') && /^comment\s+"/.test(line)) return
    chain.rules.push({table: chain.table, chain: chain.name, line: lineNo, text: line})
  })
}

/** Reads a set's or map's body into its elements. */
export function readSetBody(text: string, firstLine: number, set: NftSet): void {
  forEachStatement(text, firstLine, (line, lineNo) => {
    const m = /^elements\s*=\s*\{(.*)\}$/.exec(line)
    if (!m) return
    try {
      for (const el of parseElements(m[1])) set.elements.push(el)
    } catch (e) {
      if (e instanceof ParseError)
        throw new ParseError(lineNo, `${e.message} in ${set.isMap ? 'map' : 'set'} ${set.name}`, {cause: e})
      throw e
    }
  })
}
