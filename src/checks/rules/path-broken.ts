import type {Check} from '../check.js'
import {STEP_CODES} from '../../model/paths.js'

/** Runs last: a path that breaks where no other error finding of its node (or the cluster) explains it. */
export const pathBroken: Check = {
  meta: {
    code: 'KPD-PATH-BROKEN',
    severity: 'error',
    title: 'The packet path breaks at a rule no other finding explains (often a CNI, firewall or NetworkPolicy rule)',
    hint: 'Read the rule named in the evidence; `kproxy-doctor svc … --explain` or `kproxy-doctor trace` shows the whole walk.',
  },
  run(ctx) {
    const seen = new Set<string>()
    return ctx.paths
      .filter((p) => p.ok === false && p.breaksAt !== null)
      .filter((p) => {
        const explaining = STEP_CODES[p.breaksAt!]
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
  meta: {
    code: 'KPD-PATH-UNDECIDED',
    severity: 'warning',
    title: 'A rule on the path could not be evaluated',
    hint: 'The tracer never guesses: read the rule named and decide by hand; report it so the tracer learns it.',
  },
  run: (ctx) => ctx.paths.filter((p) => p.ok === null && p.breaksAt === 'unknown').map((p) => ({node: p.node, message: `${p.node}: ${p.entry} (${p.port}): ${p.detail}`})),
}
