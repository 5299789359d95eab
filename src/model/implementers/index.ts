import type {ClusterState, ImplementerObjects, ImplementerReads} from '../../cluster/types.js'
import type {NodeObservation} from '../../node/observation.js'
import {antreaImplementer} from './antrea.js'
import {calicoEbpfImplementer} from './calico-ebpf.js'
import {ciliumImplementer} from './cilium.js'
import type {ServiceImplementerAdapter} from './implementer.js'
import {kubeProxyImplementer} from './kube-proxy.js'
import {kubeRouterImplementer} from './kube-router.js'
import {ovnKubernetesImplementer} from './ovn-kubernetes.js'

export type {ServiceImplementerAdapter} from './implementer.js'

/**
 * Every implementer of Services the doctor recognises, kube-proxy first (its modes: model/modes). One adapter each
 * (implementer.ts says what an adapter owns); the API objects read, the report's names and the decision follow.
 */
export const SERVICE_IMPLEMENTERS = [
  kubeProxyImplementer,
  ciliumImplementer,
  calicoEbpfImplementer,
  kubeRouterImplementer,
  antreaImplementer,
  ovnKubernetesImplementer,
] as const satisfies readonly ServiceImplementerAdapter[]

const KUBE_PROXY = kubeProxyImplementer.name

/** The API objects every implementer is recognised by: what readClusterState is asked to read. */
export const IMPLEMENTER_READS: ImplementerReads = {
  namespaces: [...new Set(SERVICE_IMPLEMENTERS.flatMap((i) => i.reads.namespaces))],
  agentLabels: SERVICE_IMPLEMENTERS.flatMap((i) => i.reads.agentLabels),
  configMaps: SERVICE_IMPLEMENTERS.flatMap((i) => i.reads.configMaps),
  env: SERVICE_IMPLEMENTERS.flatMap((i) => i.reads.env),
  argPrefixes: SERVICE_IMPLEMENTERS.flatMap((i) => i.reads.argPrefixes),
  customResources: SERVICE_IMPLEMENTERS.flatMap((i) => i.reads.customResources),
}

/** One implementer found on a node, with what said so. */
interface Found {
  name: string
  title: string
  evidence: string[]
  source: 'api' | 'node' | 'api+node'
}

/** Who implements Services on a node, from the API objects and what was read there. */
export interface NodeImplementer {
  node: string
  /** The implementer whose state is judged on the node ("none" when none was found). */
  name: string
  title: string
  evidence: string[]
  /** What said so: the API objects, the node's state, both, or "assumed" (kube-proxy, nothing saying otherwise). */
  source: 'api' | 'node' | 'api+node' | 'assumed' | 'none'
  /** Every implementer found active on the node (two or more: they fight over the Service addresses). */
  active: Found[]
  /** kube-proxy's rules are judged on the node (it implements Services there, alone or beside another). */
  kubeProxyJudged: boolean
  /** Where another implementer serves the node: what a person runs to look at its Services. */
  look: string | null
}

const NO_OBJECTS: ImplementerObjects = {pods: [], configMaps: []}

/**
 * Who implements Services on `node`: every implementer whose API objects or node state say it runs there, where an
 * implementer's own rules (a CNI's chains) count only when kube-proxy's are not there. None found: kube-proxy when the
 * cluster runs it (its Pods or ConfigMap, its rules on another read node of `peers`, or the API could not tell), else
 * "none". kube-proxy's rules are judged wherever kube-proxy is active, also beside another implementer (a finding says
 * the two fight).
 */
