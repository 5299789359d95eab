import {agentPodOn, chainsStartingWith, execInPod, someChains, type ServiceImplementerAdapter} from './implementer.js'

const AGENT = {app: 'ovnkube-node'}

/** OVN-Kubernetes: ovnkube-node implements every Service (OVN load balancers) wherever it runs. */
export const ovnKubernetesImplementer: ServiceImplementerAdapter = {
  name: 'ovn-kubernetes',
  title: 'OVN-Kubernetes',
  reads: {
    namespaces: ['ovn-kubernetes', 'openshift-ovn-kubernetes'],
    agentLabels: [AGENT],
    configMaps: [],
    env: [],
    argPrefixes: [],
    customResources: [],
  },
  fromApi(objects, _cluster, node) {
    const pod = agentPodOn(objects, node, AGENT)
    return pod ? `ovnkube-node ${pod.metadata?.namespace}/${pod.metadata?.name} runs on ${node}` : undefined
  },
  fromNode(obs) {
    const chains = chainsStartingWith(obs, 'OVN-KUBE-')
    return chains.length > 0 ? {reason: `OVN-Kubernetes' iptables chains (${someChains(chains)})`} : undefined
  },
  look: (objects, node) =>
    execInPod(agentPodOn(objects, node, AGENT), `in ovnkube-node on ${node}`, 'ovn-nbctl lb-list'),
}
