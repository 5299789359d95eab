import type {ChalkInstance} from 'chalk'
import {worstFinding, type ScanSummary} from './scan-report.js'
import {groupFindingsByText} from './human.js'
import {fixLines} from './fix-lines.js'
import {fittingTable, wrapProse, type Cell} from './width.js'
import {renderNotChecked} from './coverage-human.js'

const SEVERITY_MARK = {error: '✗', warning: '!', info: 'i'} as const

/** The scan for people: the verdict, one row per Service, then the findings by Service and code, nodes listed once. */
export function renderScanHuman(r: ScanSummary, c: ChalkInstance, width = Number.POSITIVE_INFINITY): string {
  const lines: string[] = [
    ...wrapProse(
      r.summary.startsWith('✓')
        ? c.green(r.summary)
        : r.summary.startsWith('?')
          ? c.yellow(r.summary)
          : c.red.bold(r.summary),
      width,
      '',
      '  ',
    ),
    '',
  ]
  const readable = r.nodes.filter((n) => n.reachable).length
  // Out of every node asked; where some were not read, the share says how many were (the rest may be affected too).
  const share = (affected: number, suffix = '') =>
    `${affected} of ${r.nodes.length}${suffix}${readable === r.nodes.length ? '' : ` (${readable} read)`}`
  const head = ['Service', 'type', 'endpoints', 'worst finding', 'nodes']
  const table: Cell[][] = []
  for (const s of r.services) {
    const worst = worstFinding(s)
    const affected = worst
      ? new Set(s.findings.filter((f) => f.code === worst.code && f.node).map((f) => f.node)).size
      : 0
    // No finding is no ✓ where the Service's rules (or its implementer's state) went unjudged on a node.
    const unjudged = new Set(s.notChecked.filter((n) => n.required && n.check === 'proxy-rules').map((n) => n.node))
    const verdict = worst
      ? (worst.severity === 'error' ? c.red : c.yellow)(`${SEVERITY_MARK[worst.severity]} ${worst.code}`)
      : unjudged.size > 0
        ? c.yellow('? not judged')
        : c.green('✓')
    const where = worst ? (affected > 0 ? share(affected) : 'cluster') : unjudged.size > 0 ? share(unjudged.size) : ''
    table.push([
      `${s.service.namespace}/${s.service.name}`,
      s.service.type,
      `${s.endpoints.ready} ready${s.endpoints.notReady ? `, ${s.endpoints.notReady} not` : ''}`,
      verdict,
      where,
    ])
  }
  for (const s of r.skipped) table.push([`${s.namespace}/${s.name}`, s.type, c.dim('–'), c.dim('skipped'), ''])
  const fitted = fittingTable([{head}, {head: ['Service', 'type', 'endpoints', 'worst', 'nodes']}], table, width)
  if (fitted) lines.push(...fitted)
  else
    for (const row of table) {
      // One line per Service: type, endpoints, worst finding, nodes.
      const [name, ...cells] = row.map(String)
      lines.push(...wrapProse(cells.filter((x) => x !== '').join(', '), width, `${name}: `, '    '))
    }
  for (const n of r.nodes.filter((x) => !x.reachable))
    lines.push(...wrapProse(c.yellow(`node ${n.name} not read: ${n.error ?? '?'}`), width, '', '  '))
  for (const s of r.services) {
    const groups = groupFindingsByText(s.findings)
    if (groups.length === 0) continue
    lines.push('', c.bold(`${s.service.namespace}/${s.service.name}`))
    for (const {finding: f, nodes, message} of groups) {
      const color = f.severity === 'error' ? c.red : f.severity === 'warning' ? c.yellow : c.cyan
      const where =
        nodes.length === 0
          ? ''
          : nodes.length === 1
            ? ` [${nodes[0]}]`
            : ` [on ${share(nodes.length, ' nodes')}: ${nodes.join(', ')}]`
      lines.push(
        ...wrapProse(`${color(`${SEVERITY_MARK[f.severity]} ${f.code}`)}${where} ${message}`, width, '  ', '      '),
      )
      lines.push(...fixLines(f, '      ', c, width))
    }
  }
  if (r.skipped.length > 0) {
    lines.push('', c.bold('Skipped'))
    for (const s of r.skipped) lines.push(...wrapProse(`${s.namespace}/${s.name}: ${s.reason}`, width, '  ', '    '))
  }
  // What could not be checked is about nodes, not Services: each entry once, whichever Services it was found for.
  const notChecked = [
    ...new Map(
      r.services.flatMap((s) => s.notChecked).map((n) => [JSON.stringify([n.node, n.check, n.reason, n.required]), n]),
    ).values(),
  ]
  lines.push(...renderNotChecked({notChecked}, c, width))
  for (const n of r.notes) lines.push(...wrapProse(`note: ${n}`, width, '', '  ').map((l) => c.dim(l)))
  return lines.join('\n')
}
