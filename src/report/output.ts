import type {ChalkInstance} from 'chalk'
import type {NodeReadVia} from '../diagnosis/choose-transport.js'
import type {TraceResult} from '../trace/types.js'
import {writeDocument} from './document.js'
import {renderHeadline, renderHuman} from './human.js'
import {renderJunit} from './junit.js'
import {printableDocument} from './printable.js'
import {renderReadVia} from './read-via.js'
import type {FailOn, Report} from './report.js'
import {renderScanHuman} from './scan-human.js'
import {writeScanJson, type ScanSummary} from './scan-report.js'
import {renderTraceSummary, renderWalk} from './trace-walk.js'
import {wrapProse} from './width.js'

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

/** `svc`: the report as a table (or only its headline with -q), JSON or YAML; the table ends with how each node was read. */
export function writeServiceReport(
  report: Report,
  how: {format: 'table' | 'json' | 'yaml'; quiet: boolean; readVia?: Map<string, NodeReadVia>; order: string[]},
  layout: Layout,
  write: Write,
): void {
  if (how.format !== 'table') return writeDocument(report, how.format, write)
  const r = printableDocument(report)
  const {chalk: c, width} = layout
  if (how.quiet) return write(wrapProse(renderHeadline(r, c), width, '', '  ').join('\n') + '\n')
  write(renderHuman(r, c, width) + '\n')
  if (how.readVia)
    write(
      '\n' + renderReadVia(printableDocument(how.readVia), printableDocument([...new Set(how.order)]), width) + '\n',
    )
}

/** `scan`: the table, JSON (written Service by Service) or JUnit XML. */
export function writeScanReport(
  summary: ScanSummary,
  format: 'table' | 'json' | 'junit',
  failOn: FailOn,
  layout: Layout,
  write: Write,
): void {
  if (format === 'json') return writeScanJson(summary, write)
  const r = printableDocument(summary)
  write(format === 'junit' ? renderJunit(r, failOn) : renderScanHuman(r, layout.chalk, layout.width) + '\n')
}

/** `trace`: the walk and its verdict after what the paste normaliser assumed, or JSON. */
export function writeTrace(
  trace: TraceResult & {notes: string[]},
  format: 'table' | 'json',
  layout: Layout,
  write: Write,
): void {
  if (format === 'json') return writeDocument(trace, 'json', write)
  const t = printableDocument(trace)
  const {chalk: c, width} = layout
  const assumed = t.notes.flatMap((n) => wrapProse(`note: ${n}`, width, '', '  ')).join('\n')
  write(
    `${assumed}${assumed ? '\n\n' : ''}${renderWalk(t, c, width).join('\n')}\n\n${renderTraceSummary(t, c, width)}\n`,
  )
}
