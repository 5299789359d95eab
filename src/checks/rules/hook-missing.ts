import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'

export const hookMissing: Check = {
  meta: codeEntry('KPD-HOOK-MISSING'),
  run(ctx) {
    const out: FindingDraft[] = []
    for (const n of ctx.nodes) {
      if (n.expected.notProxied) continue
      const v = n.dataplane.vocab
      if (!n.infra.hasServicesChain) {
        out.push({
          node: n.name,
          message: `${n.name} has no ${v.services} chain: kube-proxy (${v.mode} mode) has not programmed this node`,
          hint: `ssh ${n.name} 'sudo crictl ps --name kube-proxy'; ${n.dataplane.show(n.name, v.services.split(' ').pop()!)}`,
        })
        continue
      }
      const missing = n.infra.hooks.filter((h) => !h.rule).map((h) => h.label)
      if (missing.length > 0)
        out.push({node: n.name, message: `${n.name}: ${missing.join(', ')}: jump missing`, hint: `${n.dataplane.show(n.name, v.services.split(' ').pop()!)}   # then restart kube-proxy on ${n.name}`})
    }
    return out
  },
}
