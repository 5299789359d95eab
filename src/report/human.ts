import {Chalk, supportsColor, type ChalkInstance} from 'chalk'
import type {ProbeReport, Report} from './report.js'
import {SERVICE_IMPLEMENTERS} from '../model/implementers/index.js'
import {ENTRIES} from '../model/paths.js'
import {failureParts} from '../node/probe/tcp-probe.js'
import {renderNotChecked} from './coverage-human.js'
import {renderKernelEvidence} from './kernel-evidence-human.js'
import {fixLines} from './fix-lines.js'
import {renderWalk} from './trace-walk.js'
import {fittingTable, type Cell, wrapProse, wrapVerbatim} from './width.js'

/**
 * Colours as chalk detects them for stdout (FORCE_COLOR, TERM=dumb, a terminal or not), and off under NO_COLOR
 * (no-color.org), which chalk does not read, unless FORCE_COLOR asks for them.
 */
export function makeChalk(env: NodeJS.ProcessEnv = process.env): ChalkInstance {
  const noColor = !!env.NO_COLOR && env.FORCE_COLOR === undefined
  return new Chalk({level: supportsColor && !noColor ? supportsColor.level : 0})
}

const SEVERITY_MARK = {error: '✗', warning: '!', info: 'i'} as const

/** The first line of the report: the verdict and where the path breaks. */
export function renderHeadline(r: Pick<Report, 'summary'>, c: ChalkInstance): string {
  return r.summary.startsWith('✓')
    ? c.green(r.summary)
    : r.summary.startsWith('✗')
      ? c.red.bold(r.summary)
      : c.yellow(r.summary)
}

/** Findings of one code whose messages, evidence and hints differ only by the node's name: printed once, the nodes listed. */
interface FindingLine {
  finding: Report['findings'][number]
  nodes: string[]
  message: string
}

/** A message without its leading "NODE: " (the node is listed before it); another mention of a grouped node reads "each node". */
export function groupFindingsByText(findings: Report['findings']): FindingLine[] {
  const out: FindingLine[] = []
  const byKey = new Map<string, FindingLine>()
  for (const f of findings) {
    const node = f.node
    const generic = (t: string) => (node ? t.split(node).join('\0') : t)
    const k = [
      f.code,
      f.severity,
      generic(f.message),
      ...f.evidence.map(generic),
      generic(f.check?.command ?? ''),
      generic(JSON.stringify(f.fix ?? null)),
      generic(f.text ?? ''),
    ].join('\u0001')
    const prev = node ? byKey.get(k) : undefined
    if (prev) {
      prev.nodes.push(node!)
      continue
    }
    const line = {finding: f, nodes: node ? [node] : [], message: f.message}
    if (node) byKey.set(k, line)
    out.push(line)
  }
  for (const l of out) {
    const node = l.finding.node
    if (node && l.message.startsWith(`${node}: `)) l.message = l.message.slice(node.length + 2)
    if (node && l.nodes.length > 1) l.message = l.message.split(node).join('each node')
  }
  return out
}

/** Short entry names for a narrow table, with the legend that says what they stand for. */
const SHORT_ENTRY: Record<string, string> = {
  'pod→ClusterIP': 'pod→CIP',
  'node→ClusterIP': 'node→CIP',
  'outside→NodePort': 'out→NP',
  'outside→LoadBalancer': 'out→LB',
  'outside→externalIP': 'out→extIP',
  'pod→itself': 'pod→self',
}
const SHORT_LEGEND = 'CIP ClusterIP, NP NodePort, LB LoadBalancer, extIP externalIP, out outside'

const NOT_FOLLOWED = 'not followed'

/** The step where a path breaks, with "@NODE" when that is an endpoint's node, not the path's own. */
export function where(p: Report['paths'][number]): string {
  return p.breaksOn && p.breaksOn !== p.node ? `${p.breaksAt}@${p.breaksOn}` : `${p.breaksAt}`
}

