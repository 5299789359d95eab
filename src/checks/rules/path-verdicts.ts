import type {Check} from '../check.js'
import type {PathResult} from '../../model/paths.js'
import {codeEntry} from '../catalogue.js'
import {explainsBreak} from '../break-explained.js'

/** The node where a path breaks: its own, or the node of the endpoint whose half breaks. */
const at = (p: PathResult) => p.breaksOn ?? p.node
/** "node-a's " when the path comes from another node than the one it breaks on. */
const from = (p: PathResult) => (at(p) === p.node ? '' : `${p.node}'s `)

/**
 * Runs last: a path that breaks where no other error finding of its node (or the cluster) explains it (the catalogue's
 * `explains`, on its conditions: a NetworkPolicy finding, the cluster's, explains only the drops the node's policy
 * engine makes as the API's policies say).
 */
export const pathBroken: Check = {
  meta: codeEntry('KPD-PATH-BROKEN'),
  run(ctx) {
    const seen = new Set<string>()
    return ctx.paths
      .filter((p) => p.ok === false && p.breaksAt !== null)
      .filter((p) => !ctx.findings.some((f) => explainsBreak(ctx, f, p)))
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
  run(ctx) {
    const undecided = ctx.paths.filter((p) => p.ok === null && p.breaksAt === 'unknown')
    const own = undecided
      .filter((p) => at(p) === p.node)
      .map((p) => ({node: p.node, message: `${p.node}: ${p.entry} (${p.port}): ${p.detail}`}))
    // Second halves the endpoint's node cannot decide: once per node and reason (one rule there undecides every half).
    const halves = new Map<string, PathResult[]>()
    for (const p of undecided.filter((x) => at(x) !== x.node)) {
      const why =
        p.remote
          .find((h) => h.node === at(p) && h.breaksAt === 'unknown')
          ?.detail.replace(/^.*?where the walk cannot tell: /, '') ?? p.detail
      const k = `${at(p)}\0${why}`
      halves.set(k, [...(halves.get(k) ?? []), p])
    }
    const remote = [...halves].map(([k, ps]) => ({
      node: at(ps[0]),
      message: `${at(ps[0])}: the second half of ${ps.map((p) => `${p.node}'s ${p.entry} (${p.port})`).join(', ')}, arriving DNATed, cannot be decided: ${k.split('\0')[1]}`,
    }))
    return [...own, ...remote]
  },
}
