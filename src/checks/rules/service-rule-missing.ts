import {programmedViews, type Check, type FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand} from '../../model/reach.js'
import {restartServiceProxy} from './kube-proxy-pod.js'
import {joinHostPort} from '../../net/host-port.js'

export const serviceRuleMissing: Check = {
  meta: codeEntry('KPD-SVC-RULE-MISSING'),
  run(ctx) {
    const out: FindingDraft[] = []
    for (const n of programmedViews(ctx)) {
      if (n.infra && !n.infra.hasServicesChain) continue
      const svc = n.expected
      for (const p of n.programmed) {
        const e = p.expected
        const where = `${joinHostPort(svc.clusterIP!, e.port)}/${e.protocol}`
        if (e.internal.endpoints.length > 0) {
          if (!p.clusterIPRule)
            out.push({
              node: n.name,
              message: `${n.name}: no ${n.dataplane.vocab.steps['service-match']} entry for ${e.svcPortName} cluster IP ${where}`,
              check: nodeCommand(ctx.reach, n.name, n.dataplane.show(svc.clusterIP!), [svc.clusterIP!]),
              fix: restartServiceProxy(ctx, n.name),
            })
          else if (p.clusterIPRule.target !== p.want.internal)
            out.push({
              node: n.name,
              message: `${n.name}: ${where} jumps to ${p.clusterIPRule.target}, expected ${p.want.internal}`,
              evidence: [`${p.clusterIPRule.table} line ${p.clusterIPRule.line}: ${p.clusterIPRule.text}`],
              check: nodeCommand(ctx.reach, n.name, n.dataplane.show(svc.clusterIP!), [svc.clusterIP!]),
              fix: restartServiceProxy(ctx, n.name),
            })
        }
        if (e.hasEndpoints) {
          for (const ip of [...svc.externalIPs, ...svc.loadBalancerIPs]) {
            if (!p.externalRules.has(ip))
              out.push({
                node: n.name,
                message: `${n.name}: no ${n.dataplane.vocab.steps['service-match']} entry for ${e.svcPortName} at ${ip}:${e.port}`,
                check: nodeCommand(ctx.reach, n.name, n.dataplane.show(ip), [ip]),
                fix: restartServiceProxy(ctx, n.name),
              })
          }
        }
      }
    }
    return out
  },
}
