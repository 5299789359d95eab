import {PROXY_MODES} from '../modes/index.js'
import type {ServiceImplementerAdapter} from './implementer.js'

/** kube-proxy, in whichever of its modes (model/modes) the node runs: judged by the doctor's own engine. */
export const kubeProxyImplementer: ServiceImplementerAdapter = {
  name: 'kube-proxy',
  title: 'kube-proxy',
  // Its Pods and ConfigMap are read for the diagnosis already (ClusterState.kubeProxyPods, proxyConfigMap).
  reads: {namespaces: [], agentLabels: [], configMaps: [], env: [], argPrefixes: [], customResources: []},
  fromApi(_objects, cluster, node) {
    const pod = cluster.kubeProxyPods.find((p) => p.spec?.nodeName === node)
    return pod
      ? `kube-proxy's Pod ${pod.metadata?.namespace ?? 'kube-system'}/${pod.metadata?.name} runs on ${node}`
      : undefined
  },
  fromNode(obs) {
    const mode = PROXY_MODES.find((m) => m.recognise(obs, {family: 'ip'}) ?? m.recognise(obs, {family: 'ip6'}))
    if (mode) return {reason: `kube-proxy's ${mode.mode} rules are programmed on the node`}
    const reported = obs.kubeProxy?.proxyMode
    return reported ? {reason: `kube-proxy answers on the node (/proxyMode: ${reported})`} : undefined
  },
  look: (_objects, node) => `kube-proxy's rules on ${node}: iptables-save -t nat | grep KUBE-SERVICES`,
}
