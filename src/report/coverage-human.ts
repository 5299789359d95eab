import type {ChalkInstance} from 'chalk'
import type {Report} from './report.js'
import {printable} from './printable.js'
import {wrapProse} from './width.js'

/** Codes are named after a check when they are this few; "node-read" and the like would list dozens. */
const MAX_CODES_SHOWN = 4

/**
 * The human report's "Not checked" section: each check that could not run and why, a reason shared by several nodes
 * shown once with the nodes listed. `?` marks a required check (the headline cannot say ✓), `-` one the user opted
 * out of or the input cannot give. Nothing when every check ran.
 */
export function renderNotChecked(r: Pick<Report, 'notChecked'>, c: ChalkInstance, width = Number.POSITIVE_INFINITY): string[] {
  if (r.notChecked.length === 0) return []
  const groups = new Map<string, {check: string; codes: string[]; reason: string; required: boolean; nodes: string[]}>()
  for (const n of r.notChecked) {
    const key = JSON.stringify([n.check, n.reason, n.required])
    const group = groups.get(key) ?? {check: n.check, codes: n.codes, reason: n.reason, required: n.required, nodes: []}
    if (n.node !== null && !group.nodes.includes(n.node)) group.nodes.push(n.node)
    groups.set(key, group)
  }
  const required = r.notChecked.filter((n) => n.required).length
  const lines = ['', c.bold('Not checked') + ` (${required} required, ${r.notChecked.length - required} not required):`]
  for (const g of [...groups.values()].sort((a, b) => Number(b.required) - Number(a.required))) {
    const codes = g.codes.length > 0 && g.codes.length <= MAX_CODES_SHOWN ? ` (${g.codes.join(', ')})` : ''
    const where = g.nodes.length > 0 ? ` on ${g.nodes.join(', ')}` : ''
    const text = printable(`${g.check}${codes}${where}: ${g.reason}`)
    const wrapped = g.required ? wrapProse(text, width, '  ? ', '    ') : wrapProse(`${text} (not required)`, width, '  - ', '    ')
    lines.push(...wrapped.map((l) => (g.required ? c.yellow(l) : c.dim(l))))
  }
  return lines
}
