import type {PodSandbox} from './apiserver-streams.js'
import type {NetnsLab} from './netns-lab.js'

type PodLike = {metadata?: {name?: string}; spec?: unknown}
type PodSpec = {
  hostNetwork?: boolean
  nodeName?: string
  volumes?: {name: string; hostPath?: {path?: string}}[]
  containers?: {volumeMounts?: {name: string; mountPath: string}[]}[]
}

/** A pod's hostPath mounts (its first container's), mount path → host path. */
function hostMounts(spec: PodSpec): Record<string, string> {
  const out: Record<string, string> = {}
  for (const m of spec.containers?.[0]?.volumeMounts ?? []) {
    const path = spec.volumes?.find((v) => v.name === m.name)?.hostPath?.path
    if (path) out[m.mountPath] = path
  }
  return out
}

/**
 * Maps the lab's pods to the network namespaces the lab created: a host-network pod (kube-proxy, a debug pod)
 * runs in its node's namespace, a lab pod in its own; anything else gets no sandbox (its exec is refused).
 * `missingCommands` names, per pod-name prefix, the commands its image lacks.
 */
export function labPodSandbox(
  lab: NetnsLab,
  missingCommands: Record<string, string[]> = {},
): (pod: PodLike) => PodSandbox | undefined {
  return (pod) => {
    const name = pod.metadata?.name ?? ''
    const spec = (pod.spec ?? {}) as PodSpec
    const missing = Object.entries(missingCommands).find(([prefix]) => name.startsWith(prefix))?.[1]
    if (spec.hostNetwork && spec.nodeName && lab.namespaces.includes(lab.nodeNs(spec.nodeName)))
      return {netns: lab.nodeNs(spec.nodeName), missingCommands: missing, hostMounts: hostMounts(spec)}
    if (lab.pods.some((p) => p.name === name)) return {netns: lab.podNs(name), missingCommands: missing}
    return undefined
  }
}
