import {ParseError} from './parse-error.js'
import {parseRule} from './iptables-rule.js'

/**
 * Rules as people paste them into issues, chats and mails, turned back into what the parsers read, saying every
 * assumption made: shell prompts, markdown fences and mail quoting are removed; `iptables -S` output (-P/-N) and
 * `iptables-save -c` counters are rewritten as iptables-save; grep output without a `*table` line gets its table
 * (and, when it has no built-in chain, kube-proxy's hooks); an iptables-save followed by an ip6tables-save is split by
 * address family; `nft -a` handle comments are removed. A paste cut off in its last rule is refused, naming the line.
 */
export interface NormalisedPaste {
  /** The input as the parser reads it. */
  text: string
  /** What was assumed or changed, one sentence each, in the order found. */
  notes: string[]
  /** The input's line number for a line of `text` (0 for a line the normaliser added). */
  originalLine(line: number): number
}

interface Line {
  text: string
  /** 1-based line of the input; 0 when added. */
  from: number
}

/** A shell prompt and the command after it (s: the command is the rest of the line, a line separator included). */
const PROMPT = /^(?:\[[^\]]*\]\s*[$#%]|[\w.-]+@[\w.-]+(?::\S*)?\s*[$#%]|[$%])\s*(.*)$/s
const FENCE = /^\s*(?:```|~~~)/
const QUOTES = /^(?:>[ \t]?)+/
/**
 * `nft -a`'s "# handle N" at the end of a line, found from the one white-space character before it; the rest of the
 * white space goes with trimEnd. (`\s+# handle` tried every start in a run of white space: quadratic, 58 s for a
 * 200 KB line of spaces.)
 */
const HANDLE_COMMENT = /\s# handle \d+\s*$/
const COUNTERS = /^\[\d+:\d+\]\s+(?=-A\s)/
const BUILT_IN = new Set(['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING'])
const NAT_ONLY_TARGETS =
  /\s-j\s+(?:DNAT|SNAT|MASQUERADE|REDIRECT|KUBE-MARK-MASQ|KUBE-SVC-\S+|KUBE-SVL-\S+|KUBE-SEP-\S+|KUBE-EXT-\S+|KUBE-FW-\S+|KUBE-NODEPORTS|KUBE-POSTROUTING)\b/
/** The hooks kube-proxy jumps to its entry chain from, per table. */
const HOOKS: Record<string, string[]> = {
  nat: ['PREROUTING', 'OUTPUT'],
  filter: ['INPUT', 'FORWARD', 'OUTPUT'],
  mangle: ['PREROUTING', 'OUTPUT'],
  raw: ['PREROUTING', 'OUTPUT'],
}
/** Options whose value is the next word: a rule ending with one was cut off. */
const NEEDS_VALUE = /\s(?:-[jgmpsdio]|--\S+)$/

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`
}

function lineList(numbers: number[]): string {
  return numbers.length > 6 ? `${numbers.slice(0, 6).join(', ')} and ${numbers.length - 6} more` : numbers.join(', ')
}

/** Removes what surrounds the rules in a paste: mail quoting, markdown fences, shell prompts. Line numbers are kept (removed lines become empty). */
function unwrap(input: string, notes: string[]): {lines: Line[]; commands: string[]} {
  const raw = input.split('\n').map((t, i) => ({text: t.endsWith('\r') ? t.slice(0, -1) : t, from: i + 1}))
  const content = raw.filter((l) => l.text.trim() !== '')
  if (content.length > 0 && content.every((l) => l.text.startsWith('>'))) {
    for (const l of raw) l.text = l.text.replace(QUOTES, '')
    notes.push(`removed mail quoting ("> ") from ${plural(content.length, 'line')}`)
  }
  const fences: number[] = []
  const prompts: number[] = []
  const commands: string[] = []
  const fenced = raw.filter((l) => FENCE.test(l.text)).length >= 2
  let inFence = false
  let prose = 0
  for (const l of raw) {
    if (FENCE.test(l.text)) {
      fences.push(l.from)
      inFence = !inFence
      l.text = ''
      continue
    }
    if (fenced && !inFence) {
      if (l.text.trim() !== '') prose++
      l.text = ''
      continue
    }
    const prompt = PROMPT.exec(l.text.trim())
    if (prompt) {
      prompts.push(l.from)
      commands.push(prompt[1])
      l.text = ''
    }
  }
  if (fences.length > 0)
    notes.push(
      `removed markdown fences (\`\`\`) on ${fences.length === 1 ? 'line' : 'lines'} ${lineList(fences)}${prose > 0 ? ` and ${plural(prose, 'line')} of text outside them` : ''}`,
    )
  if (prompts.length > 0)
    notes.push(
      `removed shell prompt ${prompts.length === 1 ? 'line' : 'lines'} ${lineList(prompts)} ("${commands[0].slice(0, 60)}")`,
    )
  return {lines: raw, commands}
}

