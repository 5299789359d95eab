import type {KubeConfig} from '@kubernetes/client-node'
import {argvOf, outputCapBytes} from '../../node-commands.js'
import {readOf, type NodeCommand} from '../../read/node-reads.js'
import {execInPod} from '../../../kube/exec-in-pod.js'
import {KubeCommandNotFoundError, KubeForbiddenError, KubeTimeoutError} from '../../../kube/errors.js'
import {podsByNode, type PodOnNode, type PodRef} from './find-pod.js'

/**
 * An implementer's agent on each node (Cilium's), and the read made in it: its Pods are found as kube-proxy's are (a
 * running, host-network Pod on that node owned by a DaemonSet of its namespace), then an allow-listed read runs in its
 * container as argv, no shell.
 */
export interface AgentRead {
  /** "Cilium's agent". */
  title: string
  /** The namespaces its DaemonSet may be in, in the order they are looked in. */
  namespaces: readonly string[]
  labelSelector: string
  container: string
  /** The read, then the same read under its program's older names: each asked where the agent lacks the one before. */
  reads: readonly NodeCommand[]
}

/** What the agent answered: the read's output, or why it was not read (one line). */
export type AgentAnswer =
  {kind: 'read'; stdout: Buffer; pod: string; argv: readonly string[]} | {kind: 'not-read'; reason: string}

const firstLine = (text: string) => text.trim().split('\n')[0] ?? ''

/**
 * Reads each node's agent: one Pod list per namespace (shared by every node), then the read in the node's agent Pod,
 * each call bounded by `timeoutMs`. Never throws: a refusal (403), no agent Pod, a program missing from the agent, a
 * failed run are the answer's reason.
 */
export function agentReader(
  kubeConfig: KubeConfig,
  timeoutMs: number,
): (node: string, agent: AgentRead) => Promise<AgentAnswer> {
  const lookups = new Map<string, (node: string) => Promise<PodOnNode>>()
  const lookup = (agent: AgentRead, namespace: string) => {
    const key = `${namespace} ${agent.labelSelector} ${agent.container}`
    let found = lookups.get(key)
    if (!found) {
      found = podsByNode(
        kubeConfig,
        {namespace, labelSelector: agent.labelSelector, container: agent.container, whose: agent.title},
        timeoutMs,
      )
      lookups.set(key, found)
    }
    return found
  }
  return async (node, agent) => {
    const pod = await findAgent(node, agent, lookup)
    if ('reason' in pod) return {kind: 'not-read', reason: pod.reason}
    return readIn(kubeConfig, pod, agent, timeoutMs)
  }
}

async function findAgent(
  node: string,
  agent: AgentRead,
  lookup: (agent: AgentRead, namespace: string) => (node: string) => Promise<PodOnNode>,
): Promise<PodRef | {reason: string}> {
  const reasons: string[] = []
  let noneAnywhere = true
  for (const namespace of agent.namespaces) {
    try {
      const found = await lookup(agent, namespace)(node)
      if (found.kind === 'found') return found.pod
      if (!found.reason.startsWith('no Pod of ')) noneAnywhere = false
      reasons.push(found.reason)
    } catch (e) {
      noneAnywhere = false
      reasons.push(
        e instanceof KubeForbiddenError
          ? `RBAC forbids ${e.verb} on ${e.resource} in namespace "${e.namespace}" (403): needed to find ${agent.title}'s Pod`
          : `${agent.title}'s Pod not found: ${firstLine((e as Error).message)}`,
      )
    }
  }
  if (noneAnywhere)
    return {
      reason: `no Pod of ${agent.title} (-l ${agent.labelSelector} in ${agent.namespaces.join(' or ')}) runs on ${node}`,
    }
  return {reason: reasons.filter((r) => !r.startsWith('no Pod of ')).join('; ')}
}

async function readIn(kubeConfig: KubeConfig, pod: PodRef, agent: AgentRead, timeoutMs: number): Promise<AgentAnswer> {
  const where = `${agent.title}'s Pod ${pod.namespace}/${pod.name}`
  const missing: string[] = []
  for (const key of agent.reads) {
    const argv = argvOf(key)
    try {
      const r = await execInPod(kubeConfig, pod.namespace, pod.name, pod.container, [...argv], {
        timeoutMs,
        maxOutputBytes: outputCapBytes(readOf(key)),
      })
      if (r.exitCode === 127) {
        missing.push(argv[0])
        continue
      }
      if (r.exitCode !== 0)
        return {
          kind: 'not-read',
          reason: `${argv.join(' ')} in ${where} exited ${r.exitCode}: ${firstLine(r.stderr) || 'no message'}`,
        }
      return {kind: 'read', stdout: Buffer.from(r.stdout), pod: `${pod.namespace}/${pod.name}`, argv}
    } catch (e) {
      if (e instanceof KubeCommandNotFoundError) {
        missing.push(argv[0])
        continue
      }
      if (e instanceof KubeForbiddenError)
        return {
          kind: 'not-read',
          reason: `RBAC forbids ${e.verb} on ${e.resource} in namespace "${e.namespace}" (403): needed to read ${where}`,
        }
      if (e instanceof KubeTimeoutError)
        return {kind: 'not-read', reason: `${argv[0]} in ${where} did not finish within ${timeoutMs / 1000}s`}
      return {kind: 'not-read', reason: `${argv[0]} in ${where} failed: ${firstLine((e as Error).message)}`}
    }
  }
  return {kind: 'not-read', reason: `neither ${missing.join(' nor ')} is in the container ${pod.container} of ${where}`}
}
