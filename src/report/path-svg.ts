import {esc} from './html-text.js'
import type {GraphNode, GraphState, NodeGraph} from './path-graph.js'

/**
 * One node's path graph as inline SVG for `-o html`: layered columns (a node's column is its place along the path, its
 * row its place within the lane), boxes coloured by state, arrows with the endpoints' shares, the break's reason under
 * its box, and the node's probes and kernel evidence below the lanes. <title> and <desc> give the picture's text
 * alternative; every box has its own <title> with its whole text. Strings are escaped here as HTML text.
 */

const BOX_W = 178
const BOX_H = 58
const GAP_X = 36
const GAP_Y = 14
const LANE_GAP = 30
const PAD = 12
const LINE = 16
/** Characters that fit in a box's line at its font size; longer text is cut (the box's <title> has it whole). */
const FIT = 27
const FIT_NOTE = 150
const MAX_NOTES = 10

function fit(text: string, n: number): string {
  const chars = [...text]
  return chars.length <= n ? text : `${chars.slice(0, n - 1).join('')}…`
}

const FILL: Record<GraphState, string> = {ok: '#e8f5e9', broken: '#fde8e8', unknown: '#fff8e1', ignored: '#eeeeee'}
const STROKE: Record<GraphState, string> = {ok: '#2e7d32', broken: '#b3261e', unknown: '#8a6d00', ignored: '#616161'}
const INK: Record<GraphState, string> = {ok: '#0d2a10', broken: '#410e0b', unknown: '#3d3000', ignored: '#212121'}
const MARK: Record<GraphState, string> = {ok: '', broken: '✗ ', unknown: '? ', ignored: '✗ '}

interface Placed {
  n: GraphNode
  x: number
  y: number
}

/** Where each box goes: lanes one under the other, each as tall as its most crowded column. */
function layout(g: NodeGraph): {placed: Map<string, Placed>; width: number; height: number; laneTops: number[]} {
  const placed = new Map<string, Placed>()
  let top = PAD + LINE
  let columns = 0
  const laneTops: number[] = []
  g.lanes.forEach((_, lane) => {
    laneTops.push(top)
    const used = new Map<number, number>()
    let extra = 0
    const rowOf = new Map<string, number>()
    for (const n of g.nodes.filter((x) => x.lane === lane)) {
      // A Pod beside its endpoint's node; anything else below the last box of its column.
      const parent = n.kind === 'pod' ? g.edges.find((e) => e.to === n.id)?.from : undefined
      const row = (parent !== undefined ? rowOf.get(parent) : undefined) ?? used.get(n.column) ?? 0
      rowOf.set(n.id, row)
      used.set(n.column, Math.max(used.get(n.column) ?? 0, row + 1))
      columns = Math.max(columns, n.column + 1)
      placed.set(n.id, {n, x: PAD + n.column * (BOX_W + GAP_X), y: top + row * (BOX_H + GAP_Y)})
      if (n.reason && n.state !== 'ok' && n.kind === 'step') extra = LINE * 2
    }
    const rows = Math.max(1, ...used.values())
    top += rows * (BOX_H + GAP_Y) - GAP_Y + extra + LANE_GAP
  })
  return {placed, width: PAD * 2 + Math.max(1, columns) * (BOX_W + GAP_X) - GAP_X, height: top, laneTops}
}