function result(lines: Line[], notes: string[]): NormalisedPaste {
  return {text: lines.map((l) => l.text).join('\n'), notes, originalLine: (n) => lines[n - 1]?.from ?? 0}
}

/** `nft list ruleset` (text or JSON) as pasted: also `nft -a` output, whose `# handle N` comments are removed. */
export function normaliseNftPaste(input: string): NormalisedPaste {
  const notes: string[] = []
  const {lines} = unwrap(input, notes)
  let handles = 0
  for (const l of lines) {
    const handle = HANDLE_COMMENT.exec(l.text)
    if (handle) {
      handles++
      l.text = l.text.slice(0, handle.index).trimEnd()
    }
  }
  if (handles > 0) notes.push(`removed ${plural(handles, '"# handle N" comment')} (\`nft -a\` output)`)
  return result(lines, notes)
}

type Family = 4 | 6

interface Section {
  lines: Line[]
  family?: Family
  /** How the family was decided, for the note. */
  familyFrom?: string
}

function familyOfRules(lines: Line[]): Family | undefined {
  for (const l of lines) {
    // One white-space run before the address or the "!" (\s+!?\s* would split a run of spaces every way: quadratic).
    const m = /\s(?:-[sd]|--to-destination|--to-source)\s+(?:!\s*)?([0-9a-fA-F:.[\]/]+)/.exec(l.text)
    if (m) return /^\d+\.\d+\.\d+\.\d+/.test(m[1]) ? 4 : m[1].includes(':') ? 6 : undefined
  }
  return undefined
}

/** iptables-save prints a "# Generated by" line per table: a new dump starts where a table repeats or the header's family changes. */
function splitDumps(lines: Line[]): Section[] {
  const sections: Section[] = [{lines: []}]
  let seenTables = new Set<string>()
  for (const l of lines) {
    const header = /^#\s*Generated by (ip6?)tables/.exec(l.text)
    const table = /^\*(\S+)/.exec(l.text)
    const headerFamily: Family | undefined = header ? (header[1] === 'ip6' ? 6 : 4) : undefined
    const current = sections[sections.length - 1]
    const familyChanges = headerFamily !== undefined && current.family !== undefined && headerFamily !== current.family
    if (familyChanges || (table && seenTables.has(table[1]))) {
      sections.push({lines: []})
      seenTables = new Set()
    }
    const s = sections[sections.length - 1]
    if (headerFamily !== undefined && s.family === undefined) {
      s.family = headerFamily
      s.familyFrom = `its "# Generated by ${header![1]}tables-save" line`
    }
    if (table) seenTables.add(table[1])
    s.lines.push(l)
  }
  for (const s of sections) {
    if (s.family === undefined) {
      s.family = familyOfRules(s.lines)
      if (s.family !== undefined) s.familyFrom = 'the addresses in its rules'
    }
  }
  return sections.filter((s) => s.lines.some((l) => l.text.trim() !== ''))
}

function span(s: Section): string {
  const numbers = s.lines.filter((l) => l.text.trim() !== '').map((l) => l.from)
  return `lines ${numbers[0]}-${numbers[numbers.length - 1]}`
}

