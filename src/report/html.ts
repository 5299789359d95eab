import type {Finding} from '../checks/check.js'
import {esc} from './html-text.js'
import type {GraphNode, GraphState, NodeGraph} from './path-graph.js'
import {pathSvg} from './path-svg.js'
import type {Report} from './report.js'

/**
 * `-o html`: one self-contained page (inline CSS and SVG, no script, no external address) of one or more Service
 * reports: the headline, the node × entry-point grid, and per node the packet paths drawn from the path graph
 * (path-svg.ts) with the breaking step's reason, evidence and fix beside it, the probes and kernel evidence, and the
 * findings with their codes linked to docs/checks.md. Every string from the cluster or a node is escaped here (`esc`).
 */

/** The catalogue of codes and the step table, relative to the repository (the page carries no external address). */
const CODES_DOC = 'docs/checks.md#finding-codes'
const STEPS_DOC = 'docs/checks.md#steps-breaksat'

const CSS = `
:root{color-scheme:light;--ok:#1b5e20;--bad:#b3261e;--unk:#6d5400;--ign:#424242;--fg:#1a1a1a;--muted:#4a4a4a}
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:#fff;margin:0;padding:16px;max-width:1280px;margin-inline:auto}
h1{font-size:1.35rem;margin:.2em 0 .4em}h2{font-size:1.15rem;margin:1.6em 0 .5em;border-bottom:1px solid #ccc}h3{font-size:1rem;margin:1em 0 .3em}
.headline{font-size:1.05rem;padding:10px 12px;border-left:6px solid var(--ok);background:#eef6ee;overflow-wrap:anywhere}
.headline.bad{border-color:var(--bad);background:#fdeeee}.headline.unknown{border-color:var(--unk);background:#fff8e1}
.meta{color:var(--muted);font-size:.9rem}
table{border-collapse:collapse;margin:.5em 0;max-width:100%}
th,td{border:1px solid #bbb;padding:4px 8px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
th{background:#f0f0f0}
.scroll{overflow-x:auto;max-width:100%}
.ok{color:var(--ok)}.broken{color:var(--bad);font-weight:600}.unknown{color:var(--unk)}.ignored{color:var(--ign)}
figure{margin:.5em 0}
figure svg{display:block;max-width:none}
figcaption{font-size:.9rem;color:var(--muted)}
.break{border:2px solid var(--bad);border-radius:6px;padding:8px 12px;margin:.5em 0;background:#fff7f7}
.break.is-unknown{border-color:var(--unk);background:#fffbea}.break.is-ignored{border-color:var(--ign);background:#f6f6f6}
.break h3{margin:.2em 0}
code,pre{font-family:ui-monospace,"SFMono-Regular",Menlo,Consolas,monospace;font-size:.85rem}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f8fa;padding:6px 8px;margin:.3em 0}
ul{padding-left:1.3em}li{overflow-wrap:anywhere}
a{color:#0b57d0}
@media (max-width:600px){body{padding:8px;font-size:14px}th,td{padding:3px 4px}}
`

const MARK: Record<GraphState, string> = {ok: '✓', broken: '✗', unknown: '?', ignored: '✗ (ignored)'}

function codeLink(code: string): string {
  return `<a href="${esc(CODES_DOC)}" title="${esc(code)} in docs/checks.md"><code>${esc(code)}</code></a>`
}

function stepLink(step: string): string {
  return `<a href="${esc(STEPS_DOC)}">${esc(step)}</a>`
}

function findingBlock(f: Finding): string {
  const parts = [
    `<p>${codeLink(f.code)} <span class="${f.severity === 'error' ? 'broken' : ''}">${esc(f.severity)}</span>: ${esc(f.message)}</p>`,
  ]
  if (f.evidence.length) parts.push(`<ul>${f.evidence.map((e) => `<li><code>${esc(e)}</code></li>`).join('')}</ul>`)
  if (f.check) parts.push(`<p>check:</p><pre>${esc(f.check.command)}</pre>`)
  if (f.fix?.command)
    parts.push(`<p>fix (changes ${esc(f.fix.node ?? f.fix.changes)}):</p><pre>${esc(f.fix.command)}</pre>`)
  if (f.fix?.text) parts.push(`<p>fix: ${esc(f.fix.text)}</p>`)
  if (f.text) parts.push(`<p>hint: ${esc(f.text)}</p>`)
  return parts.join('\n')
}

/** The steps of a graph that are not ok, each with its reason and the finding that explains it. */
function breaks(g: NodeGraph): string {
  const lanesOf = (n: GraphNode) => g.lanes[n.lane]
  return g.nodes
    .filter((n) => n.state !== 'ok' && n.kind !== 'pod')
    .map((n) => {
      const lane = lanesOf(n)
      const where = n.kind === 'step' ? `breaks at ${stepLink(n.label)}` : `endpoint on ${esc(n.label)}`
      return `<div class="break is-${n.state}"><h3><span class="${n.state}">${esc(MARK[n.state])}</span> ${esc(lane.entry)} to ${esc(lane.destination)} (${esc(lane.port)}): ${where}${n.sublabel ? ` <small>(${esc(n.sublabel)})</small>` : ''}</h3>
<p>${esc(n.reason ?? '')}</p>
${n.finding ? findingBlock(n.finding) : ''}</div>`
    })
    .join('\n')
}

