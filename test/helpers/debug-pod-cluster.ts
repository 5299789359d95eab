import type {LabApiServer} from '../lab/apiserver.js'
import type {RecordedExec} from '../lab/apiserver-streams.js'
import {endpointSliceObject, kubeProxyConfigMap, nodeObject, podObject, serviceObject} from '../fixtures/api-objects.js'
import {labPods, NODES, SERVICES} from '../fixtures/lab-cluster.js'

/** What a debug Pod's command prints, by the Pod (its spec names its node) and the command's argv. */
export type DebugPodAnswer = (pod: {metadata?: unknown; spec?: unknown}, argv: string[]) => RecordedExec

/**
 * Serves the lab cluster (its nodes, Pods, Services and their EndpointSlices, kube-proxy's ConfigMap, the namespaces)
 * from `api`, the debug Pods' commands answered by `answer`; returns the flags that read it live through debug Pods.
 */
export function serveLabClusterViaDebugPods(api: LabApiServer, answer: DebugPodAnswer): string[] {
  const pods = labPods()
  api.opts.execAnswer = answer
  api.set('nodes', NODES.map(nodeObject))
  api.set('pods', pods.map(podObject))
  api.set('services', SERVICES.map(serviceObject))
  api.set(
    'endpointslices',
    SERVICES.map((s) => endpointSliceObject(s, pods)),
  )
  api.set('configmaps', [kubeProxyConfigMap()])
  api.set(
    'namespaces',
    ['default', 'shop', 'kube-system'].map((name) => ({metadata: {name}})),
  )
  return ['--kubeconfig', api.writeKubeconfig(), '--via', 'debug-pod', '--debug-image', 'busybox:1.36']
}
