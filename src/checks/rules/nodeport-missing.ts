import {programmedViews, type Check, type FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand} from '../../model/reach.js'
import {restartServiceProxy} from './kube-proxy-pod.js'

export const nodePortMissing: Check = {
  meta: codeEntry('KPD-NODEPORT-MISSING'),
  run(ctx) {
    const out: FindingDraft[] = []
    for (const n of programmedViews(ctx)) {
      if (n.infra && !n.infra.hasServicesChain) continue
      const anyNodePort = n.programmed.some((p) => p.expected.nodePort && p.expected.hasEndpoints)
      if (anyNodePort && n.infra && !n.infra.nodePortsJump)
        out.push({
          node: n.name,
          message: `${n.name}: ${n.dataplane.vocab.steps['service-match']} has no jump to ${n.dataplane.vocab.steps['nodeport-match']}: no NodePort works on this node`,
          check: nodeCommand(
            ctx.reach,
            n.name,
            n.dataplane.show(n.dataplane.vocab.steps['nodeport-match'].split(' ').pop()!),
            n.dataplane.vocab.steps['nodeport-match'].split(' ').pop()!.split(' '),
          ),
          fix: restartServiceProxy(ctx, n.name),
        })
      for (const p of n.programmed) {
        const e = p.expected
        if (!e.nodePort || !e.hasEndpoints) continue
        if (!p.nodePortRule)
          out.push({
            node: n.name,
            message: `${n.name}: node port ${e.nodePort}/${e.protocol} of ${e.svcPortName} is missing from ${n.dataplane.vocab.steps['nodeport-match']}`,
            check: nodeCommand(ctx.reach, n.name, n.dataplane.show(String(e.nodePort)), [String(e.nodePort)]),
            fix: restartServiceProxy(ctx, n.name),
          })
        else if (p.nodePortRule.target !== p.want.external)
          out.push({
            node: n.name,
            message: `${n.name}: node port ${e.nodePort} jumps to ${p.nodePortRule.target}, expected ${p.want.external}`,
            evidence: [`${p.nodePortRule.table} line ${p.nodePortRule.line}: ${p.nodePortRule.text}`],
            check: nodeCommand(ctx.reach, n.name, n.dataplane.show(String(e.nodePort)), [String(e.nodePort)]),
            fix: restartServiceProxy(ctx, n.name),
          })
      }
    }
    return out
  },
}
