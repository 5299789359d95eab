import type {ChalkInstance} from 'chalk'
import type {Finding} from '../checks/check.js'
import type {TraceOutcome, TraceResult, TraceStep} from '../trace/types.js'
import {fixLines} from './fix-lines.js'
import {isBad, where} from './human.js'
import {explaining} from './path-graph.js'
import type {Report} from './report.js'
import {capped, outcomeText, shortRule, shownOutcomes, stepPlace, walkShape} from './trace-walk.js'
import {wrapProse, wrapVerbatim} from './width.js'

/**
 * `svc --explain --explain-format tree`: the walks of the report as a terminal tree, node → entry point → each rule the
 * packet crosses (table/chain:line, what it matches, where it sends the packet) → the split into outcomes with their
 * shares and verdicts → the endpoints' nodes. The step where a path breaks is marked ✗ with the reason and the finding's
 * check and fix lines under it. Laid out from the same report document (its `trace`) as the flat walks.
 */

interface Branch {
  text: string
  /** Lines under the text (the reason and fix of a break), given the indent they hang at. */
  detail?: (indent: string) => string[]
  children: Branch[]
}

type Path = Report['paths'][number]
type Half = Path['remote'][number]

const stepKey = (s: TraceStep) => `${s.table}\0${s.chain}\0${s.line}`

/** The rule where a broken outcome breaks: the last that names its destination (its DNAT), else its last rule. */
function breakingStep(o: TraceOutcome): TraceStep | undefined {
  const naming = o.destination ? o.steps.filter((x) => x.rule.includes(o.destination!)) : []
  return naming[naming.length - 1] ?? o.steps[o.steps.length - 1]
}

const share = (p: number) => `${Math.round(p * 1000) / 10}%`

/**
 * A break's explanation, hung under the first ✗ of a path: the reason, then the finding's check and fix lines, each
 * command whole on its line (wrapped, its next lines would start with the tree's lines and no longer paste).
 */
function breakDetail(reason: string, finding: Finding | null, c: ChalkInstance, width: number) {
  return (indent: string) => [
    ...wrapProse(reason, width, `${indent}${c.bold('reason:')} `, `${indent}        `),
    ...fixLines(finding, indent, c),
  ]
}

/**
 * One walk as branches: the rules every outcome takes, the split into outcomes (each with its own rules), the rules
 * they all take again, and the verdict. `explain` is hung under the first step marked ✗.
 */
function walkBranches(
  t: TraceResult,
  bad: ((o: TraceOutcome) => boolean) | undefined,
  explain: Branch['detail'],
  c: ChalkInstance,
): {branches: Branch[]; explained: boolean} {
  const all = t.outcomes
  if (all.length === 0) return {branches: [{text: 'no outcome', children: []}], explained: false}
  const os = shownOutcomes(all, bad)
  const breaking = new Set(
    os
      .filter((o) => bad?.(o))
      .map((o) => breakingStep(o))
      .filter((s) => !!s)
      .map(stepKey),
  )
  let explained = false
  const mark = (broken: boolean) => (broken ? c.red('✗') : c.green('✓'))
  const step = (s: TraceStep, broken: boolean): Branch => {
    const b: Branch = {text: `${mark(broken)} ${stepPlace(s)} ${shortRule(s)}`, children: []}
    if (broken && !explained) {
      b.detail = explain
      explained = true
    }
    return b
  }
  const {shared, after} = walkShape(os)
  const single = os.length === 1
  const branches = os[0].steps.slice(0, shared).map((s) => step(s, breaking.has(stepKey(s))))
  if (!single) {
    const hidden = all.length - os.length
    const outcomes: Branch[] = os.map((o) => {
      const isBroken = bad?.(o) ?? false
      const brk = isBroken ? breakingStep(o) : undefined
      return {
        text: `${mark(isBroken)} ${share(o.probability)} ⇒ ${outcomeText(o, c)}`,
        children: o.steps
          .slice(shared, o.steps.length - after)
          .map((s) => step(s, !!brk && stepKey(s) === stepKey(brk))),
      }
    })
    if (hidden > 0)
      outcomes.push({
        text: c.dim(
          `… and ${hidden} more outcomes (${share(all.filter((o) => !os.includes(o)).reduce((a, o) => a + o.probability, 0))} of new connections): -o json lists every one`,
        ),
        children: [],
      })
    branches.push({text: `split into ${all.length} outcomes`, children: outcomes})
    branches.push(...os[0].steps.slice(os[0].steps.length - after).map((s) => step(s, breaking.has(stepKey(s)))))
  } else branches.push({text: `⇒ ${outcomeText(os[0], c)}`, children: []})
  return {branches, explained}
}

