import type {ChalkInstance} from 'chalk'
import type {NodeReadVia} from '../diagnosis/choose-transport.js'
import type {TraceResult} from '../trace/types.js'
import {writeDocument, type CleanupReport, type CollectReport, type TraceHeader} from './document.js'
import {renderExplainTree} from './explain-tree.js'
import {renderHeadline, renderHuman, renderWalks} from './human.js'
import {renderJunit} from './junit.js'
import {printableDocument} from './printable.js'
import {renderReadVia} from './read-via.js'
import type {FailOn, Report} from './report.js'
import {renderScanHuman} from './scan-human.js'
import {scanDocument, singleServiceSummary, writeScanJson, type ScanSummary} from './scan-report.js'
import {renderTraceSummary, renderWalk} from './trace-walk.js'
import {wrapProse} from './width.js'
import {escapeJsonControls} from './json-writer.js'
import {clockOf, renderChangeLines, reportChanges, type WatchChange} from './watch-changes.js'

/**
 * Where every command's document reaches stdout, in the format asked for. The one place untrusted text is made safe
 * for a terminal: the human formats (tables, walks, JUnit) lay out a copy of the document whose strings are all
 * printable (printableDocument: a control shows as its escape), then add their own line breaks and colours; JSON and
 * YAML escape what a terminal acts on in their own way (json-writer.ts, document.ts), so their values stay exact.
 */
export type Write = (chunk: string | Uint8Array) => void

/** How the human formats lay out: colours, and the width to wrap at. */
export interface Layout {
  chalk: ChalkInstance
  width: number
}

/** `svc`: the report as a table (or only its headline with -q), JSON, YAML or JUnit; the table ends with how each node was read. */
export function writeServiceReport(
  report: Report,
  how: {
    format: 'table' | 'json' | 'yaml' | 'junit'
    quiet: boolean
    /** What fails a JUnit testcase (default: an error). */
    failOn?: FailOn
    readVia?: Map<string, NodeReadVia>
    order: string[]
    /** How the table shows the walks of an --explain report: flat and numbered (text), or as a tree per node. */
    walks?: 'text' | 'tree'
  },
  layout: Layout,
  write: Write,
): void {
  if (how.format === 'junit')
    return write(
      renderJunit(printableDocument(singleServiceSummary(report)), how.failOn ?? {severity: 'error', incomplete: true}),
    )
  if (how.format !== 'table') return writeDocument(report, how.format, write)
  const r = printableDocument(report)
  const {chalk: c, width} = layout
  if (how.quiet) return write(headline(r.summary, c, width))
  if (how.walks === 'tree')
    write([renderHuman(r, c, width, {walks: false}), ...renderExplainTree(r, c, width)].join('\n') + '\n')
  else write(renderHuman(r, c, width) + '\n')
  if (how.readVia)
    write(
      '\n' + renderReadVia(printableDocument(how.readVia), printableDocument([...new Set(how.order)]), width) + '\n',
    )
}

/** `svc -o mermaid`: the report's packet paths as a Mermaid flowchart (pictures.ts, loaded only when asked for). */
export async function writeMermaid(report: Report, write: Write): Promise<void> {
  const {mermaidOf} = await import('./pictures.js')
  write(mermaidOf(report))
}

/**
 * `svc -o html`, `scan -o html`: one self-contained page of the reports' packet paths (pictures.ts, loaded only when
 * asked for); `summary` is a scan's verdict, shown above its Services.
 */
export async function writeHtml(
  reports: Report[],
  page: {title: string; summary: string | null},
  write: Write,
): Promise<void> {
  const {htmlOf} = await import('./pictures.js')
  write(htmlOf(reports, page))
}

/** A document's first line alone (-q), coloured by its mark. */
function headline(summary: string, c: ChalkInstance, width: number): string {
  return wrapProse(renderHeadline({summary}, c), width, '', '  ').join('\n') + '\n'
}

/** `scan`: the table (or only its verdict with -q), JSON or YAML (written Service by Service), or JUnit XML. */
export function writeScanReport(
  summary: ScanSummary,
  how: {format: 'table' | 'json' | 'yaml' | 'junit'; quiet: boolean; failOn: FailOn},
  layout: Layout,
  write: Write,
): void {
  if (how.format === 'json') return writeScanJson(summary, write)
  if (how.format === 'yaml') return writeDocument(scanDocument(summary), 'yaml', write)
  const r = printableDocument(summary)
  if (how.format === 'junit') return write(renderJunit(r, how.failOn))
  if (how.quiet) return write(headline(r.summary, layout.chalk, layout.width))
  write(renderScanHuman(r, layout.chalk, layout.width) + '\n')
}