/** What a path does, in a table cell or a list: ✓, ✗ STEP (port), ? STEP, – by design. */
export function pathCell(r: Report, node: string, e: string, c: ChalkInstance): string {
  const ps = r.paths.filter((p) => p.node === node && p.entry === e)
  if (ps.length === 0) return c.dim('–')
  const bad = ps.find((p) => p.ok === false)
  if (bad?.ignoredBy) return c.yellow(`✗ ${where(bad)} (ignored)`)
  // A dual-stack Service: the family of the broken path, when the other family's works.
  const fam = bad && new Set(ps.map((p) => p.family)).size > 1 ? ` ${bad.family}` : ''
  if (bad) return c.red(`✗ ${where(bad)}${r.service.ports.length > 1 ? ` (${bad.port})` : ''}${fam}`)
  const undecided = ps.find((p) => p.ok === null && p.breaksAt !== null)
  if (undecided) return c.yellow(`? ${where(undecided)}`)
  if (ps.every((p) => p.ok === null)) return c.dim('– by design')
  // The second half on an endpoint's node that was not read: the path is not known to work.
  if (ps.some((p) => p.remote.some((h) => !h.followed))) return c.yellow(`? ${NOT_FOLLOWED}`)
  return c.green('✓')
}

/** The per-node table of paths, or when it does not fit the width, one block per node. */
function renderPathTable(r: Report, c: ChalkInstance, width: number): string[] {
  const entries = ENTRIES.filter((e) => r.paths.some((p) => p.entry === e))
  // An unread node: its name, then one cell across the other columns with the reason, wrapped to the width left.
  const nameWidth = Math.max(4, ...r.nodes.map((n) => n.name.length))
  const rows = r.nodes.map((n) =>
    n.reachable
      ? [n.name, n.mode ?? '?', ...entries.map((e) => pathCell(r, n.name, e, c))]
      : [
          n.name,
          {
            colSpan: entries.length + 1,
            content: wrapProse(c.yellow(`not read: ${n.error ?? '?'}`), width - nameWidth - 7, '', '  ').join('\n'),
          },
        ],
  )
  const short = entries.map((e) => SHORT_ENTRY[e] ?? e)
  const legend = SHORT_LEGEND.split(', ')
    .filter((l) => short.some((s) => s.includes(l.split(' ')[0])))
    .join(', ')
  const table = fittingTable(
    [{head: ['node', 'mode', ...entries]}, {head: ['node', 'mode', ...short], legend}],
    rows,
    width,
  )
  if (table) return table
  const lines: string[] = []
  for (const n of r.nodes) {
    if (!n.reachable) {
      lines.push(...wrapProse(c.yellow(`not read: ${n.error ?? '?'}`), width, `${n.name}: `, '    '))
      continue
    }
    const cells = entries.map((e) => {
      const cell = pathCell(r, n.name, e, c)
      const [mark, ...rest] = cell.split(' ')
      return rest.length === 0
        ? `${mark} ${e}`
        : rest.join(' ').includes(NOT_FOLLOWED)
          ? `${mark} ${e} ${rest.join(' ')}`
          : `${mark} ${e} at ${rest.join(' ')}`
    })
    lines.push(...wrapProse(cells.join(', '), width, `${n.name} (${n.mode ?? '?'}): `, '    '))
  }
  return lines
}

type PathLine = Report['paths'][number]
type Outcome = NonNullable<PathLine['trace']>['outcomes'][number]

/** The outcomes where a path breaks: a verdict that is no DNAT or ACCEPT, or the destination its judgement names. */
function badOutcomes(p: PathLine): Outcome[] {
  return p.ok === false && p.trace ? p.trace.outcomes.filter((o) => isBad(p, o)) : []
}
export const isBad = (p: PathLine, o: Outcome) =>
  (o.verdict !== 'DNAT' && o.verdict !== 'ACCEPT') || (!!o.destination && p.detail.includes(o.destination))

