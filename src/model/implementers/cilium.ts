import {
  agentPodOn,
  chainsStartingWith,
  configMapOf,
  execInPod,
  someChains,
  type ServiceImplementerAdapter,
} from './implementer.js'
import type {ImplementerObjects} from '../../cluster/types.js'

const CONFIG_MAPS = [
  {namespace: 'kube-system', name: 'cilium-config', keys: ['kube-proxy-replacement']},
  {namespace: 'cilium', name: 'cilium-config', keys: ['kube-proxy-replacement']},
]
const AGENT = {'k8s-app': 'cilium'}
/** kube-proxy-replacement's values under which Cilium serves every Service itself ("partial" leaves some to kube-proxy). */
const REPLACES = ['true', 'strict']

/** Cilium's agent Pod on `node`, where one was read. */
export const ciliumAgentPodOn = (objects: ImplementerObjects, node: string) => agentPodOn(objects, node, AGENT)

/** Cilium with its kube-proxy replacement (eBPF): its agent Pod on the node and cilium-config's kube-proxy-replacement. */
export const ciliumImplementer: ServiceImplementerAdapter = {
  name: 'cilium',
  title: 'Cilium',
  reads: {
    namespaces: ['kube-system', 'cilium'],
    agentLabels: [AGENT],
    configMaps: CONFIG_MAPS,
    env: [],
    argPrefixes: [],
    customResources: [],
  },
  fromApi(objects, _cluster, node) {
    const pod = agentPodOn(objects, node, AGENT)
    const config = configMapOf(objects, CONFIG_MAPS)
    const replacement = config?.data?.['kube-proxy-replacement']?.trim().toLowerCase()
    if (!pod || !replacement || !REPLACES.includes(replacement)) return undefined
    return `Cilium's agent ${pod.metadata?.namespace}/${pod.metadata?.name} runs on ${node} and ${config!.metadata?.namespace}/cilium-config has kube-proxy-replacement: ${replacement}`
  },
  fromNode(obs) {
    const chains = chainsStartingWith(obs, 'CILIUM_')
    return chains.length > 0
      ? {reason: `Cilium's iptables chains (${someChains(chains)})`, onlyWithoutKubeProxy: true}
      : undefined
  },
  look: (objects, node) =>
    execInPod(agentPodOn(objects, node, AGENT), `in Cilium's agent Pod on ${node}`, 'cilium-dbg service list'),
  // Agents before 1.15 name their CLI cilium.
  agent: {container: 'cilium-agent', reads: ['ciliumServiceList', 'ciliumServiceListOld']},
}