/** The last rule of a paste that ends without COMMIT must be whole: a rule cut mid-way would be traced as another rule. */
function refuseCutOff(lines: Line[]): void {
  const last = [...lines].reverse().find((l) => l.text.trim() !== '')
  if (!last || !/^-A\s/.test(last.text)) return
  const text = last.text.trim()
  const where = (why: string, cause?: unknown) =>
    new ParseError(last.from, `the last rule looks cut off (${why}): "${text.slice(-60)}"; paste the whole output`, {
      cause,
    })
  let rule
  try {
    rule = parseRule('', last.from, text)
  } catch (e) {
    throw where((e as Error).message, e)
  }
  if (NEEDS_VALUE.test(text)) throw where('it ends with an option that needs a value')
  if (rule.target === undefined) throw where('it has no -j or -g target')
  if (/^(?:DNAT|SNAT|MARK|CONNMARK)$/.test(rule.target) && rule.targetOptions.length === 0)
    throw where(`-j ${rule.target} without its options`)
}

/** `iptables -S` and grep output: -P/-N/-A lines with no `*table`, rewritten as one iptables-save table. */
function asSaveTable(lines: Line[], commands: string[], notes: string[]): Line[] {
  let policies = 0
  const declared = new Set<string>()
  const body: Line[] = []
  const chainsWithRules = new Set<string>()
  for (const l of lines) {
    const policy = /^-P\s+(\S+)\s+(\S+)\s*$/.exec(l.text)
    const create = /^-N\s+(\S+)\s*$/.exec(l.text)
    if (policy) {
      policies++
      declared.add(policy[1])
      body.push({text: `:${policy[1]} ${policy[2]} [0:0]`, from: l.from})
    } else if (create) {
      policies++
      declared.add(create[1])
      body.push({text: `:${create[1]} - [0:0]`, from: l.from})
    } else {
      const chain = /^-A\s+(\S+)/.exec(l.text)
      if (chain) chainsWithRules.add(chain[1])
      body.push(l)
    }
  }
  if (policies > 0) notes.push('read as `iptables -S` output: -P and -N lines taken as chain declarations')
  const fromCommand = commands
    .map((c) => /\biptables\S*\s.*(?:-t|--table)[ =]?(\w+)/.exec(c)?.[1])
    .find((t) => t !== undefined)
  let table: string
  if (fromCommand) {
    table = fromCommand
    notes.push(
      `no "*table" line in the input: table ${table}, from the command "${commands.find((c) => c.includes(fromCommand))!.slice(0, 60)}"`,
    )
  } else if (body.some((l) => NAT_ONLY_TARGETS.test(l.text))) {
    table = 'nat'
    notes.push(
      'no "*table" line in the input: assumed table nat (the rules DNAT, masquerade or jump to kube-proxy\'s nat chains)',
    )
  } else {
    table = 'filter'
    notes.push('no "*table" line in the input: assumed table filter (what `iptables -S` shows without -t)')
  }
  const out: Line[] = [{text: `*${table}`, from: 0}]
  for (const chain of chainsWithRules)
    if (!declared.has(chain)) out.push({text: `:${chain} ${BUILT_IN.has(chain) ? 'ACCEPT' : '-'} [0:0]`, from: 0})
  const hasBuiltIn = [...declared, ...chainsWithRules].some((c) => BUILT_IN.has(c))
  if (!hasBuiltIn) {
    const jumpedTo = new Set(body.flatMap((l) => [...(/\s-[jg]\s+(\S+)/.exec(l.text)?.slice(1) ?? [])]))
    const entry = chainsWithRules.has('KUBE-SERVICES')
      ? 'KUBE-SERVICES'
      : [...chainsWithRules].find((c) => !jumpedTo.has(c))
    if (entry) {
      for (const hook of HOOKS[table] ?? [])
        out.push({text: `:${hook} ACCEPT [0:0]`, from: 0}, {text: `-A ${hook} -j ${entry}`, from: 0})
      notes.push(`no built-in chains in the input: traced from ${entry}`)
    }
  }
  out.push(...body, {text: 'COMMIT', from: 0})
  return out
}

