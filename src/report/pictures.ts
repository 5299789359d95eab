import {renderHtml} from './html.js'
import {renderMermaid} from './mermaid.js'
import {pathGraphs, type NodeGraph} from './path-graph.js'
import {printableDocument} from './printable.js'
import type {Report} from './report.js'

/**
 * The picture formats of Service reports, from one path graph per node (path-graph.ts): `-o mermaid` (one Service)
 * and `-o html` (one or a scan's many). Loaded by output.ts only when one is asked for. The reports are made printable
 * first (no control or line break reaches a label); each renderer escapes for its own language.
 */

function graphed(r: Report): {report: Report; graphs: NodeGraph[]} {
  const report = printableDocument(r)
  return {report, graphs: pathGraphs(report)}
}

export function mermaidOf(r: Report): string {
  const {report, graphs} = graphed(r)
  return renderMermaid(graphs, report.summary)
}

export function htmlOf(reports: Report[], page: {title: string; summary: string | null}): string {
  return renderHtml({...printableDocument(page), services: reports.map(graphed)})
}
