import {programmedViews, type Check, type FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand} from '../../model/reach.js'
import {restartServiceProxy} from './kube-proxy-pod.js'
import {endpointChains} from '../../model/dataplane.js'

export const endpointMissing: Check = {
  meta: codeEntry('KPD-SEP-MISSING'),
  run(ctx) {
    const out: FindingDraft[] = []
    for (const n of programmedViews(ctx)) {
      for (const p of n.programmed) {
        for (const c of endpointChains(p)) {
          if (c.chain === p.chain && (!p.clusterIPRule || p.clusterIPRule.target !== p.chain)) continue
          const bySep = new Map(c.endpoints.map((e) => [e.chain, e]))
          for (const ep of c.expected) {
            const prog = bySep.get(p.want.endpoint(ep)) ?? c.endpoints.find((x) => x.backend?.address === ep.address)
            const who = `${ep.address}${ep.podName ? ` (pod ${ep.podName}${ep.nodeName ? ` on ${ep.nodeName}` : ''})` : ''}`
            if (!prog)
              out.push({
                node: n.name,
                message: `${n.name}: endpoint ${who} of ${p.expected.svcPortName} is missing from ${n.by ? `${n.by}'s ` : ''}${c.chain}`,
                check: nodeCommand(ctx.reach, n.name, n.dataplane.show(c.chain), c.chain.split(' ')),
                fix: restartServiceProxy(ctx, n.name),
              })
            else if (!prog.dnatRule)
              out.push({
                node: n.name,
                message: `${n.name}: ${prog.chain} (endpoint ${who}) has no DNAT rule: the jump falls through, the endpoint gets no traffic from this node`,
                evidence: [`${prog.jump.table} line ${prog.jump.line}: ${prog.jump.text}`],
                check: nodeCommand(ctx.reach, n.name, n.dataplane.show(prog.chain), prog.chain.split(' ')),
                fix: restartServiceProxy(ctx, n.name),
              })
          }
        }
      }
    }
    return out
  },
}
