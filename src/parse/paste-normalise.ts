import {ParseError} from './parse-error.js'
import {parseRule} from './iptables-rule.js'
import {BUILT_IN_CHAINS} from './iptables-save.js'

/**
 * Rules as people paste them into issues, chats and mails, turned back into what the parsers read, saying every
 * assumption made: shell prompts, markdown fences and mail quoting are removed; `iptables -S` output (-P/-N) and
 * `iptables-save -c` counters are rewritten as iptables-save; grep output without a `*table` line gets its table
 * (and, when it has no built-in chain, hooks into KUBE-SERVICES, or into a chain only for what its own rules match);
 * an iptables-save followed by an ip6tables-save is split by address family; `nft -a` handle comments are removed.
 * A fragment is said as one (a last rule cut off is left out, its table read as cut); `-L` listings and rules of two
 * tables without "*table" lines are refused, naming the line.
 */
export interface NormalisedPaste {
  /** The input as the parser reads it. */
  text: string
  /** What was assumed or changed, one sentence each, in the order found. */
  notes: string[]
  /** The input's line number for a line of `text` (0 for a line the normaliser added). */
  originalLine(line: number): number
}

/** A command after a shell prompt in the paste, and the prompt's line. */
interface Command {
  text: string
  from: number
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

function lineList(numbers: Array<number | string>): string {
  return numbers.length > 6 ? `${numbers.slice(0, 6).join(', ')} and ${numbers.length - 6} more` : numbers.join(', ')
}

/** Removes what surrounds the rules in a paste: mail quoting, markdown fences, shell prompts. Line numbers are kept (removed lines become empty). */
function unwrap(input: string, notes: string[]): {lines: Line[]; commands: Command[]} {
  const raw = input.split('\n').map((t, i) => ({text: t.endsWith('\r') ? t.slice(0, -1) : t, from: i + 1}))
  const content = raw.filter((l) => l.text.trim() !== '')
  if (content.length > 0 && content.every((l) => l.text.startsWith('>'))) {
    for (const l of raw) l.text = l.text.replace(QUOTES, '')
    notes.push(`removed mail quoting ("> ") from ${plural(content.length, 'line')}`)
  }
  const fences: number[] = []
  const prompts: number[] = []
  const commands: Command[] = []
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
      commands.push({text: prompt[1], from: l.from})
      l.text = ''
    }
  }
  if (fences.length > 0)
    notes.push(
      `removed markdown fences (\`\`\`) on ${fences.length === 1 ? 'line' : 'lines'} ${lineList(fences)}${prose > 0 ? ` and ${plural(prose, 'line')} of text outside them` : ''}`,
    )
  if (prompts.length > 0)
    notes.push(
      `removed shell prompt ${prompts.length === 1 ? 'line' : 'lines'} ${lineList(prompts)} ("${commands[0].text.slice(0, 60)}")`,
    )
  return {lines: raw, commands}
}

function result(lines: Line[], notes: string[]): NormalisedPaste {
  return {text: lines.map((l) => l.text).join('\n'), notes, originalLine: (n) => lines[n - 1]?.from ?? 0}
}