const pathMark = (ok: boolean | null, c: ChalkInstance) =>
  ok === true ? c.green('✓') : ok === false ? c.red('✗') : c.yellow('?')

/** The second half of a path on an endpoint's node: one line, and its walk where it breaks there. */
function halfBranch(r: Report, p: Path, h: Half, c: ChalkInstance, width: number): Branch {
  const ok = h.followed ? h.ok : null
  // A half on a node that was read and is not followed says why (its mode not known, its half not traced).
  const why =
    h.followed || r.nodes.some((n) => n.name === h.node && n.reachable)
      ? h.detail
      : 'not followed (the node was not read)'
  const b: Branch = {
    text: `${pathMark(ok, c)} ${share(h.share)} to ${h.endpoint}${h.pod ? ` (${h.pod})` : ''} on ${h.node}${ok === true ? '' : `: ${why}`}`,
    children: [],
  }
  if (h.ok !== false) return b
  const reason = `breaks at ${where(p)}: ${h.detail}`
  const explain = breakDetail(reason, explaining(r, h.node, h.breaksAt ?? 'unknown'), c, width)
  if (!h.trace) {
    b.detail = explain
    return b
  }
  const endpoint = h.endpoint.replace(/:\d+$/, '')
  const badHalf = (o: TraceOutcome) =>
    (o.verdict !== 'DNAT' && o.verdict !== 'ACCEPT') ||
    (!!o.destination && o.destination !== endpoint && o.destination !== h.endpoint)
  const walk = walkBranches(h.trace, badHalf, explain, c)
  if (!walk.explained) b.detail = explain
  b.children = walk.branches
  return b
}

/** One path: its entry point with its verdict, its walk on its own node, and the halves on the endpoints' nodes. */
function pathBranch(r: Report, p: Path, c: ChalkInstance, width: number): Branch {
  const head = `${p.entry} ${p.destination} (${p.port})`
  const local = !p.breaksOn || p.breaksOn === p.node
  const status = p.ignoredBy
    ? `${c.yellow(`✗ ${head}`)}: breaks at ${where(p)}, ignored (${p.ignoredBy})`
    : p.ok === false
      ? `${c.red(`✗ ${head}`)}: breaks at ${where(p)}`
      : p.ok === true
        ? `${c.green(`✓ ${head}`)}: ${p.detail}`
        : p.breaksAt === null
          ? `${c.dim(`– ${head}`)}: ${p.detail}`
          : `${c.yellow(`? ${head}`)}: ${where(p)}: ${p.detail}`
  const b: Branch = {text: status, children: []}
  const broken = p.ok === false && !p.ignoredBy
  const explain = broken ? breakDetail(p.detail, explaining(r, p.node, p.breaksAt ?? 'unknown'), c, width) : undefined
  if (p.trace) {
    const walk = walkBranches(p.trace, broken && local ? (o) => isBad(p, o) : undefined, explain, c)
    b.children = walk.branches
    if (broken && local && !walk.explained) b.detail = explain
  } else if (broken && local) b.detail = explain
  b.children.push(...p.remote.map((h) => halfBranch(r, p, h, c, width)))
  return b
}

/** The branches as lines: `├─`/`└─` before each, `│` down the side of those with more below, wrapped to the width. */
function draw(branches: Branch[], indent: string, width: number, out: string[]): void {
  branches.forEach((b, i) => {
    const last = i === branches.length - 1
    const below = indent + (last ? '   ' : '│  ')
    const side = below + (b.children.length > 0 ? '│  ' : '   ')
    out.push(...wrapVerbatim(capped(b.text), width, indent + (last ? '└─ ' : '├─ '), side))
    if (b.detail) out.push(...b.detail(side))
    draw(b.children, below, width, out)
  })
}

/** Every node of the report, each with every entry point's walk, as one tree per node. */
export function renderExplainTree(r: Report, c: ChalkInstance, width = Number.POSITIVE_INFINITY): string[] {
  const lines: string[] = ['', c.bold('Walks') + c.dim(' (short rules; the full ones: -o json --explain)')]
  for (const n of r.nodes) {
    lines.push(
      ...(n.reachable
        ? [c.bold(`${n.name} (${n.mode ?? '?'})`)]
        : wrapVerbatim(c.yellow(`not read: ${n.error ?? '?'}`), width, `${c.bold(n.name)}: `, '    ')),
    )
    draw(
      r.paths.filter((p) => p.node === n.name).map((p) => pathBranch(r, p, c, width)),
      '',
      width,
      lines,
    )
  }
  return lines
}
