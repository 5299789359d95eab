import type {ChalkInstance} from 'chalk'
import type {TraceOutcome, TraceResult, TraceStep} from '../trace/types.js'

interface Node {
  step?: TraceStep
  children: Node[]
  outcomes: TraceOutcome[]
}

const key = (s: TraceStep) => `${s.table}\0${s.chain}\0${s.line}`

/** The walk as a tree: outcomes that share their first rules share those lines; each branch ends in its verdict. */
export function renderTraceTree(t: TraceResult, c: ChalkInstance): string {
  const root: Node = {children: [], outcomes: []}
  for (const o of t.outcomes) {
    let node = root
    for (const s of o.steps) {
      let next = node.children.find((ch) => ch.step && key(ch.step) === key(s))
      if (!next) {
        next = {step: s, children: [], outcomes: []}
        node.children.push(next)
      }
      node = next
    }
    node.outcomes.push(o)
  }
  const lines: string[] = []
  const walk = (n: Node, prefix: string) => {
    const items: Array<Node | TraceOutcome> = [...n.children, ...n.outcomes]
    items.forEach((item, i) => {
      const last = i === items.length - 1
      const branch = prefix + (last ? '└─ ' : '├─ ')
      const deeper = prefix + (last ? '   ' : '│  ')
      if ('verdict' in item) lines.push(branch + outcomeLine(item, c))
      else {
        const s = item.step!
        lines.push(`${branch}${c.bold(`${s.table}/${s.chain}`)} ${c.dim(`line ${s.line}:`)} ${s.rule}`)
        walk(item, deeper)
      }
    })
  }
  walk(root, '')
  return lines.join('\n')
}

function outcomeLine(o: TraceOutcome, c: ChalkInstance): string {
  const share = `${Math.round(o.probability * 10000) / 100}%`
  const color = o.verdict === 'DNAT' || o.verdict === 'ACCEPT' ? c.green : o.verdict === 'UNKNOWN' ? c.yellow : c.red
  return `${color(o.verdict)}${o.destination ? ` → ${o.destination}` : ''}${o.masquerade ? ' (masqueraded)' : ''} ${c.dim(share)}${o.sticky ? c.dim(' (session affinity: later packets from this client stick)') : ''}${o.policy ? ' ' + c.red(`(the policy of ${o.policy.table}/${o.policy.chain})`) : ''}${o.reason ? ' ' + c.yellow(o.reason) : ''}`
}

export function renderTraceSummary(t: TraceResult, c: ChalkInstance): string {
  const lines = t.outcomes.map((o) => `  ${outcomeLine(o, c)}`)
  lines.unshift(c.bold(`verdict ${t.verdict}${t.destinations.length ? `: ${t.destinations.join(', ')}` : ''}${t.masquerade ? ' (masquerade)' : ''}`))
  return lines.join('\n')
}
