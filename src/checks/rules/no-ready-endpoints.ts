import {notReadyReason, podByIp} from '../../cluster/pod-status.js'
import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {kubectlCommand} from '../../model/reach.js'
import {selectedPods} from './selector-no-pods.js'

export const noReadyEndpoints: Check = {
  meta: codeEntry('KPD-NO-READY-ENDPOINTS'),
  run(ctx) {
    const svc = ctx.service
    if (svc.notProxied) return []
    const out: FindingDraft[] = []
    const selector = ctx.cluster.service.spec?.selector
    if (selector && Object.keys(selector).length > 0 && selectedPods(ctx).length === 0) return []
    for (const p of svc.ports) {
      if (p.hasEndpoints) continue
      const evidence = p.allEndpoints.map((e) => {
        const pod = podByIp(ctx.cluster.pods, e.ip)
        return `${e.address}${e.podName ? ` pod ${e.podName}` : ''}${e.nodeName ? ` on ${e.nodeName}` : ''}: ${pod ? notReadyReason(pod) : e.terminating ? 'terminating' : 'not ready'}`
      })
      const ns = svc.namespace
      const message =
        p.allEndpoints.length === 0
          ? `${p.svcPortName} has no endpoints at all${selector ? '' : ' (the Service has no selector: its EndpointSlices must be created by hand)'}: kube-proxy REJECTs connections to it`
          : `${p.svcPortName} has ${p.allEndpoints.length} endpoint(s), none ready: kube-proxy REJECTs connections to it`
      out.push({
        node: null,
        message,
        evidence,
        check: p.allEndpoints[0]?.podName
          ? kubectlCommand(ctx.reach, ns, ['describe', 'pod', p.allEndpoints[0].podName], [p.allEndpoints[0].podName])
          : kubectlCommand(
              ctx.reach,
              ns,
              ['get', 'endpointslices', '-l', `kubernetes.io/service-name=${svc.name}`, '-o', 'wide'],
              [svc.name],
            ),
      })
    }
    return out
  },
}
