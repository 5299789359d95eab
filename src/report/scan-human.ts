import type {ChalkInstance} from 'chalk'
import Table from 'cli-table3'
import {groupFindings, worstFinding, type ScanReport} from './scan-report.js'
import {fixLines} from './fix-lines.js'

const SEVERITY_MARK = {error: '✗', warning: '!', info: 'i'} as const

/** The scan for people: the verdict, one row per Service, then the findings by Service and code, nodes listed once. */
export function renderScanHuman(r: ScanReport, c: ChalkInstance): string {
  const lines: string[] = [r.ok ? c.green(r.summary) : c.red.bold(r.summary), '']
  const readable = r.nodes.filter((n) => n.reachable).length
  const table = new Table({head: ['Service', 'type', 'endpoints', 'worst finding', 'nodes'], style: {head: [], border: []}})
  for (const s of r.services) {
    const worst = worstFinding(s)
    const affected = worst ? new Set(s.findings.filter((f) => f.code === worst.code && f.node).map((f) => f.node)).size : 0
    const verdict = worst ? (worst.severity === 'error' ? c.red : c.yellow)(`${SEVERITY_MARK[worst.severity]} ${worst.code}`) : c.green('✓')
    const where = !worst ? '' : affected > 0 ? `${affected} of ${readable}` : 'cluster'
    table.push([`${s.service.namespace}/${s.service.name}`, s.service.type, `${s.endpoints.ready} ready${s.endpoints.notReady ? `, ${s.endpoints.notReady} not` : ''}`, verdict, where])
  }
  for (const s of r.skipped) table.push([`${s.namespace}/${s.name}`, s.type, c.dim('–'), c.dim('skipped'), ''])
  lines.push(table.toString())
  for (const n of r.nodes.filter((x) => !x.reachable)) lines.push(c.yellow(`node ${n.name} not read: ${n.error ?? '?'}`))
  for (const s of r.services) {
    const groups = groupFindings(s.findings)
    if (groups.length === 0) continue
    lines.push('', c.bold(`${s.service.namespace}/${s.service.name}`))
    for (const g of groups) {
      const color = g.severity === 'error' ? c.red : g.severity === 'warning' ? c.yellow : c.cyan
      const where = g.nodes.length === 0 ? '' : g.nodes.length === 1 ? ` [${g.nodes[0]}]` : ` [on ${g.nodes.length} of ${readable} nodes: ${g.nodes.join(', ')}]`
      lines.push(`  ${color(`${SEVERITY_MARK[g.severity]} ${g.code}`)}${where} ${g.message}`)
      lines.push(...fixLines(g, 'next', '      ', c))
    }
  }
  if (r.skipped.length > 0) {
    lines.push('', c.bold('Skipped'))
    for (const s of r.skipped) lines.push(`  ${s.namespace}/${s.name}: ${s.reason}`)
  }
  for (const n of r.notes) lines.push(c.dim(`note: ${n}`))
  return lines.join('\n')
}
