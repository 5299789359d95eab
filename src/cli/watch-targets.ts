import type {V1Service} from '@kubernetes/client-node'
import {SERVICE_IMPLEMENTERS} from '../model/implementers/index.js'
import type {RoleTarget} from './watch-set.js'

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
 * selector picks (the endpoints' Pods, as the last diagnosis read the Service), kube-proxy's Pods and each other
 * implementer's agent Pods (their namespaces and labels, as the implementer registry reads them). One target each, with
 * what its objects are to the diagnosis (a change of kube-proxy's or an agent's Pod is a restart on that node).
 */
export function watchTargets(service: V1Service, kubeProxy: KubeProxyPods): RoleTarget[] {
  const namespace = service.metadata?.namespace ?? 'default'
  const name = service.metadata?.name ?? ''
  const selector = service.spec?.selector ?? {}
  const targets: RoleTarget[] = [
    {role: 'service', resource: 'services', namespace, fieldSelector: `metadata.name=${name}`},
    {
      role: 'endpointslice',
      resource: 'endpointslices',
      namespace,
      labelSelector: `kubernetes.io/service-name=${name}`,
    },
    ...(Object.keys(selector).length > 0
      ? [{role: 'pod' as const, resource: 'pods' as const, namespace, labelSelector: selectorOf(selector)}]
      : []),
    {role: 'proxy-pod', resource: 'pods', namespace: kubeProxy.namespace, labelSelector: kubeProxy.selector},
    ...SERVICE_IMPLEMENTERS.flatMap(({reads}) =>
      reads.namespaces.flatMap((ns) =>
        reads.agentLabels.map((labels) => ({
          role: 'proxy-pod' as const,
          resource: 'pods' as const,
          namespace: ns,
          labelSelector: selectorOf(labels),
        })),
      ),
    ),
  ]
  const seen = new Set<string>()
  return targets.filter(({role: _role, ...t}) => {
    const key = JSON.stringify(t)
    if (seen.has(key)) return false
    seen.add(key)
    return true
  })
}
