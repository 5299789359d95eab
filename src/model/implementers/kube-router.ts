import type {V1Pod} from '@kubernetes/client-node'
import {
  agentPodOn,
  chainsStartingWith,
  containersOf,
  execInPod,
  someChains,
  type ServiceImplementerAdapter,
} from './implementer.js'

const AGENT = {'k8s-app': 'kube-router'}

/** Whether kube-router's arguments turn its service proxy on (--run-service-proxy, which defaults to true). */
function runsServiceProxy(args: string[]): boolean {
  let on = true
  for (const [i, a] of args.entries()) {
    const m = /^--run-service-proxy(?:=(.*))?$/.exec(a)
    if (!m) continue
    const value = m[1] ?? (['true', 'false'].includes(args[i + 1] ?? '') ? args[i + 1] : 'true')
    on = value.trim().toLowerCase() !== 'false'
  }
  return on
}

/** kube-router's agent Pod on `node`, if one was read. */
export const kubeRouterPodOn = (pods: V1Pod[], node: string) => agentPodOn({pods, configMaps: []}, node, AGENT)

/** kube-router with its service proxy (IPVS): its Pod on the node, --run-service-proxy not false. */
export const kubeRouterImplementer: ServiceImplementerAdapter = {
  name: 'kube-router',
  title: 'kube-router',
  reads: {
    namespaces: ['kube-system'],
    agentLabels: [AGENT],
    configMaps: [],
    env: [],
    argPrefixes: ['--run-service-proxy'],
    customResources: [],
  },
  fromApi(objects, _cluster, node) {
    const pod = kubeRouterPodOn(objects.pods, node)
    const container = pod
      ? (containersOf(pod).find((c) => c.name === 'kube-router') ?? containersOf(pod)[0])
      : undefined
    if (!container || !runsServiceProxy([...(container.command ?? []), ...(container.args ?? [])])) return undefined
    return `kube-router ${pod!.metadata?.namespace}/${pod!.metadata?.name} runs on ${node} with its service proxy (--run-service-proxy)`
  },
  fromNode(obs) {
    const chains = chainsStartingWith(obs, 'KUBE-ROUTER-')
    return chains.length > 0
      ? {reason: `kube-router's iptables chains (${someChains(chains)})`, onlyWithoutKubeProxy: true}
      : undefined
  },
  look: (objects, node) => execInPod(kubeRouterPodOn(objects.pods, node), `on ${node}`, 'ipvsadm -Ln'),
}
