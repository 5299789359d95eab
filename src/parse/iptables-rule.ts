import {ParseError} from './parse-error.js'
/** One iptables-save rule line split into what it matches and what it does. */
export interface RuleOption {
  name: string
  values: string[]
  negated: boolean
}

interface RuleMatch {
  /** '' for iptables' own matches (-s, -d, -p, -i, -o, -f); else the -m module name. */
  module: string
  options: RuleOption[]
}

export interface ParsedRule {
  table: string
  chain: string
  line: number
  text: string
  matches: RuleMatch[]
  target?: string
  /** -g (goto) rather than -j (jump). */
  isGoto: boolean
  targetOptions: RuleOption[]
  /** Why the rule could not be read (then it matches nothing and has no target): the tracer makes it UNKNOWN. */
  unparsable?: string
}

const SPACE = 32
const TAB = 9
/** A run of characters outside quotes, or a quoted part (its text in group 1: \\ takes the next character as it is). */
const TOKEN_PART = /[^ \t"]+|"((?:[^"\\]|\\[^])*)"/y
const ESCAPED = /\\([^])/g

/** Splits a rule line the way iptables-save quotes it: double quotes group words, \" and \\ escape. */
export function tokenize(text: string): string[] {
  // Most rules (all of a big cluster's: kube-proxy drops comments there) have no quote and no tab: words between spaces.
  if (text.indexOf('"') < 0 && text.indexOf('\t') < 0) {
    const out: string[] = []
    const n = text.length
    let i = 0
    while (i < n) {
      if (text.charCodeAt(i) === 32) {
        i++
        continue
      }
      let j = text.indexOf(' ', i)
      if (j < 0) j = n
      out.push(text.slice(i, j))
      i = j + 1
    }
    return out
  }
  // Quoted (comments): each plain run or quoted part matched by TOKEN_PART, not copied a character at a time (a loop
  // over every character is soon optimised by V8, a compile that cost a short run more than all its tokenizing).
  const out: string[] = []
  const n = text.length
  let i = 0
  while (i < n) {
    let c = text.charCodeAt(i)
    if (c === SPACE || c === TAB) {
      i++
      continue
    }
    let tok = ''
    while (i < n && c !== SPACE && c !== TAB) {
      TOKEN_PART.lastIndex = i
      const m = TOKEN_PART.exec(text)
      if (m === null) throw new ParseError(0, 'unterminated quote')
      const quoted = m[1]
      tok += quoted === undefined ? m[0] : quoted.includes('\\') ? quoted.replace(ESCAPED, '$1') : quoted
      i = TOKEN_PART.lastIndex
      c = text.charCodeAt(i)
    }
    out.push(tok)
  }
  return out
}

const OWN_OPTIONS: Record<string, string> = {
  '-s': 's',
  '--source': 's',
  '--src': 's',
  '-d': 'd',
  '--destination': 'd',
  '--dst': 'd',
  '-p': 'p',
  '--protocol': 'p',
  '-i': 'i',
  '--in-interface': 'i',
  '-o': 'o',
  '--out-interface': 'o',
  '-f': 'f',
  '--fragment': 'f',
}

function isOption(tok: string): boolean {
  if (tok.length < 2 || tok.charCodeAt(0) !== 45 /* - */) return false
  const c = tok.charCodeAt(1)
  return c < 48 || c > 57
}

/** Parses "-A CHAIN ..." (the leading "-A CHAIN" included). */
export function parseRule(table: string, line: number, text: string): ParsedRule {
  const toks = tokenize(text)
  if (toks[0] !== '-A' || toks.length < 2) throw new ParseError(0, 'a rule must start with -A CHAIN')
  const rule: ParsedRule = {table, chain: toks[1], line, text, matches: [], isGoto: false, targetOptions: []}
  const own: RuleMatch = {module: '', options: []}
  let current: RuleMatch | undefined
  let negateNext = false
  let inTarget = false
  let i = 2
  while (i < toks.length) {
    const tok = toks[i]
    if (tok === '!') {
      negateNext = true
      i++
      continue
    }
    if (tok === '-m' || tok === '--match') {
      current = {module: toks[i + 1] ?? '', options: []}
      rule.matches.push(current)
      inTarget = false
      i += 2
      continue
    }
    if (tok === '-j' || tok === '--jump' || tok === '-g' || tok === '--goto') {
      if (toks[i + 1] === undefined) throw new ParseError(0, `${tok} without a target`)
      rule.target = toks[i + 1]
      rule.isGoto = tok === '-g' || tok === '--goto'
      inTarget = true
      i += 2
      continue
    }
    if (!isOption(tok)) throw new ParseError(0, `unexpected word "${tok}"`)
    const values: string[] = []
    let j = i + 1
    while (j < toks.length && !isOption(toks[j]) && toks[j] !== '!') values.push(toks[j++])
    const option: RuleOption = {name: tok, values, negated: negateNext}
    negateNext = false
    const ownName = OWN_OPTIONS[tok]
    if (inTarget) rule.targetOptions.push(option)
    else if (ownName !== undefined && !(current && current.module !== '' && tok.startsWith('--')))
      own.options.push({...option, name: ownName})
    else if (current) current.options.push(option)
    else throw new ParseError(0, `option ${tok} outside any match`)
    i = j
  }
  if (own.options.length > 0) rule.matches.unshift(own)
  return rule
}

/** Where the word of an unquoted rule text at or after `from` starts (spaces skipped); the text's length at its end. */
function wordStart(text: string, from: number): number {
  let i = from
  while (i < text.length && text.charCodeAt(i) === 32) i++
  return i
}

/** Where the word starting at `start` ends (the next space, or the text's end). */
function wordEnd(text: string, start: number): number {
  const end = text.indexOf(' ', start)
  return end < 0 ? text.length : end
}

/** Whether text[start, end) is -d, --destination or --dst (a long KUBE-SERVICES asks once per rule: no string made). */
function isDestinationOption(text: string, start: number, end: number): boolean {
  const len = end - start
  return (
    (len === 2 && text.startsWith('-d', start)) ||
    (len === 5 && text.startsWith('--dst', start)) ||
    (len === 13 && text.startsWith('--destination', start))
  )
}

/**
 * The value of the -d that opens a rule ("-A CHAIN -d VALUE ..."), read from the text without parsing it: what
 * parseRule gives as the rule's first own option (d, not negated, values[0]). Undefined when the rule does not open
 * so, or has quotes or tabs (then parse it). Words are read in place; only the value becomes a string.
 */
export function leadingDestination(text: string): string | undefined {
  if (text.indexOf('"') >= 0 || text.indexOf('\t') >= 0) return undefined
  const n = text.length
  const a = wordStart(text, 0)
  if (a + 2 > n || text.charCodeAt(a) !== 45 /* - */ || text.charCodeAt(a + 1) !== 65 /* A */) return undefined
  if (wordEnd(text, a) !== a + 2) return undefined
  const chain = wordStart(text, a + 2)
  if (chain >= n) return undefined
  const option = wordStart(text, wordEnd(text, chain))
  if (option >= n) return undefined
  const optionEnd = wordEnd(text, option)
  if (!isDestinationOption(text, option, optionEnd)) return undefined
  const value = wordStart(text, optionEnd)
  if (value >= n) return undefined
  const v = text.slice(value, wordEnd(text, value))
  return isOption(v) || v === '!' ? undefined : v
}

/**
 * Where the word of plain characters (letters, digits, . / : _ -) starting at `start` ends; `start` itself when there
 * is none. A word of these characters is one token to tokenize: no quote, tab, bracket or anything else it reads apart.
 */
function plainWordEnd(text: string, start: number): number {
  let i = start
  for (; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (!(
      (c >= 97 && c <= 122) /* a-z */ ||
      (c >= 65 && c <= 90) /* A-Z */ ||
      (c >= 45 && c <= 58) /* - . / 0-9 : */ ||
      c === 95 /* _ */
    ))
      break
  }
  return i
}

/** The words of SERVICE_RULE_SHAPE after "-A CHAIN": each option, then whether its value may look like an option. */
const SERVICE_RULE_SHAPE: ReadonlyArray<readonly [string, boolean]> = [
  [' -d ', false],
  [' -p ', false],
  [' -m ', true],
  [' --dport ', false],
  [' -j ', true],
]

/**
 * The target of a rule of kube-proxy's usual shape in a long chain, "-A CHAIN -d ADDRESS -p PROTOCOL -m MODULE --dport
 * PORT -j TARGET" (a Service's rule in KUBE-SERVICES of a cluster too large for comments), each word of plain
 * characters and one space between words; undefined for any other text (parse it). A text of this shape is one that
 * parseRule reads without error, to this target and not a goto: the scan of a long chain needs nothing else of it.
 */
export function serviceRuleTarget(text: string): string | undefined {
  if (!text.startsWith('-A ')) return undefined
  let end = plainWordEnd(text, 3)
  if (end === 3) return undefined
  for (const [option, anyValue] of SERVICE_RULE_SHAPE) {
    if (!text.startsWith(option, end)) return undefined
    const start = end + option.length
    end = plainWordEnd(text, start)
    // A value that looks like an option would end the option's values instead (the module of -m and the target of -j
    // are read whatever they look like).
    if (end === start || (!anyValue && text.charCodeAt(start) === 45) /* - */) return undefined
    if (option === ' -j ') return end === text.length ? text.slice(start, end) : undefined
  }
  return undefined
}

export function findOption(rule: ParsedRule, module: string, ...names: string[]): RuleOption | undefined {
  for (const m of rule.matches) {
    if (m.module !== module) continue
    for (const o of m.options) if (names.includes(o.name)) return o
  }
  return undefined
}

export function targetOption(rule: ParsedRule, ...names: string[]): string | undefined {
  return rule.targetOptions.find((o) => names.includes(o.name))?.values[0]
}

/** The destination port a rule matches, from -m tcp/udp/sctp --dport (a single port only). */
export function destinationPort(rule: ParsedRule): string | undefined {
  for (const m of rule.matches) {
    if (m.module !== 'tcp' && m.module !== 'udp' && m.module !== 'sctp') continue
    const o = m.options.find((x) => x.name === '--dport' || x.name === '--destination-port')
    if (o && !o.negated) return o.values[0]
  }
  return undefined
}
