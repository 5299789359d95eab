import type {GraphNode, GraphState, NodeGraph} from './path-graph.js'

/**
 * `-o mermaid`: the path graphs as one Mermaid flowchart (GitHub and most wikis render it), a subgraph per node and a
 * row per path. Every label is written between quotes with each character outside a small safe set as Mermaid's
 * numeric entity (`#60;` for `<`): a name holding `"]-->`, `<script>` or `%%` stays text, and Mermaid shows it as
 * an HTML entity, never markup. The graphs' strings are already printable (no line breaks or controls).
 */

const SAFE = /[A-Za-z0-9 .,:/_()+→✓✗…-]/u

/** A label's text with every other character as a Mermaid entity code. */
function mermaidText(text: string): string {
  let out = ''
  for (const c of text) out += SAFE.test(c) ? c : `#${c.codePointAt(0)};`
  return out
}

/** Probe and kernel lines shown in a node's evidence box. */
const MAX_EVIDENCE = 12

/** Labels longer than this are cut in the picture (the JSON and HTML keep them whole). */
const MAX_LABEL = 160

function cut(text: string): string {
  const chars = [...text]
  return chars.length <= MAX_LABEL ? text : `${chars.slice(0, MAX_LABEL - 1).join('')}…`
}

const STATE_MARK: Record<GraphState, string> = {ok: '✓', broken: '✗', unknown: '?', ignored: '(ignored)'}

function label(n: GraphNode): string {
  const lines = [`${n.state === 'ok' ? '' : `${STATE_MARK[n.state]} `}${n.label}`]
  if (n.sublabel) lines.push(n.sublabel)
  if (n.reason) lines.push(cut(n.reason))
  if (n.finding) lines.push(n.finding.code)
  return lines.map((l) => mermaidText(l)).join('<br>')
}

const SHAPE: Record<GraphNode['kind'], [string, string]> = {
  entry: ['([', '])'],
  step: ['[', ']'],
  split: ['{{', '}}'],
  'endpoint-node': ['[', ']'],
  'local-endpoints': ['[', ']'],
  pod: ['[(', ')]'],
}

const CLASSES = [
  'classDef broken fill:#fde8e8,stroke:#b3261e,stroke-width:3px,color:#410e0b',
  'classDef unknown fill:#fff8e1,stroke:#8a6d00,stroke-dasharray:4 3,color:#3d3000',
  'classDef ignored fill:#eeeeee,stroke:#616161,stroke-dasharray:4 3,color:#212121',
  'classDef ok fill:#e8f5e9,stroke:#2e7d32,color:#0d2a10',
  'classDef evidence fill:#f5f7fa,stroke:#546e7a,color:#1c2830,text-align:left',
]

/** The Mermaid flowchart of every node's paths. */
export function renderMermaid(graphs: NodeGraph[], title: string): string {
  const out = ['---', `title: "${mermaidText(cut(title))}"`, '---', 'flowchart LR']
  const classed: Record<GraphState | 'evidence', string[]> = {
    ok: [],
    broken: [],
    unknown: [],
    ignored: [],
    evidence: [],
  }
  graphs.forEach((g, gi) => {
    const head = `node ${g.node}${g.mode ? ` (${g.mode})` : ''}${g.reachable ? '' : `: not read: ${g.error ?? ''}`}`
    out.push(`  subgraph G${gi}["${mermaidText(cut(head))}"]`, '    direction LR')
    if (g.nodes.length === 0) out.push(`    G${gi}E["${mermaidText(g.reachable ? 'no path traced' : 'not read')}"]`)
    for (const n of g.nodes) {
      const [open, close] = SHAPE[n.kind]
      out.push(`    G${gi}${n.id}${open}"${label(n)}"${close}`)
      classed[n.state].push(`G${gi}${n.id}`)
    }
    for (const e of g.edges) {
      const arrow = e.state === 'ok' ? '-->' : '-.->'
      out.push(`    G${gi}${e.from} ${arrow}${e.label ? `|"${mermaidText(e.label)}"|` : ''} G${gi}${e.to}`)
    }
    const evidence = [...g.probes, ...g.kernel]
    if (evidence.length > 0) {
      const shown = evidence.slice(0, MAX_EVIDENCE).map((l) => mermaidText(cut(l)))
      if (evidence.length > MAX_EVIDENCE)
        shown.push(mermaidText(`… ${evidence.length - MAX_EVIDENCE} more (in -o json)`))
      out.push(`    G${gi}EV["${shown.join('<br>')}"]`)
      classed.evidence.push(`G${gi}EV`)
    }
    out.push('  end')
  })
  out.push(...CLASSES.map((c) => `  ${c}`))
  for (const [state, ids] of Object.entries(classed)) if (ids.length) out.push(`  class ${ids.join(',')} ${state}`)
  return out.join('\n') + '\n'
}
