import type {ChalkInstance} from 'chalk'
import type {Report} from './report.js'
import {wrapProse} from './width.js'

/** Codes are named after a check when they are this few; "node-read" and the like would list dozens. */
const MAX_CODES_SHOWN = 4

/**
 * The human report's "Not checked" section: each check that could not run and why, a reason shared by several nodes
 * shown once with the nodes listed. `?` marks a required check (the headline cannot say ✓), `-` one the user opted
 * out of or the input cannot give. Nothing when every check ran.
 */
export function renderNotChecked(
  r: Pick<Report, 'notChecked'>,
  c: ChalkInstance,
  width = Number.POSITIVE_INFINITY,
): string[] {
  if (r.notChecked.length === 0) return []
  const groups = new Map<string, {check: string; codes: string[]; reason: string; required: boolean; nodes: string[]}>()
  for (const n of r.notChecked) {
    const key = JSON.stringify([n.check, n.reason, n.required])
    const group = groups.get(key) ?? {check: n.check, codes: n.codes, reason: n.reason, required: n.required, nodes: []}
    if (n.node !== null && !group.nodes.includes(n.node)) group.nodes.push(n.node)
    groups.set(key, group)
  }
  const all = [...groups.values()]
  const required = all.filter((g) => g.required)
  const optional = all.filter((g) => !g.required)
  const lines: string[] = []
  if (required.length > 0) {
    lines.push('', c.bold('Not checked') + ` (${r.notChecked.filter((n) => n.required).length} required):`)
    for (const g of required) {
      const codes = g.codes.length > 0 && g.codes.length <= MAX_CODES_SHOWN ? ` (${g.codes.join(', ')})` : ''
      const where = g.nodes.length > 0 ? ` on ${g.nodes.join(', ')}` : ''
      lines.push(...wrapProse(`${g.check}${codes}${where}: ${g.reason}`, width, '  ? ', '    ').map((l) => c.yellow(l)))
    }
  }
  // What the user opted out of, or the input cannot give, is one line: the reasons are in -o json and --verbose.
  if (optional.length > 0) {
    const list = optional.map((g) => `${g.check}${g.nodes.length > 0 ? ` on ${g.nodes.join(', ')}` : ''}`).join('; ')
    const text = `${required.length > 0 ? '  - also not checked' : 'Not checked'} (not required): ${list}`
    lines.push(...wrapProse(text, width, '', required.length > 0 ? '    ' : '  ').map((l) => c.dim(l)))
  }
  return lines
}
