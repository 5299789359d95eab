import type {Finding} from '../checks/check.js'
import {codesExplaining} from '../checks/catalogue.js'
import {PROXY_MODE_NAMES, proxyMode, type ProxyMode} from '../model/modes/index.js'
import type {Step} from '../model/steps.js'
import {ENTRIES, stepsCrossedBy, type Entry} from '../model/paths.js'
import type {Report} from './report.js'

/**
 * The packet paths of one Service report as a graph per node, the one model the pictures are drawn from (`-o mermaid`,
 * `-o html`): each path is a lane, entry point → the steps it crosses (words of no mode, labelled with the node's mode's
 * own chain or map names) → the endpoint split with each endpoint's share → the endpoints' nodes → their Pods. Built
 * from the report document alone, so a picture says nothing the JSON does not.
 */

/** ok: passed; broken: the path breaks here; unknown: not decided or not followed; ignored: a break an ignore rule silenced. */
export type GraphState = 'ok' | 'broken' | 'unknown' | 'ignored'

export interface GraphNode {
  /** Unique within the node's graph, made of letters and digits only (a Mermaid id as it is). */
  id: string
  kind: 'entry' | 'step' | 'split' | 'endpoint-node' | 'local-endpoints' | 'pod'
  label: string
  /** The mode's name of a step (its chain, map or set), an endpoint's address, a destination; or null. */
  sublabel: string | null
  state: GraphState
  /** Why it is broken, unknown or ignored (the report's detail); null when ok. */
  reason: string | null
  /** The finding that explains a break here, with its check, fix and evidence; null elsewhere. */
  finding: Finding | null
  /** Which lane (path) and layer (left to right) it is drawn in. */
  lane: number
  column: number
}

interface GraphEdge {
  from: string
  to: string
  /** An endpoint's share of new connections ("50%"), else null. */
  label: string | null
  state: GraphState
}

interface GraphLane {
  entry: string
  port: string
  destination: string
  state: GraphState
  /** The step where the lane breaks (a step of model/steps.ts or unknown), and on which node. */
  breaksAt: string | null
  breaksOn: string | null
  detail: string
}

export interface NodeGraph {
  node: string
  mode: string | null
  reachable: boolean
  error: string | null
  lanes: GraphLane[]
  nodes: GraphNode[]
  edges: GraphEdge[]
  /** The live probes made from this node, one line each. */
  probes: string[]
  /** What the kernel's conntrack entries said of the probed addresses, one line each. */
  kernel: string[]
  /** The findings on this node (the node's own, in the report's order). */
  findings: Finding[]
}

/** A share as a percentage with at most one decimal. */
function percent(share: number): string {
  return `${Math.round(share * 1000) / 10}%`
}

/** The mode's own name for a step (its chain, map or set), when the node's mode is known and names it. */
function stepName(mode: string | null, step: string): string | null {
  if (!mode || !(PROXY_MODE_NAMES as readonly string[]).includes(mode)) return null
  const names = proxyMode(mode as ProxyMode).vocabulary.steps as Record<string, string>
  return names[step] ?? null
}

/** The finding that explains a break at `step` on `node`: one whose code explains the step, else the node's first error. */
export function explaining(report: Report, node: string, step: string): Finding | null {
  const codes = codesExplaining(step as Step)
  const on = report.findings.filter((f) => f.node === node)
  return on.find((f) => codes.includes(f.code)) ?? on.find((f) => f.severity === 'error') ?? on.find(() => true) ?? null
}

type Path = Report['paths'][number]

function laneState(p: Path): GraphState {
  if (p.ignoredBy) return 'ignored'
  return p.ok === true ? 'ok' : p.ok === false ? 'broken' : 'unknown'
}

