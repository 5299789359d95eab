import type {V1Node} from '@kubernetes/client-node'
import type {NodeWay, Reach} from '../model/reach.js'
import {sshConfigNames, transport, type AccessOptions, type ExecTransport} from '../node/transport/transports.js'
import type {NodeReadVia} from './choose-transport.js'
import type {ClusterOptions} from './live-options.js'
import {nodeAddress} from './node-address.js'

/** kubectl with the user's --kubeconfig and --context, as printed commands repeat them. */
export function kubectlOf(flags: {kubeconfig?: string; context?: string}): string[] {
  return [
    'kubectl',
    ...(flags.kubeconfig ? ['--kubeconfig', flags.kubeconfig] : []),
    // A snapshot's context comes from its manifest: joined to its flag, a value like `-v9` stays the flag's value.
    ...(flags.context
      ? flags.context.startsWith('-')
        ? [`--context=${flags.context}`]
        : ['--context', flags.context]
      : []),
  ]
}

/** The flags the user gave for reaching the cluster and the nodes: printed commands repeat them. */
export type ReachFlags = Pick<ClusterOptions, 'kubeconfig' | 'context'> & Pick<AccessOptions, 'sshConfig'>

/**
 * How the user reaches what a live run read, the way it read it (each transport's reach rule): kubectl with their
 * --kubeconfig/--context; a node read over SSH by the name their SSH config gives it (with `-F FILE` when --ssh-config
 * was given), else by the address the transport connected to (the node's address from the API, which the same config
 * then applies to); a node read through a Pod that stays by `kubectl exec` into that Pod; a node not read: no command.
 */
export async function liveReach(flags: ReachFlags, readVia: Map<string, NodeReadVia>, nodes: V1Node[]): Promise<Reach> {
  return reachOf(await liveReachData(flags, readVia, nodes))
}

/** A Reach as plain data (for a scan's worker threads): kubectl, each node's way, and the way of any other node. */
export interface ReachData {
  kubectl: string[]
  ways: Map<string, NodeWay>
  /** A node not in `ways`: over ssh by its name (a snapshot's nodes), or not at all (a live run's unread nodes). */
  others: 'ssh-by-name' | 'none'
}

export function reachOf(data: ReachData): Reach {
  const other = (name: string): NodeWay =>
    data.others === 'ssh-by-name' ? {via: 'ssh', ssh: ['ssh'], host: name} : {via: 'none'}
  return {kubectl: data.kubectl, node: (name) => data.ways.get(name) ?? other(name)}
}

export async function liveReachData(
  flags: ReachFlags,
  readVia: Map<string, NodeReadVia>,
  nodes: V1Node[],
): Promise<ReachData> {
  const bySsh = [...readVia.values()].some((v) => v.transport && transport(v.transport).reach.by === 'ssh')
  const named = bySsh ? await sshConfigNames(flags.sshConfig) : () => false
  const ways = new Map<string, NodeWay>()
  for (const [name, via] of readVia) {
    const rule = via.transport ? transport(via.transport).reach : undefined
    if (rule?.by === 'ssh') {
      const node = nodes.find((n) => n.metadata?.name === name)
      const host = named(name) ? name : ((node && nodeAddress(node)) ?? name)
      ways.set(name, {via: 'ssh', ssh: ['ssh', ...(flags.sshConfig ? ['-F', flags.sshConfig] : [])], host})
      continue
    }
    const pod = rule?.by === 'exec' ? rule.pod(via.address) : undefined
    ways.set(name, pod ? {via: via.transport as ExecTransport, namespace: pod.namespace, pod: pod.name} : {via: 'none'})
  }
  return {kubectl: kubectlOf(flags), ways, others: 'none'}
}

/** For a snapshot: the live cluster it was recorded from (the manifest's context), each node by its name over ssh. */
export function snapshotReach(context: string | undefined): Reach {
  return reachOf(snapshotReachData(context))
}

export function snapshotReachData(context: string | undefined): ReachData {
  return {kubectl: kubectlOf({context}), ways: new Map(), others: 'ssh-by-name'}
}
