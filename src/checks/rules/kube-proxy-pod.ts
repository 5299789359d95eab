import type {V1Pod} from '@kubernetes/client-node'
import type {CheckContext, FixDraft} from '../check.js'
import {kubectlCommand} from '../../model/reach.js'
import type {Command} from '../../model/shell.js'
import {kubeRouterPodOn} from '../../model/implementers/kube-router.js'

/** kube-proxy's Pod on `node`, when it runs as a DaemonSet and one is there. */
function kubeProxyPodOn(ctx: CheckContext, node: string): V1Pod | undefined {
  return ctx.cluster.kubeProxyPods.find((p) => p.spec?.nodeName === node && p.metadata?.name)
}

/**
 * Restarting kube-proxy on `node`: deleting its Pod by name (its DaemonSet creates a new one, which re-programs every
 * rule); where no Pod is known (kube-proxy as a system service), prose.
 */
export function restartKubeProxy(ctx: CheckContext, node: string): FixDraft {
  const pod = kubeProxyPodOn(ctx, node)
  const command = pod
    ? kubectlCommand(
        ctx.reach,
        pod.metadata?.namespace ?? 'kube-system',
        ['delete', 'pod', pod.metadata!.name!],
        [pod.metadata!.name],
      )
    : undefined
  return command
    ? {changes: 'cluster', command}
    : {changes: 'node', node, text: `Restart kube-proxy on ${node} (its systemd unit, or its static Pod's manifest).`}
}

/** kube-proxy's log on `node`: its Pod's by name; where none is known, the Pods of the DaemonSet on that node. */
export function kubeProxyLogs(ctx: CheckContext, node: string): Command | undefined {
  const pod = kubeProxyPodOn(ctx, node)
  return pod
    ? kubectlCommand(
        ctx.reach,
        pod.metadata?.namespace ?? 'kube-system',
        ['logs', pod.metadata!.name!, '--tail=200'],
        [pod.metadata!.name],
      )
    : kubectlCommand(
        ctx.reach,
        'kube-system',
        ['get', 'pods', '-l', 'k8s-app=kube-proxy', '--field-selector', `spec.nodeName=${node}`, '-o', 'wide'],
        [node],
      )
}

/**
 * Restarting whatever programs the Service ports on `node`: kube-router's Pod where kube-router serves the node (its
 * DaemonSet recreates it, and the new one re-syncs IPVS), else kube-proxy.
 */
export function restartServiceProxy(ctx: CheckContext, node: string): FixDraft {
  if (!ctx.kubeRouter.some((v) => v.name === node)) return restartKubeProxy(ctx, node)
  const pod = kubeRouterPodOn(ctx.cluster.implementerObjects?.pods ?? [], node)
  return pod?.metadata?.name
    ? {
        changes: 'cluster',
        command: kubectlCommand(
          ctx.reach,
          pod.metadata.namespace ?? 'kube-system',
          ['delete', 'pod', pod.metadata.name],
          [pod.metadata.name],
        ),
      }
    : {changes: 'node', node, text: `Restart kube-router on ${node} (it re-syncs its IPVS services on start).`}
}