const HEADER = /^#\s*Generated by (ip6?)tables/

/**
 * The input as normaliseIptablesPaste would give it when it is plain iptables-save output (a dump of tens of MB: one
 * pass, no object per line), or undefined to normalise it line by line. Plain: every line is empty, a comment, a
 * "*table" (each table once, so one dump), a chain declaration, an "-A" rule or COMMIT; no fence; the "# Generated
 * by" lines name one family; a "*table" line is there. Nothing is then removed or assumed: only a CR ending a line goes.
 */
function plainSave(input: string): NormalisedPaste | undefined {
  if (input.includes('```') || input.includes('~~~')) return undefined
  const tables = new Set<string>()
  let family: string | undefined
  let lines = 0
  for (let pos = 0; pos <= input.length;) {
    let nl = input.indexOf('\n', pos)
    if (nl < 0) nl = input.length
    const end = nl > pos && input.charCodeAt(nl - 1) === 13 ? nl - 1 : nl
    lines++
    if (end > pos) {
      const c = input.charCodeAt(pos)
      if (c === 0x2d /* - */) {
        if (input.charCodeAt(pos + 1) !== 0x41 /* A */ || input.charCodeAt(pos + 2) !== 0x20) return undefined
      } else if (c === 0x2a /* * */) {
        const table = /^\*(\S+)/.exec(input.slice(pos, end))
        if (!table || tables.has(table[1])) return undefined
        tables.add(table[1])
      } else if (c === 0x23 /* # */) {
        const header = HEADER.exec(input.slice(pos, end))
        if (header && family !== undefined && header[1] !== family) return undefined
        if (header) family = header[1]
      } else if (c !== 0x3a /* : */ && input.slice(pos, end) !== 'COMMIT') return undefined
    }
    pos = nl + 1
  }
  if (tables.size === 0) return undefined
  const text = input.includes('\r') ? input.replace(/\r(?=\n|$)/g, '') : input
  return {text, notes: [], originalLine: (n) => (Number.isInteger(n) && n >= 1 && n <= lines ? n : 0)}
}

/**
 * An iptables-save paste, normalised. `family` picks the dump of that address family when the input holds both an
 * iptables-save and an ip6tables-save.
 */
export function normaliseIptablesPaste(input: string, family: Family | undefined): NormalisedPaste {
  const plain = plainSave(input)
  if (plain) return plain
  const notes: string[] = []
  const {lines, commands} = unwrap(input, notes)
  const counted: number[] = []
  for (const l of lines) {
    if (COUNTERS.test(l.text)) {
      counted.push(l.from)
      l.text = l.text.replace(COUNTERS, '')
    }
  }
  if (counted.length > 0)
    notes.push(
      `removed packet counters ("[packets:bytes]", \`iptables-save -c\`) from ${plural(counted.length, 'rule')}`,
    )
  let kept = lines
  const dumps = splitDumps(lines)
  if (dumps.length > 1) {
    const wanted = dumps.find((d) => d.family === (family ?? 4)) ?? dumps[0]
    const described = dumps.map((d) => `${d.family ? `IPv${d.family}` : 'family unknown'}, ${span(d)}`).join('; ')
    notes.push(
      `the input holds ${dumps.length} dumps (${described}): traced the ${wanted.family ? `IPv${wanted.family}` : 'first'} one${wanted.familyFrom ? `, its family read from ${wanted.familyFrom}` : ''}`,
    )
    kept = wanted.lines
  }
  const hasTable = kept.some((l) => /^\*/.test(l.text))
  if (!hasTable && kept.some((l) => /^-[APN]\s/.test(l.text))) {
    refuseCutOff(kept)
    kept = asSaveTable(kept, commands, notes)
  }
  return result(kept, notes)
}
