import {podByIp} from '../../cluster/pod-status.js'
import {programmedViews, type Check, type FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand} from '../../model/reach.js'
import {restartServiceProxy} from './kube-proxy-pod.js'
import {endpointChains} from '../../model/dataplane.js'

export const endpointStale: Check = {
  meta: codeEntry('KPD-SEP-STALE'),
  run(ctx) {
    const out: FindingDraft[] = []
    for (const n of programmedViews(ctx)) {
      for (const p of n.programmed) {
        const known = new Set(p.expected.allEndpoints.map((e) => e.ip))
        for (const {chain, endpoints} of endpointChains(p))
          for (const prog of endpoints) {
            if (!prog.backend?.ip || known.has(prog.backend?.ip)) continue
            const pod = podByIp(ctx.cluster.pods, prog.backend?.ip)
            const owner = pod
              ? `owned by pod ${pod.metadata?.name}, which this Service does not select`
              : `in no EndpointSlice and owned by no Pod in ${ctx.service.namespace}`
            out.push({
              node: n.name,
              message: `${n.name}: ${n.by ? `${n.by}'s ` : ''}${chain} sends ${Math.round(prog.probability * 100) === 100 ? 'the remaining' : 'some'} traffic to ${prog.backend?.address}, ${owner}`,
              evidence: [
                `${prog.jump.table} line ${prog.jump.line}: ${prog.jump.text}`,
                ...(prog.dnatRule ? [`${prog.dnatRule.table} line ${prog.dnatRule.line}: ${prog.dnatRule.text}`] : []),
              ],
              check: nodeCommand(ctx.reach, n.name, n.dataplane.show(prog.chain), prog.chain.split(' ')),
              fix: restartServiceProxy(ctx, n.name),
            })
          }
      }
    }
    return out
  },
}
