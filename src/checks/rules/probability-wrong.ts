import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand} from '../../model/reach.js'
import {restartKubeProxy} from './kube-proxy-pod.js'
import {endpointChains} from '../../model/dataplane.js'

// kube-proxy writes %0.10f and iptables-save prints 11 decimals: compare with a tolerance.
const TOLERANCE = 1e-5

export const probabilityWrong: Check = {
  meta: codeEntry('KPD-PROBABILITY-WRONG'),
  run(ctx) {
    const out: FindingDraft[] = []
    for (const n of ctx.nodes) {
      for (const p of n.programmed) {
        for (const {chain, endpoints: eps} of endpointChains(p)) {
          if (eps.some((e) => e.weight !== undefined)) continue
          eps.forEach((e, i) => {
            const want = i === eps.length - 1 ? 1 : 1 / (eps.length - i)
            if (Math.abs(e.probability - want) > TOLERANCE)
              out.push({
                node: n.name,
                message: `${n.name}: rule ${i + 1} of ${eps.length} in ${chain} has probability ${e.probability.toFixed(5)}, expected ${want.toFixed(5)} (1/${eps.length - i})`,
                evidence: [`${e.jump.table} line ${e.jump.line}: ${e.jump.text}`],
                check: nodeCommand(ctx.reach, n.name, n.dataplane.show(chain), chain.split(' ')),
                fix: restartKubeProxy(ctx, n.name),
              })
          })
        }
      }
    }
    return out
  },
}
