import type {CheckContext, Finding} from './check.js'
import type {PathResult} from '../model/paths.js'
import {codeEntry, explainedStep, type BreakCondition} from './catalogue.js'
import {policyDropsAgree} from './rules/policy-dataplane.js'

/** What each condition of the catalogue's `explains` asks of a broken path. */
const CONDITIONS: Record<BreakCondition, (ctx: CheckContext, p: PathResult) => boolean> = {
  'policy-drops-agree': policyDropsAgree,
}

/**
 * Whether finding `f` explains where path `p` breaks: an error of the node the path breaks on (or of the cluster) whose
 * catalogue row explains the step, on its condition where it has one. KPD-PATH-BROKEN stays quiet for such a path, and
 * when an ignore rule silences `f`, the path's break is the one it silenced (never a break nobody reports).
 */
export function explainsBreak(ctx: CheckContext, f: Finding, p: PathResult): boolean {
  if (f.severity !== 'error' || p.breaksAt === null) return false
  if (f.node !== null && f.node !== (p.breaksOn ?? p.node)) return false
  return codeEntry(f.code).explains.some(
    (x) => explainedStep(x) === p.breaksAt && (typeof x === 'string' || CONDITIONS[x.when](ctx, p)),
  )
}