/** One path as a lane of nodes and edges. */
function addLane(report: Report, g: NodeGraph, p: Path, lane: number): void {
  const state = laneState(p)
  const local = p.breaksOn === null || p.breaksOn === p.node
  const steps = stepsCrossedBy((ENTRIES as string[]).includes(p.entry) ? (p.entry as Entry) : 'pod→ClusterIP')
  const at = p.breaksAt
  // Where the lane stops on this node: at its break, or after its last step.
  const breaksHere = state !== 'ok' && local && at !== null
  const crossed: string[] = breaksHere
    ? steps.includes(at as Step)
      ? steps.slice(0, steps.indexOf(at as Step) + 1)
      : [at]
    : steps
  const id = (n: number) => `L${lane}N${n}`
  let n = 0
  const push = (node: Omit<GraphNode, 'id' | 'lane'>, from: string | null, label: string | null = null): string => {
    const nodeId = id(n++)
    g.nodes.push({...node, id: nodeId, lane})
    if (from) g.edges.push({from, to: nodeId, label, state: node.state === 'ok' ? 'ok' : node.state})
    return nodeId
  }
  g.lanes.push({
    entry: p.entry,
    port: p.port,
    destination: p.destination,
    state,
    breaksAt: p.breaksAt,
    breaksOn: p.breaksOn,
    detail: p.detail,
  })
  let last = push(
    {
      kind: 'entry',
      label: p.entry,
      sublabel: `${p.destination} (${p.port})`,
      state: 'ok',
      reason: null,
      finding: null,
      column: 0,
    },
    null,
  )
  crossed.forEach((step, i) => {
    const isBreak = breaksHere && i === crossed.length - 1
    last = push(
      {
        kind: 'step',
        label: step,
        sublabel: stepName(g.mode, step),
        state: isBreak ? state : 'ok',
        reason: isBreak ? (state === 'ignored' ? `ignored (${p.ignoredBy}): ${p.detail}` : p.detail) : null,
        finding: isBreak && state === 'broken' ? explaining(report, p.node, step) : null,
        column: i + 1,
      },
      last,
    )
  })
  // A break here that still sends some connections on (a share of the endpoints) goes on to the endpoints it reached.
  if (breaksHere && p.remote.length === 0) return
  // Past this node's steps: the endpoints, by share.
  const column = crossed.length + 1
  const split = push(
    {
      kind: 'split',
      label: 'endpoint split',
      sublabel: null,
      state: 'ok',
      reason: null,
      finding: null,
      column,
    },
    last,
  )
  const remoteShare = p.remote.reduce((sum, h) => sum + h.share, 0)
  if (p.remote.length === 0 || remoteShare < 0.999)
    push(
      {
        kind: 'local-endpoints',
        label: p.node,
        sublabel: p.remote.length === 0 ? 'endpoints on this node' : 'the endpoints on this node',
        state: 'ok',
        reason: null,
        finding: null,
        column: column + 1,
      },
      split,
      p.remote.length === 0 ? null : percent(Math.max(0, 1 - remoteShare)),
    )
  for (const h of p.remote) {
    const halfState: GraphState =
      !h.followed || h.ok === null ? 'unknown' : h.ok ? 'ok' : state === 'ignored' ? 'ignored' : 'broken'
    const half = push(
      {
        kind: 'endpoint-node',
        label: h.node,
        sublabel: h.breaksAt ? `${h.endpoint}, breaks at ${h.breaksAt}` : h.endpoint,
        state: halfState,
        reason: halfState === 'ok' ? null : h.detail,
        finding: halfState === 'broken' ? explaining(report, h.node, h.breaksAt ?? 'unknown') : null,
        column: column + 1,
      },
      split,
      percent(h.share),
    )
    push(
      {
        kind: 'pod',
        label: h.pod ?? 'a Pod not named',
        sublabel: h.endpoint,
        state: halfState === 'ok' ? 'ok' : 'unknown',
        reason: null,
        finding: null,
        column: column + 2,
      },
      half,
    )
  }
}

function probeLines(report: Report, node: string): string[] {
  const of = report.probes.nodes.find((n) => n.node === node)
  if (!report.probes.ran) return report.probes.note ? [`no live probe: ${report.probes.note}`] : []
  if (!of) return []
  if (of.error) return [`no live probe: ${of.error}`]
  return of.targets.map((t) => {
    const what = `probe ${t.kind} ${t.address}${t.pod ? ` (${t.pod}${t.podNode ? ` on ${t.podNode}` : ''})` : ''}`
    if (t.notProbed) return `${what}: not probed: ${t.notProbed}`
    const failed = [
      t.refused ? `${t.refused} refused` : '',
      t.timedOut ? `${t.timedOut} timed out` : '',
      t.unreachable ? `${t.unreachable} unreachable` : '',
    ].filter(Boolean)
    return `${what}: ${t.connected}/${t.attempts} connected${failed.length ? `, ${failed.join(', ')}` : ''}`
  })
}

/** One graph per node of the report, in the report's order of nodes. */
export function pathGraphs(report: Report): NodeGraph[] {
  return report.nodes.map((n) => {
    const g: NodeGraph = {
      node: n.name,
      mode: n.mode,
      reachable: n.reachable,
      error: n.error,
      lanes: [],
      nodes: [],
      edges: [],
      probes: probeLines(report, n.name),
      kernel: report.kernelTrace
        .filter((k) => k.node === n.name)
        .map((k) => `conntrack, ${k.entry} ${k.target} (${k.port}): ${k.detail}`),
      findings: report.findings.filter((f) => f.node === n.name),
    }
    report.paths.filter((p) => p.node === n.name).forEach((p) => addLane(report, g, p, g.lanes.length))
    return g
  })
}
