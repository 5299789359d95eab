import type {V1Pod} from '@kubernetes/client-node'
import type {ImplementerCustomResource, ImplementerObjects} from '../../cluster/types.js'
import {
  agentPodOn,
  chainsStartingWith,
  containersOf,
  execInPod,
  someChains,
  type ServiceImplementerAdapter,
} from './implementer.js'

const AGENT = {'k8s-app': 'calico-node'}
const ENV = 'FELIX_BPFENABLED'

/**
 * Felix's configuration objects: crd.projectcalico.org/v1 is where Calico keeps them (its API server serves them again
 * as projectcalico.org/v3); a cluster on Calico's native v3 CRDs has only projectcalico.org/v3.
 */
const FELIX_CONFIGURATION: ImplementerCustomResource = {
  kind: 'FelixConfiguration',
  plural: 'felixconfigurations',
  versions: [
    {group: 'crd.projectcalico.org', version: 'v1'},
    {group: 'projectcalico.org', version: 'v3'},
  ],
  refused: 'stands',
  agentLabels: AGENT,
  specKeys: ['bpfEnabled'],
}

interface FelixConfiguration {
  apiVersion?: string
  metadata?: {name?: string}
  spec?: {bpfEnabled?: boolean}
}

/** Felix's reading of a boolean parameter (felix/config: BoolParam); anything else is no value. */
function felixBool(raw: string | undefined): boolean | undefined {
  const value = raw?.trim().toLowerCase()
  if (value === undefined) return undefined
  if (['true', '1', 'yes', 'y', 't'].includes(value)) return true
  if (['false', '0', 'no', 'n', 'f'].includes(value)) return false
  return undefined
}

/** calico-node's FELIX_BPFENABLED as written (literal values only), when set. */
function envSetting(pod: V1Pod): {raw: string; enabled: boolean} | undefined {
  for (const c of containersOf(pod))
    for (const e of c.env ?? []) {
      const enabled = e.name === ENV ? felixBool(e.value) : undefined
      if (enabled !== undefined) return {raw: e.value!.trim(), enabled}
    }
  return undefined
}

/** The FelixConfiguration that sets bpfEnabled for `node`: its own (node.NODE) before the cluster's (default). */
function crdSetting(objects: ImplementerObjects, node: string) {
  const all = (objects.customObjects?.[FELIX_CONFIGURATION.kind] ?? []) as FelixConfiguration[]
  for (const name of [`node.${node}`, 'default']) {
    const config = all.find((c) => c?.metadata?.name === name && typeof c.spec?.bpfEnabled === 'boolean')
    if (config) return {name, apiVersion: config.apiVersion ?? '?', enabled: config.spec!.bpfEnabled!}
  }
  return undefined
}

/**
 * Calico's eBPF dataplane: calico-node on the node with bpfEnabled on, as Felix reads it: its environment first
 * (FELIX_BPFENABLED), then the node's FelixConfiguration (node.NODE), then the cluster's (default); the first that
 * sets it decides (docs.tigera.io, "Configuring Felix"). Calico's selector-scoped FelixConfigurations (a tech preview)
 * and Felix's configuration file are not read.
 */
export const calicoEbpfImplementer: ServiceImplementerAdapter = {
  name: 'calico-ebpf',
  title: 'Calico (eBPF dataplane)',
  reads: {
    namespaces: ['kube-system', 'calico-system'],
    agentLabels: [AGENT],
    configMaps: [],
    env: [ENV],
    argPrefixes: [],
    customResources: [FELIX_CONFIGURATION],
  },
  fromApi(objects, _cluster, node) {
    const pod = agentPodOn(objects, node, AGENT)
    if (!pod) return undefined
    const agent = `calico-node ${pod.metadata?.namespace}/${pod.metadata?.name} runs on ${node}`
    const env = envSetting(pod)
    const crd = crdSetting(objects, node)
    if (env) {
      if (!env.enabled) return undefined
      const overridden =
        crd && !crd.enabled
          ? ` (FelixConfiguration ${crd.name} has bpfEnabled: false; the environment wins, as Felix reads it first)`
          : ''
      return `${agent} with ${ENV}=${env.raw}${overridden}`
    }
    return crd?.enabled
      ? `${agent} and FelixConfiguration ${crd.name} (${crd.apiVersion}) has bpfEnabled: true`
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