/** Where a broken outcome breaks: the rule that sent it to its destination, else its last rule. */
function breakingStep(o: Outcome): string {
  const s = (o.destination && o.steps.find((x) => x.rule.includes(o.destination!))) || o.steps[o.steps.length - 1]
  return s ? `${s.table}/${s.chain}:${s.line}` : 'policy'
}

/**
 * The walks behind the paths that do not work, flat and numbered. Paths of one node that break at the same step are
 * walked once (the first of them), the others named in its heading.
 */
export function renderWalks(r: Report, c: ChalkInstance, width: number): string[] {
  const groups = new Map<string, PathLine[]>()
  for (const p of r.paths.filter((x) => x.trace && x.ok !== true)) {
    const bad = badOutcomes(p)
    const k = `${p.node}\0${p.port}\0${where(p)}\0${bad.length > 0 ? bad.map(breakingStep).join(',') : p.detail}`
    groups.set(k, [...(groups.get(k) ?? []), p])
  }
  const lines: string[] = []
  for (const [, ps] of groups) {
    const p = ps[0]
    const t = p.trace!
    const status = p.ok === false ? c.red(`✗ ${where(p)}`) : c.yellow(`? ${p.breaksAt === null ? '' : where(p)}`.trim())
    const bad = badOutcomes(p)
    // When the walk marks the breaking step with why, the heading need not say it again.
    const why = bad.length > 0 ? /, which is (.*)$/.exec(p.detail)?.[1] : undefined
    const which = ps.length > 1 ? ` at one step (the walk of ${p.entry} shown)` : ''
    lines.push(
      '',
      ...wrapProse(
        `${c.bold(`${p.node} ${ps.map((x) => x.entry).join(', ')} (${p.port})${p.source ? ` from ${p.source}` : ''}`)}: ${status}${which}${why ? '' : `: ${p.detail}`}`,
        width,
        '',
        '    ',
      ),
    )
    // The rules are not where a hairpin path breaks: the heading (which backend, which bridge port) says it all.
    if (p.breaksAt === 'bridge/hairpin') continue
    const half =
      p.breaksOn && p.breaksOn !== p.node
        ? p.remote.find((h) => h.node === p.breaksOn && h.ok !== true && h.trace)
        : undefined
    if (half?.trace) {
      // Its own node forwards it: the walk that matters is the endpoint's half, where it breaks.
      const endpoint = half.endpoint.replace(/:\d+$/, '')
      const badHalf = (o: Outcome) =>
        (o.verdict !== 'DNAT' && o.verdict !== 'ACCEPT') ||
        (!!o.destination && o.destination !== endpoint && o.destination !== half.endpoint)
      lines.push(
        ...wrapProse(
          c.dim(
            `on ${half.node}, arriving DNATed to ${half.endpoint}${half.pod ? ` (${half.pod})` : ''} from ${p.node}:`,
          ),
          width,
          '  ',
          '    ',
        ),
      )
      lines.push(...renderWalk(half.trace, c, width, {bad: badHalf, why: `breaks at ${where(p)}`, indent: '  '}))
      continue
    }
    lines.push(
      ...renderWalk(t, c, width, {
        bad: p.ok === false ? (o) => isBad(p, o) : undefined,
        why: why ?? `breaks at ${where(p)}`,
      }),
    )
  }
  if (lines.length > 0) lines.splice(1, 0, c.bold('Walks') + c.dim(' (short rules; the full ones: -o json --explain)'))
  return lines
}