export function decideImplementer(
  cluster: ClusterState,
  node: string,
  obs?: NodeObservation,
  peers: NodeObservation[] = [],
): NodeImplementer {
  const objects = cluster.implementerObjects ?? NO_OBJECTS
  const read = obs?.reachable ? obs : undefined
  const onNode = read && evidenceOnNode(read)
  const found = SERVICE_IMPLEMENTERS.map((i, k) => ({
    i,
    api: i.fromApi(objects, cluster, node),
    onNode: onNode?.[k],
  }))
  const kubeProxy = found[0]
  const kubeProxyActive = !!(kubeProxy.api || kubeProxy.onNode)
  const active: Found[] = found.flatMap(({i, api, onNode}) => {
    const nodeCounts = onNode && !(onNode.onlyWithoutKubeProxy && kubeProxyActive)
    const evidence = [...(api ? [api] : []), ...(nodeCounts ? [onNode.reason] : [])]
    if (evidence.length === 0) return []
    const source = api && nodeCounts ? 'api+node' : api ? 'api' : 'node'
    return [{name: i.name, title: i.title, evidence, source}]
  })
  const others = active.filter((a) => a.name !== KUBE_PROXY)
  const base = {node, active, kubeProxyJudged: kubeProxyActive}
  if (others.length > 0) {
    const first = others[0]
    const adapter = SERVICE_IMPLEMENTERS.find((i) => i.name === first.name)!
    return {
      ...base,
      name: first.name,
      title: first.title,
      evidence: first.evidence,
      source: first.source,
      look: adapter.look(objects, node),
    }
  }
  if (kubeProxyActive) {
    const own = active[0]
    return {...base, name: KUBE_PROXY, title: 'kube-proxy', evidence: own.evidence, source: own.source, look: null}
  }
  const expected = kubeProxyExpected(cluster, node, peers)
  if (expected)
    return {
      ...base,
      name: KUBE_PROXY,
      title: 'kube-proxy',
      evidence: [expected],
      source: 'assumed',
      kubeProxyJudged: true,
      look: null,
    }
  return {...base, name: 'none', title: 'none', evidence: [], source: 'none', look: null}
}

type NodeEvidence = ReturnType<ServiceImplementerAdapter['fromNode']>

/** What a node's reads say of each implementer (SERVICE_IMPLEMENTERS' order), with the reads it was made from. */
interface RememberedEvidence {
  read: unknown[]
  evidence: NodeEvidence[]
}
const evidence = new WeakMap<NodeObservation, RememberedEvidence>()

/**
 * What the node's own state says of each implementer, in SERVICE_IMPLEMENTERS' order. Made once per node's reads: a
 * scan decides every node's implementer for each of its Services, and each implementer looks through every chain
 * name of the node's dumps (a node whose reads were replaced is looked at again).
 */
function evidenceOnNode(obs: NodeObservation): NodeEvidence[] {
  const read = [...Object.values(obs), obs.kubeProxy?.proxyMode]
  const seen = evidence.get(obs)
  if (seen && seen.read.length === read.length && seen.read.every((r, i) => r === read[i])) return seen.evidence
  const made = SERVICE_IMPLEMENTERS.map((i) => i.fromNode(obs))
  evidence.set(obs, {read, evidence: made})
  return made
}

/**
 * Why kube-proxy is expected on a node where nothing shows it: the cluster runs it elsewhere or configures it, or the
 * API objects that would say otherwise were not read. undefined: nothing says the cluster runs kube-proxy.
 */
function kubeProxyExpected(cluster: ClusterState, node: string, peers: NodeObservation[]): string | undefined {
  if (cluster.kubeProxyPods.length > 0) return "kube-proxy's DaemonSet runs in the cluster"
  if (cluster.proxyConfigMap) return 'the ConfigMap kube-system/kube-proxy configures kube-proxy'
  // kube-proxy run outside any Pod (inside k3s' server and agent binary, or as a system service) shows on its nodes only.
  const peer = peers.find((p) => p.reachable && p.name !== node && evidenceOnNode(p)[0])
  if (peer)
    return `kube-proxy's rules are programmed on ${peer.name} (kube-proxy runs there outside any Pod, as k3s runs it)`
  if (!cluster.implementerObjects) return 'no other implementer was looked for (its API objects were not read)'
  if (cluster.unread.length > 0)
    return `no other implementer was found, but the API could not tell all: ${cluster.unread[0].what} not read`
  return undefined
}
