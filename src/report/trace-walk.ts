import type {ChalkInstance} from 'chalk'
import type {TraceOutcome, TraceResult, TraceStep} from '../trace/types.js'
import {wrapProse, wrapVerbatim} from './width.js'

const key = (s: TraceStep) => `${s.table}\0${s.chain}\0${s.line}`

/** What a rule matches and where it sends the packet, without what does not matter to the walk (comments, -m loads, the chain name). */
export function shortRule(s: TraceStep): string {
  let r = s.rule
    .replace(/^-[AI]\s+\S+\s*/, '')
    .replace(/-m comment --comment ("(?:[^"\\]|\\.)*"|\S+)\s*/g, '')
    .replace(/\bcomment "(?:[^"\\]|\\.)*"\s*/g, '')
    .replace(/-m (?:tcp|udp|sctp|conntrack|mark|set|addrtype|physdev|recent)\s+(?=-|!)/g, '')
    // Every walk is of a new connection: a NEW-state match says nothing here.
    .replace(/-m conntrack --ctstate NEW\s*|--ctstate NEW\s*/g, '')
    .replace(/-m statistic --mode random --probability \S+\s*/g, '')
    .replace(/-j DNAT --to-destination (\S+)/, '-j DNAT $1')
    // A protocol match without a port match says nothing the packet's walk does not.
    .replace(/(?:^|\s)-p (?:tcp|udp|sctp)(?=\s)(?!.*--[ds]port)/, ' ')
    .trim()
  r = r.replace(/(?:^|\s)-[jg]\s+/, (m) => (m.startsWith(' ') ? ' → ' : '→ '))
  return r.replace(/\s+/g, ' ')
}

/** The chain a step sends the packet on to, if any. */
function target(s: TraceStep): string | undefined {
  return /(?:^|\s)-[jg]\s+(\S+)/.exec(s.rule)?.[1] ?? /\b(?:jump|goto)\s+(\S+)/.exec(s.rule)?.[1]
}

/** A rule's line after its chain: `:12`, or ` line 12` when the chain's name has a colon (an IPVS virtual server). */
const at = (s: TraceStep) => (s.chain.includes(':') ? ` line ${s.line}` : `:${s.line}`)

/** Where a rule is: `nat/KUBE-SERVICES:66`, `ipvs/VS TCP 10.96.10.10:80 line 1`. */
export const stepPlace = (s: TraceStep) => `${s.table}/${s.chain}${at(s)}`

/** Steps in one text: a jump followed by the rule it reached, and consecutive rules of one chain, are one segment. */
function segments(steps: TraceStep[], prevTable: {table?: string}): string[] {
  const out: string[] = []
  let cur = ''
  let last: TraceStep | undefined
  for (const s of steps) {
    const sameChain = last && last.table === s.table && last.chain === s.chain
    const followsJump = last && last.table === s.table && target(last) === s.chain
    const text = shortRule(s)
    if (last && followsJump) cur += `${at(s)} ${text}`
    else if (last && sameChain) cur += `; ${at(s)} ${text}`
    else {
      if (cur) out.push(cur)
      const table = prevTable.table === s.table ? '' : `${s.table}/`
      cur = `${table}${s.chain}${at(s)} ${text}`
    }
    prevTable.table = s.table
    last = s
  }
  if (cur) out.push(cur)
  return out
}

function share(o: TraceOutcome): string {
  return `${Math.round(o.probability * 1000) / 10}%`
}

/** Where an outcome ends: its verdict, destination and what else a reader must know. */
export function outcomeText(o: TraceOutcome, c: ChalkInstance): string {
  const color = o.verdict === 'DNAT' || o.verdict === 'ACCEPT' ? c.green : o.verdict === 'UNKNOWN' ? c.yellow : c.red
  return `${color(o.verdict)}${o.destination ? ` ${o.destination}` : ''}${o.masquerade ? ' (masqueraded)' : ''}${o.sticky ? c.dim(' (session affinity: later packets from this client stick)') : ''}${o.policy ? ' ' + c.red(`(the policy of ${o.policy.table}/${o.policy.chain})`) : ''}${o.reason ? ' ' + c.yellow(o.reason) : ''}`
}

export interface WalkOptions {
  /** The outcomes where the path breaks: marked ✗. */
  bad?: (o: TraceOutcome) => boolean
  /** Why a bad outcome breaks, after its ✗. */
  why?: string
  indent?: string
}

/**
 * A walk shows at most this many outcomes (the breaking ones first), each line at most MAX_LINE characters: a Service
 * of thousands of endpoints, or a dump of jump loops, has more than anyone reads, and wrapping them to a terminal's
 * width took seconds. The JSON (`-o json`, `--explain`) holds every outcome and step.
 */
const MAX_OUTCOMES_SHOWN = 64
const MAX_LINE = 1_000

/**
 * A line cut at MAX_LINE, saying so: never inside a colour code, and with the colours reset after the cut (a colour
 * opened before it would colour the rest of the output).
 */
export function capped(text: string): string {
  if (text.length <= MAX_LINE) return text
  const esc = text.lastIndexOf('\x1b', MAX_LINE - 1)
  const end = esc >= 0 && !text.slice(esc, MAX_LINE).includes('m') ? esc : MAX_LINE
  const kept = text.slice(0, end)
  return `${kept}${kept.includes('\x1b[') ? '\x1b[0m' : ''}… (${text.length - end} more characters in -o json)`
}