/** `walks: false`: without the flat walks (`--explain-format tree` prints its tree in their place). */
export function renderHuman(
  r: Report,
  c: ChalkInstance,
  width = Number.POSITIVE_INFINITY,
  opts: {walks: boolean} = {walks: true},
): string {
  const lines: string[] = []
  lines.push(...wrapProse(renderHeadline(r, c), width, '', '  '))
  lines.push(...fixLines(r.next, '  ', c, width))
  lines.push('')
  const s = r.service
  const ports = s.ports
    .map(
      (p) =>
        `${p.name ? p.name + ' ' : ''}${p.port}→${p.targetPort}/${p.protocol}${p.nodePort ? ` (NodePort ${p.nodePort})` : ''}`,
    )
    .join(', ')
  lines.push(
    ...wrapProse(
      `${c.bold('Service')} ${s.namespace}/${s.name}  ${s.type} ${(s.clusterIPs ?? []).length > 1 ? s.clusterIPs.join(', ') : (s.clusterIP ?? '')}  ports ${ports || 'none'}`,
      width,
      '',
      '  ',
    ),
  )
  lines.push(
    ...wrapProse(
      `${c.bold('Endpoints')} ${r.endpoints.ready} ready, ${r.endpoints.notReady} not ready (from ${r.endpoints.source})${kubeProxyServes(r) ? `   ${c.bold('kube-proxy')} ${r.proxy.mode}, mark ${r.proxy.masqueradeMark} (${r.proxy.source})` : ''}`,
      width,
      '',
      '  ',
    ),
  )
  const implementers = implementersLine(r)
  if (implementers) lines.push(...wrapProse(`${c.bold('Services implemented by:')} ${implementers}`, width, '', '  '))
  for (const n of r.notes) lines.push(...wrapProse(c.yellow(`note: ${n}`), width, '', '  '))
  const sources = [...new Set(r.paths.flatMap((p) => (p.source ? [p.source] : [])))]
  if (sources.length > 0)
    lines.push(
      ...wrapProse(
        `${c.bold('Paths from')} ${sources.join(', ')} (--from: the client's packets cross its node's rules, then the endpoints' nodes'; no other node is a source)`,
        width,
        '',
        '  ',
      ),
    )
  if (r.nodes.length > 0) lines.push(...renderPathTable(r, c, width))
  lines.push(...renderProbes(r.probes, c, width))
  lines.push(...renderKernelEvidence(r, c, width))
  lines.push(...renderNotChecked(r, c, width))
  const count = (sev: string) => r.findings.filter((f) => f.severity === sev).length
  lines.push('')
  const ignored =
    r.ignored.length > 0
      ? `, ${r.ignored.length} ignored (${r.ignored.map((i) => `${i.code}${i.node ? ` [${i.node}]` : ''}`).join(', ')})`
      : ''
  lines.push(
    ...wrapProse(
      `Findings: ${count('error')} error(s), ${count('warning')} warning(s), ${count('info')} info${ignored}`,
      width,
      '',
      '  ',
    ).map((l) => c.bold(l)),
  )
  for (const {finding: f, nodes, message} of groupFindingsByText(r.findings)) {
    const mark = SEVERITY_MARK[f.severity]
    const color = f.severity === 'error' ? c.red : f.severity === 'warning' ? c.yellow : c.cyan
    lines.push(
      ...wrapProse(
        `${color(`${mark} ${f.code}`)}${nodes.length > 0 ? ` [${nodes.join(', ')}]` : ''} ${message}`,
        width,
        '',
        '    ',
      ),
    )
    for (const e of f.evidence) lines.push(...wrapVerbatim(e, width, '    evidence: ', '        ').map((l) => c.dim(l)))
    lines.push(...fixLines(f, '    ', c, width))
    if (nodes.length > 1 && f.node && JSON.stringify([f.check, f.fix]).includes(f.node))
      lines.push(...wrapProse(c.dim(`(likewise on ${nodes.slice(1).join(', ')})`), width, '         ', '         '))
  }
  if (opts.walks) lines.push(...renderWalks(r, c, width))
  return lines.join('\n')
}

type ProbeTarget = ProbeReport['nodes'][number]['targets'][number]

/** Beyond this many endpoints the probe table lists only the failing ones, in one column. */
const ENDPOINT_COLUMNS = 6

function probeCell(t: ProbeTarget | undefined, c: ChalkInstance): string {
  if (!t) return c.dim('–')
  if (t.notProbed !== null) return c.yellow('– not probed')
  const why = failureParts(t)
  if (t.connected === t.attempts) return c.green(`✓ ${t.connected}/${t.attempts}`)
  return c.red(`✗ ${t.connected}/${t.attempts} (${why.join(', ')})`)
}

