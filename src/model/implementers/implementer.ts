import type {V1ConfigMap, V1Container, V1Pod} from '@kubernetes/client-node'
import type {ClusterState, ImplementerObjects, ImplementerReads} from '../../cluster/types.js'
import type {NodeObservation} from '../../node/observation.js'
import type {NodeCommand} from '../../node/read/node-reads.js'

/** What on the node says an implementer runs there. */
interface NodeEvidence {
  reason: string
  /**
   * The evidence is the implementer's own rules being there, which it also programs when it leaves Services to
   * kube-proxy (Cilium's CILIUM_ chains as a CNI): it implements Services only where kube-proxy's rules are not.
   */
  onlyWithoutKubeProxy?: boolean
}

/**
 * One implementer of Kubernetes Services on a node (kube-proxy, or a dataplane that replaces it): which API objects
 * say it runs, how they and the node's own state are recognised, and what a person runs to look at its Services.
 * Adding one is a module and a row of SERVICE_IMPLEMENTERS.
 */
export interface ServiceImplementerAdapter {
  /** Its name in the report and the JSON (`nodes[].implementer.name`). */
  name: string
  /** As the report's prose names it. */
  title: string
  /**
   * The API objects it is recognised by: its agent's Pods (these namespaces, these labels), these ConfigMaps and the
   * keys of them it reads; the agent's environment variables and arguments it reads (a bundle keeps only these).
   */
  reads: ImplementerReads
  /** From the API objects alone: why it implements Services on `node`; undefined when they do not say so. */
  fromApi(objects: ImplementerObjects, cluster: ClusterState, node: string): string | undefined
  /** From what was read on the node alone; undefined when nothing there says it runs. */
  fromNode(obs: NodeObservation): NodeEvidence | undefined
  /** What a person runs to look at its Services on `node` (its own CLI), in prose. */
  look(objects: ImplementerObjects, node: string): string
  /**
   * Where its Service state is read live: the container of its agent's Pod (found by `reads`' first namespace that has
   * one on the node and its first agent labels) and the read made there, then the same read under older program names.
   */
  agent?: {container: string; reads: readonly NodeCommand[]}
}

/** A Pod on `node` whose labels include all of `labels`. */
export function agentPodOn(
  objects: ImplementerObjects,
  node: string,
  labels: Record<string, string>,
): V1Pod | undefined {
  return objects.pods.find(
    (p) =>
      p.spec?.nodeName === node &&
      Object.entries(labels).every(([k, v]) => p.metadata?.labels?.[k] === v) &&
      p.status?.phase !== 'Succeeded' &&
      p.status?.phase !== 'Failed',
  )
}

/** The Pod's containers (init containers are not the agent). */
export const containersOf = (pod: V1Pod): V1Container[] => pod.spec?.containers ?? []

/** The first of the ConfigMaps named (namespace/name) that was read. */
export function configMapOf(objects: ImplementerObjects, names: Array<{namespace: string; name: string}>) {
  return names
    .map((n) =>
      objects.configMaps.find((c: V1ConfigMap) => c.metadata?.namespace === n.namespace && c.metadata?.name === n.name),
    )
    .find((c) => c !== undefined)
}

/** Every chain of every table of the node's IPv4 and IPv6 iptables dumps whose name begins with `prefix`. */
export function chainsStartingWith(obs: NodeObservation, prefix: string): string[] {
  const out = new Set<string>()
  for (const dump of [obs.iptables, obs.ip6tables])
    for (const table of dump?.tableNames() ?? [])
      for (const chain of dump!.chainNamesStartingWith(table, prefix)) out.add(chain)
  return [...out].sort()
}

/** "CILIUM_FORWARD, CILIUM_INPUT, …" (the first few). */
export function someChains(chains: string[]): string {
  return chains.length > 3 ? `${chains.slice(0, 3).join(', ')}, …` : chains.join(', ')
}

/** `kubectl -n NS exec POD -- ARGS…` as prose, for the `look` of an agent Pod. */
export function execInPod(pod: V1Pod | undefined, fallback: string, args: string): string {
  return pod?.metadata?.name
    ? `kubectl -n ${pod.metadata.namespace ?? 'kube-system'} exec ${pod.metadata.name} -- ${args}`
    : `${fallback} (${args})`
}
