import {createRequire} from 'node:module'
import type * as Yaml from 'yaml'
import {
  agentPodOn,
  chainsStartingWith,
  configMapOf,
  execInPod,
  someChains,
  type ServiceImplementerAdapter,
} from './implementer.js'

/** yaml, loaded when Antrea's configuration is read. */
const loadModule = createRequire(import.meta.url)

const CONFIG_MAPS = [{namespace: 'kube-system', name: 'antrea-config', keys: ['antrea-agent.conf']}]
const AGENT = {app: 'antrea', component: 'antrea-agent'}

interface AntreaAgentConf {
  featureGates?: {AntreaProxy?: unknown}
  antreaProxy?: {proxyAll?: unknown; enable?: unknown}
}

/** antrea-agent.conf's words on AntreaProxy serving every Service (proxyAll), or undefined. */
function proxyAll(text: string | undefined): string | undefined {
  if (!text) return undefined
  let conf: AntreaAgentConf
  try {
    conf = ((loadModule('yaml') as typeof Yaml).parse(text) ?? {}) as AntreaAgentConf
  } catch {
    return undefined
  }
  if (typeof conf !== 'object') return undefined
  if (conf.featureGates?.AntreaProxy === false || conf.antreaProxy?.enable === false) return undefined
  return conf.antreaProxy?.proxyAll === true ? 'antreaProxy.proxyAll: true' : undefined
}

/** Antrea's proxy serving every Service (proxyAll), replacing kube-proxy: antrea-agent on the node and its config. */
export const antreaImplementer: ServiceImplementerAdapter = {
  name: 'antrea',
  title: 'Antrea (AntreaProxy)',
  reads: {
    namespaces: ['kube-system'],
    agentLabels: [AGENT],
    configMaps: CONFIG_MAPS,
    env: [],
    argPrefixes: [],
    customResources: [],
  },
  fromApi(objects, _cluster, node) {
    const pod = agentPodOn(objects, node, AGENT)
    const said = proxyAll(configMapOf(objects, CONFIG_MAPS)?.data?.['antrea-agent.conf'])
    return pod && said
      ? `antrea-agent ${pod.metadata?.namespace}/${pod.metadata?.name} runs on ${node} and antrea-agent.conf has ${said}`
      : undefined
  },
  fromNode(obs) {
    const chains = chainsStartingWith(obs, 'ANTREA-')
    return chains.length > 0
      ? {reason: `Antrea's iptables chains (${someChains(chains)})`, onlyWithoutKubeProxy: true}
      : undefined
  },
  look: (objects, node) =>
    execInPod(agentPodOn(objects, node, AGENT), `in antrea-agent on ${node}`, 'antctl get ovsflows'),
}