function box(p: Placed): string {
  const {n, x, y} = p
  const s = n.state
  const whole = [n.label, n.sublabel, n.reason, n.finding?.code].filter(Boolean).join(': ')
  const shape =
    n.kind === 'entry' || n.kind === 'pod'
      ? `<rect x="${x}" y="${y}" width="${BOX_W}" height="${BOX_H}" rx="${BOX_H / 2}"`
      : n.kind === 'split'
        ? `<rect x="${x}" y="${y}" width="${BOX_W}" height="${BOX_H}" rx="4" stroke-dasharray="6 3"`
        : `<rect x="${x}" y="${y}" width="${BOX_W}" height="${BOX_H}" rx="4"`
  const lines = [
    `<text x="${x + BOX_W / 2}" y="${y + 22}" text-anchor="middle" font-weight="600" fill="${INK[s]}">${esc(fit(MARK[s] + n.label, FIT))}</text>`,
  ]
  if (n.sublabel)
    lines.push(
      `<text x="${x + BOX_W / 2}" y="${y + 40}" text-anchor="middle" font-size="11" fill="${INK[s]}">${esc(fit(n.sublabel, FIT))}</text>`,
    )
  const reason =
    n.reason && s !== 'ok' && n.kind === 'step'
      ? `<text x="${x}" y="${y + BOX_H + LINE}" font-size="12" fill="${STROKE[s]}">${esc(fit(`${n.finding ? `${n.finding.code}: ` : ''}${n.reason}`, FIT_NOTE))}</text>`
      : ''
  return `<g class="box ${s}"><title>${esc(whole)}</title>${shape} fill="${FILL[s]}" stroke="${STROKE[s]}" stroke-width="${s === 'broken' ? 3 : 1.5}"/>${lines.join('')}${reason}</g>`
}

function edge(from: Placed, to: Placed, label: string | null, state: GraphState, marker: string): string {
  const x1 = from.x + BOX_W
  const y1 = from.y + BOX_H / 2
  const x2 = to.x - 2
  const y2 = to.y + BOX_H / 2
  const mid = (x1 + x2) / 2
  const path = `<path d="M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}" fill="none" stroke="${STROKE[state]}" stroke-width="1.5"${state === 'ok' ? '' : ' stroke-dasharray="5 3"'} marker-end="url(#${marker})"/>`
  const text = label
    ? `<text x="${mid}" y="${(y1 + y2) / 2 - 4}" text-anchor="middle" font-size="11" fill="#1a1a1a">${esc(label)}</text>`
    : ''
  return path + text
}

/** The figure: the SVG with its title and description, and a caption. */
export function pathSvg(g: NodeGraph, id: string): string {
  const {placed, width, height: lanesHeight} = layout(g)
  const notes = [...g.probes, ...g.kernel]
  const shownNotes = notes.slice(0, MAX_NOTES)
  if (notes.length > MAX_NOTES) shownNotes.push(`… ${notes.length - MAX_NOTES} more below`)
  const height = lanesHeight + (shownNotes.length ? shownNotes.length * LINE + LINE : 0)
  const marker = `arrow-${id}`
  const broken = g.nodes.filter((n) => n.state === 'broken')
  const title = `Packet paths on node ${g.node}`
  const desc =
    g.lanes
      .map(
        (l) =>
          `${l.entry} to ${l.destination} (${l.port}): ${l.state === 'ok' ? 'works' : `${l.state}${l.breaksAt ? ` at ${l.breaksAt}` : ''}${l.breaksOn && l.breaksOn !== g.node ? ` on ${l.breaksOn}` : ''}`}`,
      )
      .join('; ') + (broken.length ? `. Broken: ${broken.map((n) => `${n.label} (${n.reason ?? ''})`).join('; ')}` : '')
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-labelledby="${id}-t ${id}-d" font-family="system-ui,sans-serif" font-size="13">`,
    `<title id="${id}-t">${esc(title)}</title><desc id="${id}-d">${esc(desc)}</desc>`,
    `<defs><marker id="${marker}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#37474f"/></marker></defs>`,
  ]
  for (const e of g.edges) {
    const from = placed.get(e.from)
    const to = placed.get(e.to)
    if (from && to) parts.push(edge(from, to, e.label, e.state, marker))
  }
  for (const p of placed.values()) parts.push(box(p))
  shownNotes.forEach((line, i) =>
    parts.push(
      `<text x="${PAD}" y="${lanesHeight + i * LINE + 4}" font-size="12" fill="#263238">${esc(fit(line, FIT_NOTE))}</text>`,
    ),
  )
  parts.push('</svg>')
  return `<figure class="scroll">${parts.join('\n')}<figcaption>${esc(title)}, a lane per entry point (what breaks is listed below)</figcaption></figure>`
}