/** `trace`'s document: the walk and what the paste normaliser assumed, with the contract's header. */
export type TraceDocument = TraceResult & {notes: string[]} & Partial<TraceHeader>

/** `trace`: the walk and its verdict after what the paste normaliser assumed (or only the verdict with -q), JSON or YAML. */
export function writeTrace(
  trace: TraceDocument,
  how: {format: 'table' | 'json' | 'yaml'; quiet?: boolean},
  layout: Layout,
  write: Write,
): void {
  if (how.format !== 'table') return writeDocument(trace, how.format, write)
  const t = printableDocument(trace)
  const {chalk: c, width} = layout
  if (how.quiet) return write(`${renderTraceSummary(t, c, width)}\n`)
  const assumed = t.notes.flatMap((n) => wrapProse(`note: ${n}`, width, '', '  ')).join('\n')
  write(
    `${assumed}${assumed ? '\n\n' : ''}${renderWalk(t, c, width).join('\n')}\n\n${renderTraceSummary(t, c, width)}\n`,
  )
}

/** `cleanup`: one line per table it deleted (names from a node's output, made printable), or the document. */
export function writeCleanup(r: CleanupReport, how: {format: 'table' | 'json' | 'yaml'}, write: Write): void {
  if (how.format !== 'table') return writeDocument(r, how.format, write)
  const p = printableDocument(r)
  write(
    p.removed.length === 0
      ? `${p.node}: no table of kproxy-doctor's (kpd_trace_*) to delete\n`
      : p.removed.map((t) => `${p.node}: deleted table inet ${t}\n`).join(''),
  )
}

/** `collect svc`: the bundle written and how many nodes were read (-q: that line alone), or the document. */
export function writeCollect(
  r: CollectReport,
  how: {format: 'table' | 'json' | 'yaml'; quiet?: boolean},
  write: Write,
): void {
  if (how.format !== 'table') return writeDocument(r, how.format, write)
  // Node names come from the API: made printable like every untrusted text on a terminal.
  const p = printableDocument(r)
  const bad = p.nodes.filter((n) => !n.read)
  const read = p.nodes.length - bad.length
  write(
    `wrote ${p.bundle}: ${read} node(s) read${bad.length ? `, ${bad.length} not (${bad.map((n) => n.name).join(', ')})` : ''}\n`,
  )
  if (!how.quiet) write(`diagnose it with: ${p.next.command}\n`)
}

/**
 * `svc --watch`: the first diagnosis in full, then only what changed since the one before (report/watch-changes.ts):
 * in a table, one line per change with the time of day (nothing when nothing changed); in JSON, one document a line
 * (NDJSON) for every diagnosis that changed something: the report with its `changes` (empty in the first). With
 * --explain (`walks`), the first diagnosis has its walks in that form, and each change after its lines the walks of
 * only the paths whose state changed (text: those that do not work now; tree: each of them, ✓ or not, under its node).
 */
export function writeWatchReport(
  prev: Report | undefined,
  report: Report,
  how: Parameters<typeof writeServiceReport>[1] & {format: 'table' | 'json'},
  layout: Layout,
  write: Write,
): void {
  const changes = prev ? reportChanges(prev, report) : []
  if (prev && changes.length === 0) return
  if (how.format === 'json') return write(escapeJsonControls(JSON.stringify({...report, changes})) + '\n')
  if (!prev) return writeServiceReport(report, how, layout, write)
  const at = clockOf(new Date(report.time))
  const lines = renderChangeLines(printableDocument(changes), at, printableDocument(report.service), layout.chalk)
  if (how.walks) lines.push(...changedWalks(printableDocument(report), changes, how.walks, layout))
  write(lines.join('\n') + '\n')
}

/** The walks of the paths whose state changed, as `--explain-format` shows walks. */
function changedWalks(r: Report, changes: WatchChange[], walks: 'text' | 'tree', {chalk, width}: Layout): string[] {
  const key = (node: string | null, entry: string | null) => `${node}\u0000${entry}`
  const changed = new Set(changes.filter((ch) => ch.kind === 'path').map((ch) => key(ch.node, ch.entry)))
  if (changed.size === 0) return []
  const only: Report = {
    ...r,
    paths: r.paths.filter((p) => changed.has(key(p.node, p.entry))),
    nodes: r.nodes.filter((n) => changes.some((ch) => ch.kind === 'path' && ch.node === n.name)),
  }
  return walks === 'tree' ? renderExplainTree(only, chalk, width) : renderWalks(only, chalk, width)
}
