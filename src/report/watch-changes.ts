import {Chalk, type ChalkInstance} from 'chalk'
import {ENTRIES} from '../model/paths.js'
import {pathCell} from './human.js'
import type {Report} from './report.js'

/**
 * One difference between two diagnoses of the same Service (svc --watch): an entry point's outcome on a node, a node
 * read or no longer read, a finding that appeared or went away (by code and node), the verdict.
 */
export interface WatchChange {
  kind: 'path' | 'node' | 'finding' | 'verdict'
  /** The node it happened on; null for the Service as a whole (a finding of no node, the verdict). */
  node: string | null
  /** kind path: the entry point (pod→ClusterIP, …); else null. */
  entry: string | null
  /** kind finding: its code; else null. */
  code: string | null
  /** Before and after, as the table's cell says it (✓, ✗ STEP, ? STEP, – by design, not read, absent, present, ok, failing). */
  from: string
  to: string
  /** Why the new state is what it is: the broken path's detail, the node's read error, the finding's message; or null. */
  detail: string | null
}

const PLAIN = new Chalk({level: 0})

/** A path's state in words no colour carries: the path table's cell. */
function pathState(r: Report, node: string, entry: string): string {
  return pathCell(r, node, entry, PLAIN)
}

/** The detail of the first path of `entry` on `node` that does not work (broken, or undecided at a step). */
function pathDetail(r: Report, node: string, entry: string): string | null {
  const ps = r.paths.filter((p) => p.node === node && p.entry === entry)
  const bad = ps.find((p) => p.ok === false) ?? ps.find((p) => p.ok === null && p.breaksAt !== null)
  return bad?.detail ?? null
}

const findingKey = (f: Report['findings'][number]) => `${f.code}\u0000${f.node ?? ''}`

/**
 * What changed from `prev` to `next`, in a stable order: the verdict, then per node (sorted) whether it is read, its
 * entry points (in ENTRIES' order), and the findings that went away and appeared (by code). A node not read in `next`
 * says only that; its paths are not compared until it is read again.
 */
export function reportChanges(prev: Report, next: Report): WatchChange[] {
  const out: WatchChange[] = []
  if (prev.ok !== next.ok)
    out.push({
      kind: 'verdict',
      node: null,
      entry: null,
      code: null,
      from: prev.ok ? 'ok' : 'failing',
      to: next.ok ? 'ok' : 'failing',
      detail: next.summary,
    })
  const reachable = (r: Report, name: string) => r.nodes.find((n) => n.name === name)?.reachable
  const entries = ENTRIES.filter((e) => [prev, next].some((r) => r.paths.some((p) => p.entry === e)))
  const prevFindings = new Map(prev.findings.map((f) => [findingKey(f), f]))
  const nextFindings = new Map(next.findings.map((f) => [findingKey(f), f]))
  const findingsOf = (node: string | null) => {
    for (const [k, f] of prevFindings)
      if (f.node === node && !nextFindings.has(k))
        out.push({kind: 'finding', node, entry: null, code: f.code, from: 'present', to: 'absent', detail: null})
    for (const [k, f] of nextFindings)
      if (f.node === node && !prevFindings.has(k))
        out.push({kind: 'finding', node, entry: null, code: f.code, from: 'absent', to: 'present', detail: f.message})
  }
  findingsOf(null)
  const nodes = [...new Set([...prev.nodes, ...next.nodes].map((n) => n.name))].sort()
  for (const node of nodes) {
    const was = reachable(prev, node)
    const is = reachable(next, node)
    if (was !== is) {
      const word = (r: boolean | undefined) => (r === undefined ? 'absent' : r ? 'read' : 'not read')
      const error = next.nodes.find((n) => n.name === node)?.error ?? null
      out.push({kind: 'node', node, entry: null, code: null, from: word(was), to: word(is), detail: is ? null : error})
    }
    if (is)
      for (const entry of entries) {
        const from = was ? pathState(prev, node, entry) : 'not read'
        const to = pathState(next, node, entry)
        if (from !== to)
          out.push({kind: 'path', node, entry, code: null, from, to, detail: pathDetail(next, node, entry)})
      }
    findingsOf(node)
  }
  return out
}

/** Whether `next` breaks something that worked in `prev`: a path no longer ✓, a finding that appeared, the verdict failing. */
export function newBreaks(prev: Report, next: Report): boolean {
  return reportChanges(prev, next).some(
    (ch) =>
      (ch.kind === 'path' && !ch.to.startsWith('✓')) ||
      (ch.kind === 'finding' && ch.to === 'present') ||
      (ch.kind === 'verdict' && ch.to === 'failing'),
  )
}

/** "HH:MM:SS" of `time` in UTC (the reports' time is UTC too). */
export function clockOf(time: Date): string {
  return time.toISOString().slice(11, 19)
}

/**
 * The change lines of the human format: `14:02:11 node-b: pod→ClusterIP ✓ → ✗ DNAT (…)`, a finding as
 * `+ CODE: message` or `- CODE`, the whole Service's changes under its namespace/name. `changes` must be printable.
 */
export function renderChangeLines(
  changes: WatchChange[],
  at: string,
  service: {namespace: string; name: string},
  c: ChalkInstance,
): string[] {
  const colour = (state: string) =>
    state.startsWith('✓') || state === 'ok' || state === 'read'
      ? c.green(state)
      : state.startsWith('✗') || state === 'failing' || state === 'not read'
        ? c.red(state)
        : c.yellow(state)
  return changes.map((ch) => {
    const who = `${c.dim(at)} ${ch.node ?? `${service.namespace}/${service.name}`}:`
    const why = ch.detail ? ` (${ch.detail})` : ''
    // A finding's message starts with its node's name, which the line already says.
    const message = ch.node && ch.detail?.startsWith(`${ch.node}: `) ? ch.detail.slice(ch.node.length + 2) : ch.detail
    if (ch.kind === 'finding')
      return ch.to === 'present'
        ? `${who} ${c.red('+')} ${ch.code}${message ? `: ${message}` : ''}`
        : `${who} ${c.green('-')} ${ch.code}`
    const what = ch.kind === 'path' ? `${ch.entry} ` : ch.kind === 'verdict' ? 'verdict ' : ''
    return `${who} ${what}${colour(ch.from)} → ${colour(ch.to)}${why}`
  })
}
