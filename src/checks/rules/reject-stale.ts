import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand} from '../../model/reach.js'
import {restartKubeProxy} from './kube-proxy-pod.js'

export const rejectStale: Check = {
  meta: codeEntry('KPD-REJECT-STALE'),
  run(ctx) {
    const out: FindingDraft[] = []
    for (const n of ctx.nodes) {
      for (const p of n.programmed) {
        const r = p.clusterIPFilterRule
        if (r && p.expected.internal.endpoints.length > 0)
          out.push({
            node: n.name,
            message: `${n.name}: ${r.table} ${r.target?.toUpperCase()}s ${n.expected.clusterIP}:${p.expected.port} although ${p.expected.internal.endpoints.length} endpoint(s) are ready`,
            evidence: [`${r.table} line ${r.line}: ${r.text}`],
            check: nodeCommand(ctx.reach, n.name, n.dataplane.show(n.expected.clusterIP!), [n.expected.clusterIP!]),
            fix: restartKubeProxy(ctx, n.name),
          })
        const np = p.nodePortFilterRule
        if (np && p.expected.external.endpoints.length > 0)
          out.push({
            node: n.name,
            message: `${n.name}: ${np.table} ${np.target?.toUpperCase()}s node port ${p.expected.nodePort} although endpoints are ready`,
            evidence: [`${np.table} line ${np.line}: ${np.text}`],
            check: nodeCommand(ctx.reach, n.name, n.dataplane.show(`--dport ${p.expected.nodePort}`), [
              p.expected.nodePort,
            ]),
            fix: restartKubeProxy(ctx, n.name),
          })
      }
    }
    return out
  },
}
