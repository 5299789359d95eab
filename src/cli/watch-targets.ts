import type {V1Service} from '@kubernetes/client-node'
import type {WatchTarget} from '../cluster/watch-objects.js'
import {SERVICE_IMPLEMENTERS} from '../model/implementers/index.js'

/** How kube-proxy's Pods are found (--kube-proxy-namespace, --kube-proxy-selector). */
interface KubeProxyPods {
  namespace: string
  selector: string
}

const selectorOf = (labels: Record<string, string>) =>
  Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(',')

/**
 * What `svc --watch` watches for a change that can change the diagnosis: the Service, its EndpointSlices, the Pods its
 * selector picks (the endpoints' Pods, as the Service read when the watch began), kube-proxy's Pods and each other
 * implementer's agent Pods (their namespaces and labels, as the implementer registry reads them). One target each.
 */
export function watchTargets(service: V1Service, kubeProxy: KubeProxyPods): WatchTarget[] {
  const namespace = service.metadata?.namespace ?? 'default'
  const name = service.metadata?.name ?? ''
  const selector = service.spec?.selector ?? {}
  const targets: WatchTarget[] = [
    {resource: 'services', namespace, fieldSelector: `metadata.name=${name}`},
    {resource: 'endpointslices', namespace, labelSelector: `kubernetes.io/service-name=${name}`},
    ...(Object.keys(selector).length > 0
      ? [{resource: 'pods' as const, namespace, labelSelector: selectorOf(selector)}]
      : []),
    {resource: 'pods', namespace: kubeProxy.namespace, labelSelector: kubeProxy.selector},
    ...SERVICE_IMPLEMENTERS.flatMap(({reads}) =>
      reads.namespaces.flatMap((ns) =>
        reads.agentLabels.map((labels) => ({
          resource: 'pods' as const,
          namespace: ns,
          labelSelector: selectorOf(labels),
        })),
      ),
    ),
  ]
  const seen = new Set<string>()
  return targets.filter((t) => {
    const key = JSON.stringify(t)
    if (seen.has(key)) return false
    seen.add(key)
    return true
  })
}
