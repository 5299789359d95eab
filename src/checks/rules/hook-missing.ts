import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand} from '../../model/reach.js'
import {restartKubeProxy} from './kube-proxy-pod.js'

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
          message: `${n.name} has no ${v.steps['service-match']} chain: kube-proxy (${v.mode} mode) has not programmed this node`,
          check: nodeCommand(ctx.reach, n.name, n.dataplane.show(v.steps['service-match'].split(' ').pop()!), [
            v.steps['service-match'].split(' ').pop(),
          ]),
          fix: restartKubeProxy(ctx, n.name),
          text: `If it does not come back, check that kube-proxy runs on ${n.name} (crictl ps --name kube-proxy on the node) and read its logs.`,
        })
        continue
      }
      const missing = n.infra.hooks.filter((h) => !h.rule).map((h) => h.label)
      if (missing.length > 0)
        out.push({
          node: n.name,
          message: `${n.name}: ${missing.join(', ')}: jump missing`,
          check: nodeCommand(ctx.reach, n.name, n.dataplane.show(v.steps['service-match'].split(' ').pop()!), [
            v.steps['service-match'].split(' ').pop(),
          ]),
          fix: restartKubeProxy(ctx, n.name),
        })
    }
    return out
  },
}