/** The outcomes a walk shows, in their order: the breaking ones first chosen, then the others, MAX_OUTCOMES_SHOWN in all. */
export function shownOutcomes(os: TraceOutcome[], bad: WalkOptions['bad']): TraceOutcome[] {
  if (os.length <= MAX_OUTCOMES_SHOWN) return os
  const chosen = new Set(os.filter((o) => bad?.(o) ?? false).slice(0, MAX_OUTCOMES_SHOWN))
  for (const o of os) if (chosen.size < MAX_OUTCOMES_SHOWN) chosen.add(o)
  return os.filter((o) => chosen.has(o))
}

/**
 * How the outcomes of a walk share their steps: the first `shared` steps every outcome takes, and (with more than one
 * outcome) the last `after` steps they all take again after their own.
 */
export function walkShape(os: TraceOutcome[]): {shared: number; after: number} {
  let k = 0
  while (os.every((o) => k < o.steps.length && key(o.steps[k]) === key(os[0].steps[k]))) k++
  let s = 0
  const rest = Math.min(...os.map((o) => o.steps.length - k))
  const at = (o: TraceOutcome, i: number) => o.steps[o.steps.length - 1 - i]
  while (os.length > 1 && s < rest && os.every((o) => key(at(o, s)) === key(at(os[0], s)))) s++
  return {shared: k, after: s}
}

/**
 * The walk, flat and numbered: the steps every outcome takes (1, 2, …), the split into outcomes once (3a, 3b, … with
 * each one's share and only the steps that differ, ending in its verdict), then the steps they all take again.
 * Full rules are in the JSON (`trace`).
 */
export function renderWalk(t: TraceResult, c: ChalkInstance, width: number, opts: WalkOptions = {}): string[] {
  const indent = opts.indent ?? ''
  const all = t.outcomes
  if (all.length === 0) return [`${indent}no outcome`]
  const os = shownOutcomes(all, opts.bad)
  const hidden = all.filter((o) => !os.includes(o))
  const {shared: k, after: s} = walkShape(os)
  const lines: string[] = []
  let n = 0
  const tables: {table?: string} = {}
  const numbered = (label: string, text: string, mark = '') => {
    const head = `${indent}${mark || ' '} ${label.padEnd(3)} `
    lines.push(...wrapVerbatim(capped(text), width, head, ' '.repeat(head.length + 2)))
  }
  for (const seg of segments(os[0].steps.slice(0, k), tables)) numbered(String(++n), seg)
  const single = os.length === 1
  if (!single) {
    n++
    const after = {...tables}
    os.forEach((o, i) => {
      const bad = opts.bad?.(o) ?? false
      const mid = segments(o.steps.slice(k, o.steps.length - s), {...after}).map((m, j) =>
        j === 0 && k > 0 && target(os[0].steps[k - 1]) === m.split(':')[0] ? m.slice(m.indexOf(':')) : m,
      )
      const letter = String.fromCharCode(97 + (i % 26)) + (i >= 26 ? String(Math.floor(i / 26)) : '')
      const end = s === 0 ? ` ⇒ ${outcomeText(o, c)}` : ''
      numbered(
        `${n}${letter}`,
        `${share(o)} ${mid.join('; ') || '(no rule of its own)'}${end}${bad ? ' ' + c.red(`✗ ${opts.why ?? ''}`.trim()) : ''}`,
        bad ? c.red('✗') : '',
      )
      if (i === os.length - 1) Object.assign(tables, {table: o.steps[o.steps.length - s - 1]?.table ?? after.table})
    })
    if (hidden.length > 0) {
      const share = Math.round(hidden.reduce((a, o) => a + o.probability, 0) * 1000) / 10
      lines.push(
        ...wrapProse(
          c.dim(`… and ${hidden.length} more outcomes (${share}% of new connections): -o json lists every one`),
          width,
          `${indent}      `,
          `${indent}        `,
        ),
      )
    }
  }
  for (const seg of segments(os[0].steps.slice(single ? k : os[0].steps.length - s), tables)) numbered(String(++n), seg)
  const sameEnd = os.every(
    (o) => o.verdict === os[0].verdict && o.masquerade === os[0].masquerade && !o.reason && !o.policy && !o.sticky,
  )
  if (!single && s > 0 && sameEnd)
    lines.push(
      `${indent}  ⇒   all ${c.green(os[0].verdict)}${os[0].verdict === 'DNAT' ? " to their branch's destination" : ''}${os[0].masquerade ? ', masqueraded' : ''}`,
    )
  else if (single || s > 0) {
    const ends = os.map(
      (o) => `${single ? '' : `${share(o)} `}${outcomeText(o, c)}${opts.bad?.(o) ? ' ' + c.red('✗') : ''}`,
    )
    const more = hidden.length > 0 ? `, and ${hidden.length} more` : ''
    lines.push(...wrapProse(capped(ends.join(', ')) + more, width, `${indent}  ⇒   `, `${indent}      `))
  }
  return lines
}

/** `trace`'s summary: the verdict and the destinations. */
export function renderTraceSummary(t: TraceResult, c: ChalkInstance, width: number): string {
  return wrapProse(
    `verdict ${t.verdict}${t.destinations.length ? `: ${t.destinations.join(', ')}` : ''}${t.masquerade ? ' (masquerade)' : ''}`,
    width,
    '',
    '  ',
  )
    .map((l) => c.bold(l))
    .join('\n')
}
