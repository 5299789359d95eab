import {ParseError} from './parse-error.js'
import {parseElements, type NftElement} from './nft-elements.js'

export {parseElements, type NftElement}

/** `nft list ruleset` text, parsed into tables, base chains, regular chains, sets and maps. Rule text is kept whole. */
export interface NftRule {
  table: string
  chain: string
  line: number
  text: string
}

export interface NftChain {
  table: string
  name: string
  line: number
  /** Base chains only. */
  base?: {type: string; hook: string; priority: number; policy: 'accept' | 'drop'}
  rules: NftRule[]
}

export interface NftSet {
  table: string
  name: string
  line: number
  isMap: boolean
  /** Each element: its key parts (split on " . "), for maps the value text, and its comment. */
  elements: NftElement[]
}

export interface NftTable {
  family: string
  name: string
  /** "family name", as printed in traces. */
  id: string
  chains: Map<string, NftChain>
  sets: Map<string, NftSet>
}

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

/** Splits on `sep` outside braces and quotes. */
export function splitTop(text: string, sep: string): string[] {
  const out: string[] = []
  let depth = 0
  let quoted = false
  let cur = ''
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]
    if (ch === '"') quoted = !quoted
    if (!quoted && ch === '{') depth++
    if (!quoted && ch === '}') depth--
    if (!quoted && depth === 0 && text.startsWith(sep, i)) {
      out.push(cur)
      cur = ''
      i += sep.length - 1
      continue
    }
    cur += ch
  }
  out.push(cur)
  return out.map((s) => s.trim()).filter((s) => s !== '')
}

export class NftRuleset {
  readonly tables: NftTable[] = []