function grid(report: Report, graphs: NodeGraph[], prefix: string): string {
  const entries = [...new Set(report.paths.map((p) => `${p.entry}|${p.port}|${p.family}`))]
  if (entries.length === 0) return '<p>No path was traced.</p>'
  const twoFamilies = new Set(report.paths.map((p) => p.family)).size > 1
  const head = entries
    .map((e) => {
      const [entry, port, family] = e.split('|')
      return `<th scope="col">${esc(entry)} (${esc(port)}${twoFamilies ? `, ${esc(family)}` : ''})</th>`
    })
    .join('')
  const rows = graphs.map((g) => {
    const cells = entries.map((e) => {
      const p = report.paths.find((x) => x.node === g.node && `${x.entry}|${x.port}|${x.family}` === e)
      if (!p) return `<td>${g.reachable ? '–' : '<span class="unknown">not read</span>'}</td>`
      const state: GraphState = p.ignoredBy ? 'ignored' : p.ok === true ? 'ok' : p.ok === false ? 'broken' : 'unknown'
      const at = p.breaksAt
        ? ` ${esc(p.breaksAt)}${p.breaksOn && p.breaksOn !== p.node ? ` on ${esc(p.breaksOn)}` : ''}`
        : ''
      return `<td class="${state}">${esc(MARK[state])}${state === 'ok' ? ' works' : at}</td>`
    })
    return `<tr><th scope="row"><a href="#${esc(prefix)}node-${esc(anchor(g.node))}">${esc(g.node)}</a></th>${cells.join('')}</tr>`
  })
  return `<div class="scroll"><table><caption>Each node × entry point</caption><thead><tr><th scope="col">node</th>${head}</tr></thead><tbody>${rows.join('\n')}</tbody></table></div>`
}

/** An id fragment from a name: letters, digits and dashes only. */
function anchor(name: string): string {
  return name.replace(/[^A-Za-z0-9-]/g, (c) => `_${c.codePointAt(0)}`)
}

function nodeSection(g: NodeGraph, prefix: string): string {
  const parts = [
    `<section id="${esc(prefix)}node-${esc(anchor(g.node))}"><h2>Node ${esc(g.node)}${g.mode ? ` <small>(${esc(g.mode)})</small>` : ''}</h2>`,
  ]
  if (!g.reachable) parts.push(`<p class="unknown">Not read: ${esc(g.error ?? 'unknown reason')}</p>`)
  if (g.lanes.length > 0) parts.push(pathSvg(g, `${prefix}${anchor(g.node)}`))
  parts.push(breaks(g))
  if (g.probes.length) parts.push(`<h3>Live probes</h3><ul>${g.probes.map((p) => `<li>${esc(p)}</li>`).join('')}</ul>`)
  if (g.kernel.length)
    parts.push(`<h3>Kernel evidence (conntrack)</h3><ul>${g.kernel.map((k) => `<li>${esc(k)}</li>`).join('')}</ul>`)
  const others = g.findings.filter((f) => !g.nodes.some((n) => n.finding === f))
  if (others.length) parts.push(`<h3>Other findings on ${esc(g.node)}</h3>${others.map(findingBlock).join('\n')}`)
  parts.push('</section>')
  return parts.join('\n')
}

/** One Service's part of the page. */
function serviceSection(report: Report, graphs: NodeGraph[], prefix: string): string {
  const s = report.service
  const state = report.summary.startsWith('✓') ? '' : report.summary.startsWith('✗') ? ' bad' : ' unknown'
  const cluster = report.findings.filter((f) => f.node === null)
  const parts = [
    `<h1>${esc(s.namespace)}/${esc(s.name)} <small>(${esc(s.type)}${s.clusterIPs.length ? `, ${s.clusterIPs.map(esc).join(', ')}` : ''})</small></h1>`,
    `<p class="headline${state}" role="status">${esc(report.summary)}</p>`,
    `<p class="meta">proxy mode ${esc(report.proxy.mode)} (${esc(report.proxy.source)}); endpoints: ${report.endpoints.ready} ready, ${report.endpoints.notReady} not ready; ${esc(report.time)}${report.context ? `; context ${esc(report.context)}` : ''}</p>`,
    grid(report, graphs, prefix),
  ]
  if (cluster.length) parts.push(`<h2>Cluster findings</h2>${cluster.map(findingBlock).join('\n')}`)
  parts.push(...graphs.map((g) => nodeSection(g, prefix)))
  if (report.notChecked.length)
    parts.push(
      `<h2>Not checked</h2><ul>${report.notChecked.map((n) => `<li>${esc(n.node ?? 'every node')}: ${esc(n.check)}: ${esc(n.reason)}${n.required ? ' (required)' : ''}</li>`).join('')}</ul>`,
    )
  if (report.notes.length)
    parts.push(`<h2>Notes</h2><ul>${report.notes.map((n) => `<li>${esc(n)}</li>`).join('')}</ul>`)
  return parts.join('\n')
}

/** A page title a browser tab shows whole: at most 70 characters as written (html-validate's long-title counts entities). */
function shortTitle(title: string): string {
  if (esc(title).length <= 70) return esc(title)
  let out = ''
  for (const c of title) {
    if (out.length + esc(c).length > 69) break
    out += esc(c)
  }
  return `${out}…`
}

/** The page: a title, an optional scan headline, and one part per Service report with its graphs. */
export function renderHtml(page: {
  title: string
  summary: string | null
  services: Array<{report: Report; graphs: NodeGraph[]}>
}): string {
  const body = page.services.map((s, i) =>
    page.services.length > 1
      ? `<article id="svc-${i}">${serviceSection(s.report, s.graphs, `s${i}-`)}</article>`
      : serviceSection(s.report, s.graphs, ''),
  )
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${shortTitle(page.title)}</title>
<style>${CSS}</style>
</head>
<body>
<main>
${page.summary ? `<p class="headline${page.summary.startsWith('✓') ? '' : ' bad'}" role="status">${esc(page.summary)}</p>` : ''}
${body.join('\n<hr>\n')}
</main>
</body>
</html>
`
}
