import type {V1Pod} from '@kubernetes/client-node'
import type {Check, CheckContext, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {kubectlCommand} from '../../model/reach.js'
import {describeTally, endpointName, endpointProbes, endpointVerdict, failureVerb, probesRan} from './probe-evidence.js'

/** "containerPort 8080/TCP "http"", what the Pod's spec declares, for the reader to compare with the port probed. */
function declaredPorts(pod: V1Pod | undefined): string {
  if (!pod) return 'its Pod was not found in the namespace'
  const ports = (pod.spec?.containers ?? []).flatMap((c) => c.ports ?? [])
  if (ports.length === 0) return 'its spec declares no containerPort'
  return `its spec declares containerPort ${ports.map((p) => `${p.containerPort}/${p.protocol ?? 'TCP'}${p.name ? ` "${p.name}"` : ''}`).join(', ')}`
}

function podOf(ctx: CheckContext, name: string | undefined): V1Pod | undefined {
  return name
    ? ctx.cluster.pods.find((p) => p.metadata?.name === name && p.metadata?.namespace === ctx.service.namespace)
    : undefined
}

/** An endpoint that fails from every node that probed it: the backend itself does not serve its targetPort. */
export const backendRefused: Check = {
  meta: codeEntry('KPD-BACKEND-REFUSED'),
  run(ctx) {
    const run = probesRan(ctx)
    if (!run) return []
    const out: FindingDraft[] = []
    for (const e of endpointProbes(run)) {
      if (endpointVerdict(e) !== 'backend') continue
      const t = e.target
      const from = e.byNode.map((b) => `${b.node} ${describeTally(b.tally)}`).join(', ')
      const ownProbed = !t.podNode || e.byNode.some((b) => b.node === t.podNode)
      const pod = podOf(ctx, t.pod)
      out.push({
        node: t.podNode ?? null,
        message:
          `${endpointName(t)} of ${ctx.service.namespace}/${ctx.service.name}:${t.servicePort} is Ready but ${failureVerb(e.byNode.map((b) => b.tally))} on port ${t.port} from every node that probed it (${from}); ` +
          `${declaredPorts(pod)}${ownProbed ? '' : `; its own node ${t.podNode} was not probed, so a fault on that node's side is not ruled out`}`,
        check: t.pod
          ? kubectlCommand(
              ctx.reach,
              ctx.service.namespace,
              ['get', 'pod', t.pod, '-o', 'jsonpath={.spec.containers[*].readinessProbe}'],
              [t.pod],
            )
          : undefined,
        text: t.pod
          ? `Check what ${t.pod} listens on and what its readiness probe checks (a probe on another port keeps it Ready), and read its logs.`
          : undefined,
      })
    }
    return out
  },
}
