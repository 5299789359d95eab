import {Chalk, type ChalkInstance} from 'chalk'
import Table from 'cli-table3'
import type {ProbeReport, Report} from './report.js'
import {ENTRIES} from '../model/paths.js'
import {renderTraceTree} from './trace-tree.js'
import {fixLines} from './fix-lines.js'

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
  lines.push(...fixLines(r.next, 'next', '  ', c))
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
  lines.push(...renderProbes(r.probes, c))
  const count = (sev: string) => r.findings.filter((f) => f.severity === sev).length
  lines.push('')
  lines.push(c.bold(`Findings: ${count('error')} error(s), ${count('warning')} warning(s), ${count('info')} info`))
  for (const f of r.findings) {
    const mark = SEVERITY_MARK[f.severity]
    const color = f.severity === 'error' ? c.red : f.severity === 'warning' ? c.yellow : c.cyan
    lines.push(`${color(`${mark} ${f.code}`)}${f.node ? ` [${f.node}]` : ''} ${f.message}`)
    for (const e of f.evidence) lines.push(c.dim(`    evidence: ${e}`))
    lines.push(...fixLines(f, 'fix', '    ', c))
  }
  const traced = r.paths.filter((p) => p.trace && p.ok !== true)
  for (const p of traced) {
    lines.push('')
    lines.push(c.bold(`Trace ${p.node} ${p.entry} (${p.port}):`))
    lines.push(renderTraceTree(p.trace!, c))
  }
  return lines.join('\n')
}

type ProbeTarget = ProbeReport['nodes'][number]['targets'][number]

/** Beyond this many endpoints the probe table lists only the failing ones, in one column. */
const ENDPOINT_COLUMNS = 6

function probeCell(t: ProbeTarget | undefined, c: ChalkInstance): string {
  if (!t) return c.dim('–')
  if (t.notProbed !== null) return c.yellow('– not probed')
  const why = [
    [t.refused, 'refused'],
    [t.timedOut, 'timed out'],
    [t.unreachable, 'unreachable'],
  ]
    .filter(([n]) => (n as number) > 0)
    .map(([n, w]) => `${n} ${w}`)
  if (t.connected === t.attempts) return c.green(`✓ ${t.connected}/${t.attempts}`)
  return c.red(`✗ ${t.connected}/${t.attempts} (${why.join(', ')})`)
}

const endpointLabel = (t: ProbeTarget) => t.pod ?? t.address

/** The live probes at a glance: per node (and port), the ClusterIP, the NodePort and each endpoint, ✓/✗ with counts. */
function renderProbes(p: ProbeReport, c: ChalkInstance): string[] {
  if (!p.ran) return [c.dim(`Probes: ${p.note ?? 'not run'}`)]
  const s = p.settings!
  const via = [...new Set(p.nodes.filter((n) => !n.error).map((n) => n.via))].join(', ') || 'the node'
  const lines = ['', c.bold(`Probes`) + ` from each node through ${via}: connect and close, ${s.vipAttempts} per Service address, ${s.endpointAttempts} per endpoint, ${s.timeoutMs / 1000} s timeout`]
  const all = p.nodes.flatMap((n) => n.targets)
  if (all.length === 0 && p.nodes.every((n) => !n.error)) return [...lines, c.dim('  nothing to probe (no TCP port with an address)')]
  const ports = [...new Set(all.map((t) => t.port))]
  const endpoints = [...new Map(all.filter((t) => t.kind === 'endpoint').map((t) => [t.address, t])).values()]
  const perEndpoint = endpoints.length <= ENDPOINT_COLUMNS
  const head = [
    'node',
    ...(ports.length > 1 ? ['port'] : []),
    'ClusterIP',
    ...(all.some((t) => t.kind === 'NodePort') ? ['NodePort'] : []),
    ...(perEndpoint ? endpoints.map(endpointLabel) : ['endpoints']),
  ]
  const table = new Table({head, style: {head: [], border: []}})
  for (const n of p.nodes) {
    if (n.error) {
      table.push([n.node, {colSpan: head.length - 1, content: c.yellow(`not probed: ${n.error}`)}])
      continue
    }
    for (const port of ports) {
      const mine = n.targets.filter((t) => t.port === port)
      const eps = mine.filter((t) => t.kind === 'endpoint')
      const failing = eps.filter((t) => t.notProbed === null && t.connected < t.attempts)
      const summary =
        failing.length === 0 ? c.green(`✓ ${eps.length} of ${eps.length} answer`) : c.red(`✗ ${failing.map((t) => `${endpointLabel(t)} ${probeCell(t, new Chalk({level: 0})).slice(2)}`).join(', ')}`)
      table.push([
        n.node,
        ...(ports.length > 1 ? [port] : []),
        probeCell(
          mine.find((t) => t.kind === 'ClusterIP'),
          c,
        ),
        ...(head.includes('NodePort')
          ? [
              probeCell(
                mine.find((t) => t.kind === 'NodePort'),
                c,
              ),
            ]
          : []),
        ...(perEndpoint
          ? endpoints.map((e) =>
              probeCell(
                eps.find((t) => t.address === e.address),
                c,
              ),
            )
          : [summary]),
      ])
    }
  }
  lines.push(table.toString())
  for (const note of p.notes) lines.push(c.yellow(`note: ${note}`))
  return lines
}