const endpointLabel = (t: ProbeTarget) => t.pod ?? t.address

/** The live probes at a glance: per node (and port), the ClusterIP, the NodePort and each endpoint, ✓/✗ with counts. */
function renderProbes(p: ProbeReport, c: ChalkInstance, width: number): string[] {
  if (!p.ran) return wrapProse(`Probes: ${p.note ?? 'not run'}`, width, '', '  ').map((l) => c.dim(l))
  const s = p.settings!
  const via = [...new Set(p.nodes.filter((n) => !n.error).map((n) => n.via))].join(', ') || 'the node'
  const lines = [
    '',
    ...wrapProse(
      c.bold(`Probes`) +
        ` from each node through ${via}: connect and close, ${s.vipAttempts} per Service address, ${s.endpointAttempts} per endpoint, ${s.timeoutMs / 1000} s timeout`,
      width,
      '',
      '  ',
    ),
  ]
  const all = p.nodes.flatMap((n) => n.targets)
  if (all.length === 0 && p.nodes.every((n) => !n.error))
    return [...lines, c.dim('  nothing to probe (no TCP port with an address)')]
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
  const table: Cell[][] = []
  for (const n of p.nodes) {
    if (n.error) {
      table.push([
        n.node,
        {
          colSpan: head.length - 1,
          content: c.yellow(n.error.startsWith('not probed') ? n.error : `not probed: ${n.error}`),
        },
      ])
      continue
    }
    for (const port of ports) {
      const mine = n.targets.filter((t) => t.port === port)
      const eps = mine.filter((t) => t.kind === 'endpoint')
      const failing = eps.filter((t) => t.notProbed === null && t.connected < t.attempts)
      const summary =
        failing.length === 0
          ? c.green(`✓ ${eps.length} of ${eps.length} answer`)
          : c.red(
              `✗ ${failing.map((t) => `${endpointLabel(t)} ${probeCell(t, new Chalk({level: 0})).slice(2)}`).join(', ')}`,
            )
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
  const fitted = fittingTable([{head}], table, width)
  if (fitted) lines.push(...fitted)
  else
    for (const row of table) {
      // One line per node (and port): each column's heading before its cell.
      const cells = row.slice(1).map((cell, i) => (typeof cell === 'string' ? `${head[i + 1]} ${cell}` : cell.content))
      lines.push(...wrapProse(cells.join(', '), width, `${String(row[0])}: `, '    '))
    }
  for (const note of p.notes) lines.push(...wrapProse(c.yellow(`note: ${note}`), width, '', '  '))
  return lines
}

/**
 * Whether kube-proxy serves any read node (alone or beside another), or no node was read (it is assumed): only then
 * does the header name its mode; the implementers' line names who serves the others.
 */
function kubeProxyServes(r: Report): boolean {
  const read = r.nodes.filter((n) => n.implementer)
  return read.length === 0 || read.some((n) => [n.implementer!.name, ...n.implementer!.others].includes('kube-proxy'))
}

/**
 * "node-a Cilium, node-b Cilium (and kube-proxy)": who implements Services on each read node, said where any node is
 * served by another than kube-proxy alone; undefined where kube-proxy serves every node (the header says its mode).
 */
function implementersLine(r: Report): string | undefined {
  const read = r.nodes.filter((n) => n.implementer)
  if (!read.some((n) => n.implementer!.name !== 'kube-proxy' || n.implementer!.others.length > 0)) return undefined
  const title = (name: string) =>
    name === 'none' ? 'nothing' : (SERVICE_IMPLEMENTERS.find((i) => i.name === name)?.title ?? name)
  return read
    .map((n) => {
      const i = n.implementer!
      return `${n.name} ${title(i.name)}${i.others.length > 0 ? ` (and ${i.others.map(title).join(', ')})` : ''}`
    })
    .join(', ')
}
