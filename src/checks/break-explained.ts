import type {CheckContext, Finding} from './check.js'
import type {PathResult} from '../model/paths.js'
import type {Step} from '../model/steps.js'
import type {TraceOutcome} from '../trace/types.js'
import {codeEntry, explainedStep, type BreakCondition} from './catalogue.js'
import {policyDropsAgree} from './rules/policy-dataplane.js'

/**
 * Where a walk breaks: the step, the node it breaks on, and the walk's outcomes on that node (read only by a condition,
 * so asked for only then). A path's break (pathBreak), one of its second halves', a DNS question's arrival.
 */
export interface WalkBreak {
  step: Step | null
  node: string
  outcomes: () => TraceOutcome[]
}

/** What each condition of the catalogue's `explains` asks of a broken walk. */
const CONDITIONS: Record<BreakCondition, (ctx: CheckContext, at: WalkBreak) => boolean> = {
  'policy-drops-agree': (ctx, at) => policyDropsAgree(ctx, at.node, at.outcomes()),
}

/** Where path `p` breaks: on its own node (its walk there), or on an endpoint's node (its second halves there). */
function pathBreak(ctx: CheckContext, p: PathResult): WalkBreak {
  const node = p.breaksOn ?? p.node
  return {
    step: p.breaksAt,
    node,
    outcomes: () =>
      node === p.node
        ? p.trace.outcomes
        : ctx.halves.filter((h) => h.path === p && h.node === node).flatMap((h) => h.trace.outcomes),
  }
}

/**
 * Whether finding `f` explains where a path (or another walk) breaks: an error of the node the walk breaks on (or of
 * the cluster) whose catalogue row explains the step, on its condition where it has one. KPD-PATH-BROKEN stays quiet
 * for such a path, and when an ignore rule silences `f`, the path's break is the one it silenced (never a break nobody
 * reports); a symptom (a failed probe, an unanswered DNS question) is evidence on `f`.
 */
export function explainsBreak(ctx: CheckContext, f: Finding, where: PathResult | WalkBreak): boolean {
  const at = 'trace' in where ? pathBreak(ctx, where) : where
  if (f.severity !== 'error' || at.step === null) return false
  if (f.node !== null && f.node !== at.node) return false
  return codeEntry(f.code).explains.some(
    (x) => explainedStep(x) === at.step && (typeof x === 'string' || CONDITIONS[x.when](ctx, at)),
  )
}
