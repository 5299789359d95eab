import {
  agentPodOn,
  chainsStartingWith,
  containersOf,
  execInPod,
  someChains,
  type ServiceImplementerAdapter,
} from './implementer.js'

const AGENT = {'k8s-app': 'calico-node'}

/**
 * Calico's eBPF dataplane: calico-node on the node with FELIX_BPFENABLED=true. (FelixConfiguration's bpfEnabled, a
 * custom resource, is not read yet: a cluster that sets it there only is recognised by its node's state.)
 */
export const calicoEbpfImplementer: ServiceImplementerAdapter = {
  name: 'calico-ebpf',
  title: 'Calico (eBPF dataplane)',
  reads: {
    namespaces: ['kube-system', 'calico-system'],
    agentLabels: [AGENT],
    configMaps: [],
    env: ['FELIX_BPFENABLED'],
    argPrefixes: [],
  },
  fromApi(objects, _cluster, node) {
    const pod = agentPodOn(objects, node, AGENT)
    const enabled = pod
      ? containersOf(pod).some((c) =>
          (c.env ?? []).some((e) => e.name === 'FELIX_BPFENABLED' && e.value?.trim().toLowerCase() === 'true'),
        )
      : false
    return enabled
      ? `calico-node ${pod!.metadata?.namespace}/${pod!.metadata?.name} runs on ${node} with FELIX_BPFENABLED=true`
      : undefined
  },
  fromNode(obs) {
    const chains = chainsStartingWith(obs, 'cali-')
    return chains.length > 0
      ? {reason: `Calico's iptables chains (${someChains(chains)})`, onlyWithoutKubeProxy: true}
      : undefined
  },
  look: (objects, node) =>
    execInPod(agentPodOn(objects, node, AGENT), `in calico-node on ${node}`, 'calico-node -bpf nat dump'),
}
