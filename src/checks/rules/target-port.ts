import type {V1Pod} from '@kubernetes/client-node'
import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {kubectlCommand} from '../../model/reach.js'
import {selectedPods} from './selector-no-pods.js'

function containerPorts(pod: V1Pod) {
  return (pod.spec?.containers ?? []).flatMap((c) => c.ports ?? [])
}

export const targetPortNotExposed: Check = {
  meta: codeEntry('KPD-TARGETPORT-NOT-EXPOSED'),
  run(ctx) {
    const out: FindingDraft[] = []
    const pods = selectedPods(ctx)
    for (const sp of ctx.cluster.service.spec?.ports ?? []) {
      const tp = sp.targetPort
      if (typeof tp !== 'string' || /^\d+$/.test(tp)) continue
      const lacking = pods.filter(
        (p) => !containerPorts(p).some((c) => c.name === tp && (c.protocol ?? 'TCP') === (sp.protocol ?? 'TCP')),
      )
      if (lacking.length > 0)
        out.push({
          node: null,
          message: `targetPort "${tp}" of port ${sp.name ?? sp.port} is not a named containerPort of ${lacking.length} selected Pod(s): ${lacking
            .slice(0, 5)
            .map((p) => p.metadata?.name)
            .join(', ')}; they get no endpoint for it`,
        })
    }
    return out
  },
}

export const targetPortUndeclared: Check = {
  meta: codeEntry('KPD-TARGETPORT-UNDECLARED'),
  run(ctx) {
    const out: FindingDraft[] = []
    const pods = selectedPods(ctx).filter((p) => containerPorts(p).length > 0)
    for (const sp of ctx.cluster.service.spec?.ports ?? []) {
      const tp = Number(sp.targetPort ?? sp.port)
      if (Number.isNaN(tp)) continue
      const lacking = pods.filter((p) => !containerPorts(p).some((c) => c.containerPort === tp))
      if (lacking.length > 0)
        out.push({
          node: null,
          message: `targetPort ${tp} of port ${sp.name ?? sp.port}: ${lacking.length} selected Pod(s) declare only ${[...new Set(lacking.flatMap((p) => containerPorts(p).map((c) => c.containerPort)))].join(', ')} (${lacking
            .slice(0, 3)
            .map((p) => p.metadata?.name)
            .join(', ')})`,
          check: kubectlCommand(
            ctx.reach,
            ctx.service.namespace,
            ['get', 'pod', lacking[0].metadata?.name ?? '', '-o', 'jsonpath={.spec.containers[*].ports}'],
            [lacking[0].metadata?.name],
          ),
        })
    }
    return out
  },
}
