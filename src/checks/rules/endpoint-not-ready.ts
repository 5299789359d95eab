import {notReadyReason, podByIp} from '../../cluster/pod-status.js'
import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {kubectlCommand} from '../../model/reach.js'

export const endpointNotReady: Check = {
  meta: codeEntry('KPD-ENDPOINT-NOT-READY'),
  run(ctx) {
    const out: FindingDraft[] = []
    const seen = new Set<string>()
    for (const p of ctx.service.ports) {
      if (!p.hasEndpoints) continue
      for (const e of p.allEndpoints) {
        if (e.ready || seen.has(e.ip)) continue
        seen.add(e.ip)
        const pod = podByIp(ctx.cluster.pods, e.ip)
        const reason = pod ? notReadyReason(pod) : e.terminating ? 'terminating' : 'not ready'
        out.push({
          node: e.nodeName ?? null,
          message: `endpoint ${e.address}${e.podName ? ` (pod ${e.podName})` : ''} is not ready: ${reason}`,
          check:
            (e.podName ?? pod?.metadata?.name)
              ? kubectlCommand(
                  ctx.reach,
                  ctx.service.namespace,
                  ['describe', 'pod', (e.podName ?? pod?.metadata?.name)!],
                  [e.podName ?? pod?.metadata?.name],
                )
              : undefined,
        })
      }
    }
    return out
  },
}
