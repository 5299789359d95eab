import {Chalk, type ChalkInstance} from 'chalk'
import Table from 'cli-table3'
import type {Report} from './report.js'
import {ENTRIES} from '../model/paths.js'
import {renderTraceTree} from './trace-tree.js'

/** FORCE_COLOR (any value but 0/false) turns colours on even into a pipe, as in Node itself; else NO_COLOR or a non-terminal turns them off. */
export function makeChalk(stream: NodeJS.WriteStream): ChalkInstance {
  const force = process.env.FORCE_COLOR
  if (force !== undefined && force !== '0' && force !== 'false') return new Chalk({level: 1})
  const off = !!process.env.NO_COLOR || !stream.isTTY
  return new Chalk({level: off ? 0 : 1})
}

const SEVERITY_MARK = {error: '✗', warning: '!', info: 'i'} as const

/** The first line of the report: the verdict and where the path breaks. */
export function renderHeadline(r: Report, c: ChalkInstance): string {
  return r.summary.startsWith('✓') ? c.green(r.summary) : r.summary.startsWith('✗') ? c.red.bold(r.summary) : c.yellow(r.summary)
}

export function renderHuman(r: Report, c: ChalkInstance): string {
  const lines: string[] = []
  lines.push(renderHeadline(r, c))
  if (r.next) lines.push(`  ${c.bold('next:')} ${r.next}`)
  lines.push('')
  const s = r.service
  const ports = s.ports.map((p) => `${p.name ? p.name + ' ' : ''}${p.port}→${p.targetPort}/${p.protocol}${p.nodePort ? ` (NodePort ${p.nodePort})` : ''}`).join(', ')
  lines.push(`${c.bold('Service')} ${s.namespace}/${s.name}  ${s.type} ${s.clusterIP ?? ''}  ports ${ports || 'none'}`)
  lines.push(
    `${c.bold('Endpoints')} ${r.endpoints.ready} ready, ${r.endpoints.notReady} not ready (from ${r.endpoints.source})   ${c.bold('kube-proxy')} ${r.proxy.mode}, mark ${r.proxy.masqueradeMark} (${r.proxy.source})`,
  )
  for (const n of r.notes) lines.push(c.yellow(`note: ${n}`))
  const entries = ENTRIES.filter((e) => r.paths.some((p) => p.entry === e))
  if (r.nodes.length > 0) {
    const table = new Table({head: ['node', 'mode', ...entries], style: {head: [], border: []}})
    for (const n of r.nodes) {
      if (!n.reachable) {
        table.push([n.name, {colSpan: Math.max(entries.length, 1) + 1, content: c.yellow(`not read: ${n.error ?? '?'}`)}])
        continue
      }
      table.push([
        n.name,
        n.mode ?? '?',
        ...entries.map((e) => {
          const ps = r.paths.filter((p) => p.node === n.name && p.entry === e)
          if (ps.length === 0) return c.dim('–')
          const bad = ps.find((p) => p.ok === false)
          if (bad?.ignoredBy) return c.yellow(`✗ ${bad.breaksAt} (ignored)`)
          if (bad) return c.red(`✗ ${bad.breaksAt}${s.ports.length > 1 ? ` (${bad.port})` : ''}`)
          const undecided = ps.find((p) => p.ok === null && p.breaksAt !== null)
          if (undecided) return c.yellow(`? ${undecided.breaksAt}`)
          if (ps.every((p) => p.ok === null)) return c.dim('– by design')
          return c.green('✓')
        }),
      ])
    }
    lines.push(table.toString())
  }
  const count = (sev: string) => r.findings.filter((f) => f.severity === sev).length
  lines.push('')
  lines.push(c.bold(`Findings: ${count('error')} error(s), ${count('warning')} warning(s), ${count('info')} info`))
  for (const f of r.findings) {
    const mark = SEVERITY_MARK[f.severity]
    const color = f.severity === 'error' ? c.red : f.severity === 'warning' ? c.yellow : c.cyan
    lines.push(`${color(`${mark} ${f.code}`)}${f.node ? ` [${f.node}]` : ''} ${f.message}`)
    for (const e of f.evidence) lines.push(c.dim(`    evidence: ${e}`))
    lines.push(`    ${c.bold('fix:')} ${f.hint}`)
  }
  const traced = r.paths.filter((p) => p.trace && p.ok !== true)
  for (const p of traced) {
    lines.push('')
    lines.push(c.bold(`Trace ${p.node} ${p.entry} (${p.port}):`))
    lines.push(renderTraceTree(p.trace!, c))
  }
  return lines.join('\n')
}
