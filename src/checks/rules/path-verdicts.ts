import type {Check} from '../check.js'
import type {PathResult} from '../../model/paths.js'
import {codeEntry, codesExplaining} from '../catalogue.js'

/** The node where a path breaks: its own, or the node of the endpoint whose half breaks. */
const at = (p: PathResult) => p.breaksOn ?? p.node
/** "node-a's " when the path comes from another node than the one it breaks on. */
const from = (p: PathResult) => (at(p) === p.node ? '' : `${p.node}'s `)

/** Runs last: a path that breaks where no other error finding of its node (or the cluster) explains it. */
export const pathBroken: Check = {
  meta: codeEntry('KPD-PATH-BROKEN'),
  run(ctx) {
    const seen = new Set<string>()
    return ctx.paths
      .filter((p) => p.ok === false && p.breaksAt !== null)
      .filter((p) => {
        const explaining = codesExplaining(p.breaksAt!)
        return !ctx.findings.some((f) => f.severity === 'error' && (f.node === at(p) || f.node === null) && explaining.includes(f.code))
      })
      .filter((p) => !seen.has(`${at(p)} ${p.breaksAt}`) && !!seen.add(`${at(p)} ${p.breaksAt}`))
      .map((p) => {
        const last = at(p) === p.node ? p.trace.outcomes.find((o) => o.verdict !== 'DNAT')?.steps.at(-1) : undefined
        return {
          node: at(p),
          message: `${at(p)}: ${from(p)}${p.entry} (${p.port}) breaks at ${p.breaksAt}: ${p.detail}`,
          evidence: last ? [`${last.table} ${last.chain} line ${last.line}: ${last.rule}`] : [],
        }
      })
  },
}

export const pathUndecided: Check = {
  meta: codeEntry('KPD-PATH-UNDECIDED'),
  run: (ctx) => ctx.paths.filter((p) => p.ok === null && p.breaksAt === 'unknown').map((p) => ({node: at(p), message: `${at(p)}: ${from(p)}${p.entry} (${p.port}): ${p.detail}`})),
}
