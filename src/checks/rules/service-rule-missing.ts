import {showChain, type Check, type FindingDraft} from '../check.js'

export const serviceRuleMissing: Check = {
  meta: {
    code: 'KPD-SVC-RULE-MISSING',
    severity: 'error',
    title: 'Service port missing from nat KUBE-SERVICES',
    hint: 'kube-proxy on this node has not synced the Service: check its logs and sync metrics, then restart it.',
  },
  run(ctx) {
    const out: FindingDraft[] = []
    for (const n of ctx.nodes) {
      if (!n.infra.hasServicesChain) continue
      const svc = n.expected
      for (const p of n.programmed) {
        const e = p.expected
        const where = `${svc.clusterIP}:${e.port}/${e.protocol}`
        if (e.internal.endpoints.length > 0) {
          if (!p.clusterIPRule) out.push({node: n.name, message: `${n.name}: no nat KUBE-SERVICES rule for ${e.svcPortName} cluster IP ${where}`, hint: showChain(n.name, 'nat', svc.clusterIP!)})
          else if (p.clusterIPRule.target !== e.internal.chain)
            out.push({
              node: n.name,
              message: `${n.name}: ${where} jumps to ${p.clusterIPRule.target}, expected ${e.internal.chain}`,
              evidence: [`nat line ${p.clusterIPRule.line}: ${p.clusterIPRule.text}`],
              hint: showChain(n.name, 'nat', svc.clusterIP!),
            })
        }
        if (e.hasEndpoints) {
          for (const ip of [...svc.externalIPs, ...svc.loadBalancerIPs]) {
            if (!p.externalRules.has(ip)) out.push({node: n.name, message: `${n.name}: no nat KUBE-SERVICES rule for ${e.svcPortName} at ${ip}:${e.port}`, hint: showChain(n.name, 'nat', ip)})
          }
        }
      }
    }
    return out
  },
}