  static parse(text: string): NftRuleset {
    const rs = new NftRuleset()
    const lines = text.split('\n')
    let table: NftTable | undefined
    let chain: NftChain | undefined
    let set: NftSet | undefined
    for (let i = 0; i < lines.length; i++) {
      const lineNo = i + 1
      let line = lines[i].trim()
      if (line === '' || line.startsWith('#')) continue
      // A statement continues while its braces are open (multi-line element lists, anonymous sets).
      let depth = braceDelta(line)
      const opensBlock = line.endsWith('{') && /^(table|chain|set|map)\s/.test(line)
      if (!opensBlock && depth > 0) {
        const parts = [line]
        while (depth > 0 && i + 1 < lines.length) {
          const next = lines[++i].trim()
          parts.push(next)
          depth += braceDelta(next)
        }
        if (depth > 0) throw new ParseError(lineNo, `"{" opened here is never closed (cut-off ruleset?)`)
        line = parts.join(' ')
      }
      if (line === '}') {
        if (set) set = undefined
        else if (chain) chain = undefined
        else if (table) table = undefined
        else throw new ParseError(lineNo, 'unbalanced "}"')
        continue
      }
      let m: RegExpExecArray | null
      if (!table) {
        m = /^table\s+(ip|ip6|inet|arp|bridge|netdev)\s+(\S+)\s*\{$/.exec(line)
        if (!m) throw new ParseError(lineNo, `expected "table FAMILY NAME {", found "${line.slice(0, 60)}"`)
        table = {family: m[1], name: unquote(m[2]), id: `${m[1]} ${unquote(m[2])}`, chains: new Map(), sets: new Map()}
        rs.tables.push(table)
        continue
      }
      if (set) {
        m = /^elements\s*=\s*\{(.*)\}$/.exec(line)
        if (m) {
          try {
            for (const el of parseElements(m[1])) set.elements.push(el)
          } catch (e) {
            if (e instanceof ParseError)
              throw new ParseError(lineNo, `${e.message} in ${set.isMap ? 'map' : 'set'} ${set.name}`, {cause: e})
            throw e
          }
        }
        continue
      }
      if (chain) {
        // Most lines of a chain are rules: a prefix test spares them the regular expressions.
        m = line.startsWith('type')
          ? /^type\s+(\w+)\s+hook\s+(\w+)(?:\s+device\s+\S+)?\s+priority\s+([^;]+);\s*(?:policy\s+(accept|drop);)?/.exec(
              line,
            )
          : null
        if (m) {
          chain.base = {
            type: m[1],
            hook: m[2],
            priority: parsePriority(m[3], lineNo),
            policy: (m[4] as 'accept' | 'drop') ?? 'accept',
          }
          continue
        }
        if (line.startsWith('comment') && /^comment\s+"/.test(line)) continue
        chain.rules.push({table: table.id, chain: chain.name, line: lineNo, text: line})
        continue
      }
      m = line.startsWith('chain') ? /^chain\s+(\S+)\s*\{$/.exec(line) : null
      if (m) {
        chain = {table: table.id, name: unquote(m[1]), line: lineNo, rules: []}
        table.chains.set(chain.name, chain)
        continue
      }
      m = /^(set|map)\s+(\S+)\s*\{$/.exec(line)
      if (m) {
        set = {table: table.id, name: unquote(m[2]), line: lineNo, isMap: m[1] === 'map', elements: []}
        table.sets.set(set.name, set)
        continue
      }
      if (/^(comment|flags)\s/.test(line)) continue
      throw new ParseError(lineNo, `unexpected "${line.slice(0, 60)}" in table ${table.id}`)
    }
    if (table) throw new ParseError(lines.length, `table ${table.id} is not closed`)
    if (rs.tables.length === 0) throw new ParseError(1, 'no "table" found: not `nft list ruleset` output')
    return rs
  }

  table(id: string): NftTable | undefined {
    return this.tables.find((t) => t.id === id)
  }

  /**
   * Why a walk of a packet of these families cannot pass this hook in this input (undefined: it can): kube-proxy's
   * table is there with chains but without a base chain kube-proxy always writes at this hook (nat at prerouting, output
   * and postrouting; filter at input, forward and output), so what it does there is not in the input (a trimmed paste).
   */
  missingHook(hook: string, families: string[]): string | undefined {
    for (const t of this.tables) {
      if (!families.includes(t.family) || t.name !== 'kube-proxy' || t.chains.size === 0) continue
      const chains = [...t.chains.values()]
      const whole = `paste \`nft list table ${t.id}\` whole`
      if (!chains.some((c) => c.base !== undefined)) {
        const names = [...t.chains.keys()]
        return `no hook into table ${t.id} in this input: it has chains (${names.slice(0, 3).join(', ')}${names.length > 3 ? `, ${names.length - 3} more` : ''}) but no base chain (a trimmed table); ${whole}`
      }
      const missing = KUBE_PROXY_BASE_HOOKS.filter(
        ([type, h]) => h === hook && !chains.some((c) => c.base?.type === type && c.base.hook === hook),
      )
      if (missing.length > 0)
        return `table ${t.id} in this input has no base chain of ${missing.map(([type]) => `type ${type} hook ${hook}`).join(' nor ')} (a trimmed table): what kube-proxy does there is not known; ${whole}`
    }
    return undefined
  }

  /** Base chains at a hook, in the order the kernel runs them (priority, then definition order). */
  baseChains(hook: string, families: string[]): NftChain[] {
    return this.tables
      .filter((t) => families.includes(t.family))
      .flatMap((t) => [...t.chains.values()].filter((c) => c.base?.hook === hook))
      .sort((a, b) => a.base!.priority - b.base!.priority)
  }
}

/** The base chains (type, hook) every nftables-mode kube-proxy writes in its table. */
const KUBE_PROXY_BASE_HOOKS: ReadonlyArray<readonly [string, string]> = [
  ['nat', 'prerouting'],
  ['nat', 'output'],
  ['nat', 'postrouting'],
  ['filter', 'input'],
  ['filter', 'forward'],
  ['filter', 'output'],
]

function braceDelta(text: string): number {
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

function unquote(s: string): string {
  return s.charCodeAt(0) === 0x22 /* " */ ? s.replace(/^"(.*)"$/, '$1') : s
}
