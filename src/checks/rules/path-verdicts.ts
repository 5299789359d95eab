import type {Check} from '../check.js'
import {codeEntry, codesExplaining} from '../catalogue.js'

/** Runs last: a path that breaks where no other error finding of its node (or the cluster) explains it. */
export const pathBroken: Check = {
  meta: codeEntry('KPD-PATH-BROKEN'),
  run(ctx) {
    const seen = new Set<string>()
    return ctx.paths
      .filter((p) => p.ok === false && p.breaksAt !== null)
      .filter((p) => {
        const explaining = codesExplaining(p.breaksAt!)
        return !ctx.findings.some((f) => f.severity === 'error' && (f.node === p.node || f.node === null) && explaining.includes(f.code))
      })
      .filter((p) => !seen.has(`${p.node} ${p.breaksAt}`) && !!seen.add(`${p.node} ${p.breaksAt}`))
      .map((p) => {
        const last = p.trace.outcomes.find((o) => o.verdict !== 'DNAT')?.steps.at(-1)
        return {
          node: p.node,
          message: `${p.node}: ${p.entry} (${p.port}) breaks at ${p.breaksAt}: ${p.detail}`,
          evidence: last ? [`${last.table} ${last.chain} line ${last.line}: ${last.rule}`] : [],
        }
      })
  },
}

export const pathUndecided: Check = {
  meta: codeEntry('KPD-PATH-UNDECIDED'),
  run: (ctx) => ctx.paths.filter((p) => p.ok === null && p.breaksAt === 'unknown').map((p) => ({node: p.node, message: `${p.node}: ${p.entry} (${p.port}): ${p.detail}`})),
}
