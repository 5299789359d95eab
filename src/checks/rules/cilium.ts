import type {Check, CheckContext, FindingDraft, FixDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {kubectlCommand} from '../../model/reach.js'
import {ciliumAgentPodOn} from '../../model/implementers/cilium.js'
import {
  backendSignature,
  wantedSignature,
  type CiliumFrontendView,
  type CiliumNodeView,
} from '../../model/cilium-services.js'
import type {CiliumFrontend} from '../../parse/cilium-services.js'
import type {Command} from '../../model/shell.js'

const agentOn = (ctx: CheckContext, node: string) =>
  ciliumAgentPodOn(ctx.cluster.implementerObjects ?? {pods: [], configMaps: []}, node)

/** `kubectl -n NS exec AGENT -- cilium-dbg service list`: the agent's Services as the finding read them. */
function serviceList(ctx: CheckContext, node: string): Command | undefined {
  const pod = agentOn(ctx, node)
  const name = pod?.metadata?.name
  if (!name) return undefined
  const namespace = pod.metadata?.namespace ?? 'kube-system'
  return kubectlCommand(ctx.reach, namespace, ['exec', name, '--', 'cilium-dbg', 'service', 'list'], [name])
}

/** Deleting the agent's Pod: its DaemonSet starts a new one, which rebuilds the load-balancing maps from the API. */
function restartAgent(ctx: CheckContext, node: string): FixDraft {
  const pod = agentOn(ctx, node)
  const name = pod?.metadata?.name
  const command = name
    ? kubectlCommand(ctx.reach, pod.metadata?.namespace ?? 'kube-system', ['delete', 'pod', name], [name])
    : undefined
  return command
    ? {changes: 'cluster', command}
    : {changes: 'node', node, text: `Restart Cilium's agent on ${node} (delete its Pod; the DaemonSet starts another).`}
}

/** The agent's own line for each matching frontend, as evidence. */
const frontendLines = (found: CiliumFrontend[]) =>
  found.map(
    (f) =>
      `cilium-dbg service list: ID ${f.id} ${f.type} ${f.ip}:${f.port}/${f.protocol} → ${f.backends.map((b) => `${b.ip}:${b.port} (${b.state})`).join(', ') || '(no backend)'}`,
  )

/** One finding per (node, frontend, item) the `pick` gives, all with the agent's list as the check and a restart as the fix. */
function perFrontend<T>(
  ctx: CheckContext,
  pick: (f: CiliumFrontendView) => T[],
  say: (node: CiliumNodeView, f: CiliumFrontendView, item: T) => string,
): FindingDraft[] {
  return ctx.cilium.flatMap((n) =>
    n.frontends.flatMap((f) =>
      pick(f).map((item) => ({
        node: n.node,
        message: say(n, f, item),
        evidence: frontendLines(f.found),
        check: serviceList(ctx, n.node),
        fix: restartAgent(ctx, n.node),
      })),
    ),
  )
}

export const ciliumFrontendMissing: Check = {
  meta: codeEntry('KPD-CILIUM-FRONTEND-MISSING'),
  run: (ctx) =>
    perFrontend(
      ctx,
      (f) => (f.found.length === 0 ? [f] : []),
      (n, f) =>
        `${n.node}: Cilium's agent lists no ${f.kind} frontend ${f.label} for ${f.port.svcPortName}: the Service does not answer there on this node`,
    ),
}

export const ciliumBackendMissing: Check = {
  meta: codeEntry('KPD-CILIUM-BACKEND-MISSING'),
  run: (ctx) =>
    perFrontend(
      ctx,
      (f) => f.missing,
      (n, f, e) =>
        `${n.node}: Cilium's ${f.kind} frontend ${f.label} lacks ${e.address}${e.podName ? ` (pod ${e.podName})` : ''}, ready in the EndpointSlices`,
    ),
}

export const ciliumBackendStale: Check = {
  meta: codeEntry('KPD-CILIUM-BACKEND-STALE'),
  run: (ctx) =>
    perFrontend(
      ctx,
      (f) => f.stale,
      (n, f, b) =>
        `${n.node}: Cilium's ${f.kind} frontend ${f.label} has backend ${b.ip}:${b.port} (${b.state}), in no EndpointSlice of ${ctx.service.namespace}/${ctx.service.name}`,
    ),
}

export const ciliumBackendNotReadyActive: Check = {
  meta: codeEntry('KPD-CILIUM-BACKEND-NOT-READY-ACTIVE'),
  run: (ctx) =>
    perFrontend(
      ctx,
      (f) => f.notReadyActive,
      (n, f, {endpoint}) =>
        `${n.node}: Cilium's ${f.kind} frontend ${f.label} sends new connections to ${endpoint.address}${endpoint.podName ? ` (pod ${endpoint.podName})` : ''}, which the EndpointSlice marks not ready`,
    ),
}

/** Agents whose backends for one frontend differ from the most common set among the Cilium nodes read. */
export const ciliumNodeDiverges: Check = {
  meta: codeEntry('KPD-CILIUM-NODE-DIVERGES'),
  run(ctx) {
    const out: FindingDraft[] = []
    if (ctx.cilium.length < 2) return out
    const labels = [...new Set(ctx.cilium.flatMap((n) => n.frontends.map((f) => f.label)))]
    for (const label of labels) {
      const sigs = new Map<string, string[]>()
      let wanted = ''
      for (const n of ctx.cilium) {
        const f = n.frontends.find((x) => x.label === label)
        if (!f || f.found.length === 0) continue
        wanted = wantedSignature(f)
        const sig = backendSignature(f)
        sigs.set(sig, [...(sigs.get(sig) ?? []), n.node])
      }
      if (sigs.size < 2) continue
      // The most common set wins; on a tie, the set the EndpointSlices ask for, then the first node's (by name).
      const [majority, majorityNodes] = [...sigs.entries()].sort(
        (a, b) =>
          b[1].length - a[1].length ||
          Number(b[0] === wanted) - Number(a[0] === wanted) ||
          a[1][0].localeCompare(b[1][0]),
      )[0]
      for (const [sig, nodes] of sigs) {
        if (sig === majority) continue
        for (const node of nodes)
          out.push({
            node,
            message: `${node}: Cilium's frontend ${label} goes to {${sig}} while ${majorityNodes.length} other node(s) (${majorityNodes.slice(0, 3).join(', ')}) have {${majority}}`,
            check: serviceList(ctx, node),
            fix: restartAgent(ctx, node),
          })
      }
    }
    return out
  },
}
