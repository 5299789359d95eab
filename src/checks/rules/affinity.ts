import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand} from '../../model/reach.js'
import {restartKubeProxy} from './kube-proxy-pod.js'

export const affinityMismatch: Check = {
  meta: codeEntry('KPD-AFFINITY-MISMATCH'),
  run(ctx) {
    const out: FindingDraft[] = []
    for (const n of ctx.nodes) {
      const want = n.expected.sessionAffinitySeconds
      for (const p of n.programmed) {
        if (!p.affinity || p.endpoints.length === 0) continue
        const got = p.affinity.rule
        const evidence = got ? [`${got.table} line ${got.line}: ${got.text}`] : []
        if (want !== undefined && !got)
          out.push({
            node: n.name,
            message: `${n.name}: the Service asks for ClientIP affinity (${want}s) but ${p.chain} has no affinity rule: clients are spread over every backend`,
            check: nodeCommand(ctx.reach, n.name, n.dataplane.show(p.chain), p.chain.split(' ')),
            fix: restartKubeProxy(ctx, n.name),
          })
        else if (want === undefined && got)
          out.push({
            node: n.name,
            message: `${n.name}: ${p.chain} keeps clients on one backend but the Service has no session affinity`,
            evidence,
            check: nodeCommand(ctx.reach, n.name, n.dataplane.show(p.chain), p.chain.split(' ')),
            fix: restartKubeProxy(ctx, n.name),
          })
        else if (want !== undefined && p.affinity.seconds !== undefined && p.affinity.seconds !== want)
          out.push({
            node: n.name,
            message: `${n.name}: ${p.chain} keeps clients ${p.affinity.seconds}s, the Service asks for ${want}s`,
            evidence,
            check: nodeCommand(ctx.reach, n.name, n.dataplane.show(p.chain), p.chain.split(' ')),
            fix: restartKubeProxy(ctx, n.name),
          })
      }
    }
    return out
  },
}