/** `nft list ruleset` (text or JSON) as pasted: also `nft -a` output, whose `# handle N` comments are removed. */
export function normaliseNftPaste(input: string): NormalisedPaste {
  if (nothingToNormaliseNft(input)) return unchanged(input)
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

/**
 * Whether normaliseNftPaste would return the input as it is: no carriage return, no line quoted ("> "), fenced or
 * after a shell prompt, no `nft -a` handle. Each test looks at the whole text at once and matches wherever the line
 * by line test could (a superset: a false alarm only takes the line by line way), so the output of `nft list ruleset`
 * itself (a 50k-Service one is 2.3 million lines) is not copied line by line. The tests look at lines only, so a text
 * cut at line ends passes them piece by piece exactly when it passes them whole (a ruleset streamed from a file).
 */
export function nothingToNormaliseNft(input: string): boolean {
  return (
    !input.includes('\r') &&
    !input.includes('# handle ') &&
    !input.startsWith('>') &&
    !input.includes('\n>') &&
    !input.includes('```') &&
    !input.includes('~~~') &&
    // Every prompt holds one of $ # %, which a ruleset seldom does: three string searches (a regular expression tries
    // every character, 0.7 s on a 137 MB ruleset).
    ((!input.includes('$') && !input.includes('#') && !input.includes('%')) ||
      !/^\s*(?:\[[^\]\n]*\]\s*[$#%]|[\w.-]+@[\w.-]+(?::\S*)?\s*[$#%]|[$%])/m.test(input))
  )
}

/**
 * nothingToNormaliseNft of a piece of a ruleset's bytes cut at line ends: a piece with none of the characters its tests
 * look for (carriage return, quote mark, fence, prompt or comment characters) passes without being decoded.
 */
export function nothingToNormaliseNftBytes(chunk: Buffer): boolean {
  const plain =
    !chunk.includes(0x0d) &&
    chunk[0] !== 0x3e &&
    // One byte is searched the fastest way (a line feed begins the two-byte search's every candidate).
    (!chunk.includes(0x3e) || !chunk.includes('\n>')) &&
    !chunk.includes('```') &&
    !chunk.includes('~~~') &&
    !chunk.includes(0x23) &&
    !chunk.includes(0x24) &&
    !chunk.includes(0x25)
  return plain || nothingToNormaliseNft(chunk.toString('utf8'))
}

/** The input as the parser reads it, nothing assumed: line n is the input's line n. */
function unchanged(input: string): NormalisedPaste {
  let lines: number | undefined
  return {
    text: input,
    notes: [],
    originalLine: (n) => {
      lines ??= input.split('\n').length
      return Number.isInteger(n) && n >= 1 && n <= lines ? n : 0
    },
  }
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

/** Why the last rule of a paste looks cut off (a rule cut mid-way would be traced as another rule), or undefined. */
function cutOffReason(last: Line): string | undefined {
  const text = last.text.trim()
  let rule
  try {
    rule = parseRule('', last.from, text)
  } catch (e) {
    return (e as Error).message
  }
  if (NEEDS_VALUE.test(text)) return 'it ends with an option that needs a value'
  if (rule.target === undefined) return 'it has no -j or -g target'
  if (/^(?:DNAT|SNAT|MARK|CONNMARK)$/.test(rule.target) && rule.targetOptions.length === 0)
    return `-j ${rule.target} without its options`
  return undefined
}

/**
 * A table whose last rule looks cut off, the COMMIT pasted after it or not: the rule is left out and the table read as
 * cut there (IptablesSave's acceptCut), so what may have followed it is UNKNOWN to the walk. `lines` are one table's
 * (from its "*table" line, or the rules of a paste without one); returns whether the table was cut.
 */
function leaveOutCutRule(lines: Line[], notes: string[]): boolean {
  const content = lines.filter((l) => l.text.trim() !== '')
  let lastIndex = content.length - 1
  const commit = lastIndex >= 0 && content[lastIndex].text.trim() === 'COMMIT' ? content[lastIndex] : undefined
  if (commit) lastIndex--
  const last = content[lastIndex]
  if (!last || !/^-A\s/.test(last.text)) return false
  const why = cutOffReason(last)
  if (why === undefined) return false
  notes.push(
    `the last rule (line ${last.from}) looks cut off (${why}): "${last.text.trim().slice(-60)}"; it is left out and its table read as cut there: a packet whose walk reaches what may have followed is UNKNOWN`,
  )
  last.text = ''
  if (commit) commit.text = ''
  return true
}

/** A rule's own non-negated destination (an address /32 or /128), protocol and destination port: what a packet it takes must be. */
function ownMatch(text: string): string | undefined {
  const dst = /(?:^|\s)(?<!!\s)-d\s+([0-9a-fA-F:.]+\/(?:32|128))(?=\s|$)/.exec(text)?.[1]
  if (dst === undefined) return undefined
  const proto = /(?:^|\s)(?<!!\s)-p\s+(tcp|udp|sctp)(?=\s|$)/.exec(text)?.[1]
  const port = proto ? /(?:^|\s)(?<!!\s)--dport\s+(\d+)(?=\s|$)/.exec(text)?.[1] : undefined
  return `-d ${dst}${proto ? ` -p ${proto}${port ? ` -m ${proto} --dport ${port}` : ''}` : ''}`
}

/**
 * How a paste without built-in chains is entered: kube-proxy's KUBE-SERVICES when it is there; else each chain no rule
 * jumps to, only by the destination (and port) its own rules match, so that a packet goes only where the paste's rules
 * say it may (a packet none takes falls off the added hook, which is not declared: UNKNOWN). Never a guess.
 */
function entryHooks(table: string, body: Line[], chainsWithRules: Set<string>, notes: string[]): Line[] {
  const hooks = HOOKS[table] ?? []
  const out: Line[] = []
  const hook = (rule: string) => hooks.forEach((h) => out.push({text: `-A ${h} ${rule}`, from: 0}))
  if (chainsWithRules.has('KUBE-SERVICES')) {
    hook('-j KUBE-SERVICES')
    notes.push('no built-in chains in the input: traced from KUBE-SERVICES')
    return out
  }
  const jumpedTo = new Set(body.map((l) => /\s-[jg]\s+(\S+)/.exec(l.text)?.[1]).filter((c) => c !== undefined))
  const entered: string[] = []
  const notEntered: string[] = []
  for (const chain of chainsWithRules) {
    if (jumpedTo.has(chain)) continue
    const matches = new Set(
      body
        .filter((l) => new RegExp(`^-A\\s+${chain.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\s`).test(l.text))
        .map((l) => ownMatch(l.text))
        .filter((m) => m !== undefined),
    )
    if (matches.size === 0) notEntered.push(chain)
    for (const m of matches) {
      hook(`${m} -j ${chain}`)
      entered.push(`${chain} for ${m}`)
    }
  }
  notes.push(
    `no built-in chains and no KUBE-SERVICES in the input: ${entered.length > 0 ? `entered ${entered.join('; ')} (the packets its own rules match)` : 'no chain entered'}${notEntered.length > 0 ? `; not entered: ${notEntered.join(', ')} (no rule of it names a destination)` : ''}; any other packet is UNKNOWN`,
  )
  return out
}

/** The table a prompt's command names ("iptables -t nat -S", "iptables -S": filter), or undefined ("iptables-save | grep"). */
function tableOfCommand(command: string): string | undefined {
  const named = /\bip6?tables\S*\s.*(?:-t|--table)[ =]?(\w+)/.exec(command)?.[1]
  if (named) return named
  return /\bip6?tables(?:-nft|-legacy)?\s+(?:-\S+\s+)*(?:-S|--list-rules)\b/.test(command) ? 'filter' : undefined
}

/** Rules of two tables in one paste without "*table" lines: refused, naming where, since tables are never folded. */
function refuseMixedTables(lines: Line[]): void {
  const refuse = (line: number, why: string) =>
    new ParseError(
      line,
      `the input holds rules of more than one table without "*table" lines (${why}): tables are never folded into one; paste \`iptables-save\` whole (it names each table), or one table's \`iptables -t TABLE -S\``,
    )
  const declaredAt = new Map<string, number>()
  const runs = new Map<string, number>()
  let previous: string | undefined
  let natOnly: Line | undefined
  let filterOnly: Line | undefined
  for (const l of lines) {
    const declared = /^-[PN]\s+(\S+)/.exec(l.text)?.[1]
    if (declared) {
      if (declaredAt.has(declared))
        throw refuse(l.from, `${declared} declared on lines ${declaredAt.get(declared)} and ${l.from}`)
      declaredAt.set(declared, l.from)
      continue
    }
    const chain = /^-A\s+(\S+)/.exec(l.text)?.[1]
    if (!chain) continue
    if (chain !== previous && runs.has(chain))
      throw refuse(l.from, `${chain}'s rules on lines ${runs.get(chain)} and ${l.from}, apart`)
    if (chain !== previous) runs.set(chain, l.from)
    previous = chain
    if (/\s-j\s+(?:DNAT|SNAT|MASQUERADE|REDIRECT)\b/.test(l.text)) natOnly ??= l
    if (/\s-j\s+(?:REJECT|DROP)\b/.test(l.text)) filterOnly ??= l
    if (natOnly && filterOnly) {
      throw refuse(
        Math.max(natOnly.from, filterOnly.from),
        `a nat rule on line ${natOnly.from} and a filter rule on line ${filterOnly.from}`,
      )
    }
  }
}
/** `iptables -S` and grep output: -P/-N/-A lines with no `*table`, rewritten as one iptables-save table. */
function asSaveTable(lines: Line[], command: Command | undefined, notes: string[]): Line[] {
  refuseMixedTables(lines)
  const cut = leaveOutCutRule(lines, notes)
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
  const fromCommand = command && tableOfCommand(command.text)
  let table: string
  if (fromCommand) {
    table = fromCommand
    notes.push(`no "*table" line in the input: table ${table}, from the command "${command!.text.slice(0, 60)}"`)
  } else if (body.some((l) => NAT_ONLY_TARGETS.test(l.text))) {
    table = 'nat'
    notes.push(
      'no "*table" line in the input: assumed table nat (the rules DNAT, masquerade or jump to kube-proxy\'s nat chains)',
    )
  } else {
    table = 'filter'
    notes.push('no "*table" line in the input: assumed table filter (what `iptables -S` shows without -t)')
  }
  const undeclared = [...chainsWithRules].filter((c) => !declared.has(c))
  if (undeclared.length > 0)
    notes.push(
      `the input is a fragment: ${lineList(undeclared)} ${undeclared.length === 1 ? 'has' : 'have'} rules but no declaration (grep output?): a packet that falls off ${undeclared.length === 1 ? 'it' : 'one of them'} is UNKNOWN`,
    )
  const hasBuiltIn = [...declared, ...chainsWithRules].some((c) => BUILT_IN.has(c))
  const out: Line[] = [{text: `*${table}`, from: 0}]
  if (!hasBuiltIn && chainsWithRules.size > 0) out.push(...entryHooks(table, body, chainsWithRules, notes))
  out.push(...body)
  if (!cut) out.push({text: 'COMMIT', from: 0})
  return out
}

/** `iptables -L` output: refused, with the command whose output can be traced. */
function refuseListing(lines: Line[], commands: Command[]): void {
  const listing = lines.find((l) => /^Chain \S+ \((?:policy \w+|\d+ references?)/.test(l.text))
  if (!listing) return
  const table = commands.map((c) => /(?:-t|--table)[ =]?(\w+)/.exec(c.text)?.[1]).find((t) => t !== undefined)
  throw new ParseError(
    listing.from,
    `this is \`iptables -L\` output, which leaves out what a walk needs (-L prints rules without their exact matches and options): run \`iptables-save${table ? ` -t ${table}` : ''}\` on the node and paste that`,
  )
}

/** Removes `iptables -S -v`'s packet counters (" -c PACKETS BYTES", outside quotes) from -P and -A lines; the lines changed. */
function removeListCounters(lines: Line[]): number[] {
  const changed: number[] = []
  for (const l of lines) {
    if (!/^-[PA]\s/.test(l.text) || !/\s-c\s+\d+\s+\d+/.test(l.text)) continue
    const parts = l.text.split('"')
    for (let i = 0; i < parts.length; i += 2) parts[i] = parts[i].replace(/\s-c\s+\d+\s+\d+(?=\s|$)/g, '')
    const text = parts.join('"')
    if (text !== l.text) {
      l.text = text
      changed.push(l.from)
    }
  }
  return changed
}

/**
 * The tables of a paste with "*table" lines, said where they are fragments: a table without its built-in chains, a
 * chain with rules but no declaration, a last table with no COMMIT (read as cut; a last rule cut mid-way is left out).
 */
function fragmentNotes(lines: Line[], notes: string[]): void {
  let table: {name: string; lines: Line[]} | undefined
  const tables: Array<{name: string; lines: Line[]; committed: boolean}> = []
  for (const l of lines) {
    const start = /^\*(\S+)/.exec(l.text)
    if (start) {
      table = {name: start[1], lines: []}
      tables.push({...table, committed: false})
      table = tables[tables.length - 1]
      continue
    }
    if (!table) continue
    table.lines.push(l)
    if (l.text.trim() === 'COMMIT') {
      tables[tables.length - 1].committed = true
      table = undefined
    }
  }
  for (const t of tables) {
    const declared = new Set(t.lines.map((l) => /^:(\S+)/.exec(l.text)?.[1]).filter((c) => c !== undefined))
    const withRules = new Set(t.lines.map((l) => /^-A\s+(\S+)/.exec(l.text)?.[1]).filter((c) => c !== undefined))
    const builtIns = (BUILT_IN_CHAINS[t.name] ?? []).filter((c) => !declared.has(c) && !withRules.has(c))
    if (builtIns.length > 0)
      notes.push(
        `the input is a fragment: table ${t.name} has no ${builtIns.join(', ')} chain: a packet whose walk needs ${builtIns.length === 1 ? 'it' : 'one of them'} is UNKNOWN`,
      )
    const undeclared = [...withRules].filter((c) => !declared.has(c))
    if (undeclared.length > 0)
      notes.push(
        `the input is a fragment: ${undeclared.slice(0, 6).join(', ')}${undeclared.length > 6 ? ` and ${undeclared.length - 6} more` : ''} of table ${t.name} ${undeclared.length === 1 ? 'has' : 'have'} rules but no declaration: a packet that falls off ${undeclared.length === 1 ? 'it' : 'one of them'} is UNKNOWN`,
      )
  }
  const last = tables[tables.length - 1]
  if (last && !leaveOutCutRule(last.lines, notes) && !last.committed)
    notes.push(
      `table ${last.name} ends without COMMIT: read as cut short there: a packet whose walk reaches what may have followed is UNKNOWN`,
    )
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
  // The open table's built-in chains not declared yet (a fragment is normalised line by line, to say so).
  let missingBuiltIns: string[] | undefined
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
        if (!table || tables.has(table[1]) || missingBuiltIns !== undefined) return undefined
        tables.add(table[1])
        missingBuiltIns = [...(BUILT_IN_CHAINS[table[1]] ?? [])]
      } else if (c === 0x23 /* # */) {
        const header = HEADER.exec(input.slice(pos, end))
        if (header && family !== undefined && header[1] !== family) return undefined
        if (header) family = header[1]
      } else if (c === 0x3a /* : */) {
        if (missingBuiltIns && missingBuiltIns.length > 0)
          missingBuiltIns = missingBuiltIns.filter((b) => !input.startsWith(`:${b} `, pos))
      } else if (input.slice(pos, end) === 'COMMIT') {
        if (missingBuiltIns && missingBuiltIns.length > 0) return undefined
        missingBuiltIns = undefined
      } else return undefined
    }
    pos = nl + 1
  }
  if (tables.size === 0 || missingBuiltIns !== undefined) return undefined
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
  refuseListing(lines, commands)
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
  const listCounted = removeListCounters(lines)
  if (listCounted.length > 0)
    notes.push(
      `removed packet counters ("-c PACKETS BYTES", \`iptables -S -v\`) from ${plural(listCounted.length, 'line')}`,
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
  if (hasTable) fragmentNotes(kept, notes)
  else if (kept.some((l) => /^-[APN]\s/.test(l.text))) kept = asSaveTables(kept, commands, notes)
  return result(kept, notes)
}

/**
 * Rules without "*table" lines as iptables-save tables: one per command whose prompt the paste shows (`iptables -t nat
 * -S`, then `iptables -S`), each with that command's table; else one table, which must hold the rules of one table.
 */
function asSaveTables(lines: Line[], commands: Command[], notes: string[]): Line[] {
  const withRules = (part: Line[]) => part.some((l) => /^-[APN]\s/.test(l.text))
  const parts: Array<{command: Command | undefined; lines: Line[]}> = [{command: undefined, lines: []}]
  for (const l of lines) {
    const command = commands.find((c) => c.from === l.from)
    if (command) parts.push({command, lines: []})
    else parts[parts.length - 1].lines.push(l)
  }
  const ruled = parts.filter((p) => withRules(p.lines))
  if (ruled.length > 1 && ruled.every((p) => p.command && tableOfCommand(p.command.text) !== undefined)) {
    const tables = ruled.map((p) => tableOfCommand(p.command!.text)!)
    if (new Set(tables).size === tables.length) {
      notes.push(`the input holds ${ruled.length} tables, one per command: ${tables.join(', ')}`)
      return ruled.flatMap((p) => asSaveTable(p.lines, p.command, notes))
    }
  }
  const command = ruled.length === 1 ? ruled[0].command : undefined
  return asSaveTable(lines, command ?? commands.find((c) => tableOfCommand(c.text) !== undefined), notes)
}
