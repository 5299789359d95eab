import type {V1Node} from '@kubernetes/client-node'
import type {NodeWay, Reach} from '../model/reach.js'
import {sshConfigNames} from '../node/transport/transports.js'
import type {NodeReadVia} from './choose-transport.js'
import {nodeAddress} from './node-address.js'

/** The flags the user gave for reaching the cluster and the nodes: printed commands repeat them. */
export interface ReachFlags {
  kubeconfig?: string
  context?: string
  sshConfig?: string
}

function kubectl(flags: ReachFlags): string[] {
  return [
    'kubectl',
    ...(flags.kubeconfig ? ['--kubeconfig', flags.kubeconfig] : []),
    ...(flags.context ? ['--context', flags.context] : []),
  ]
}

/** `pod NAMESPACE/NAME`, as the kube-proxy transport describes where it read. */
function kubeProxyPod(address: string | null): {namespace: string; pod: string} | undefined {
  const m = /^pod ([^/\s]+)\/(\S+)$/.exec(address ?? '')
  return m ? {namespace: m[1], pod: m[2]} : undefined
}

/**
 * How the user reaches what a live run read, the way it read it: kubectl with their --kubeconfig/--context; a node SSH
 * read by the name their SSH config gives it (with `-F FILE` when --ssh-config was given), else by the address the
 * transport connected to (the node's address from the API, which the same config then applies to); a node read through
 * kube-proxy's Pod by `kubectl exec` into that Pod; a node not read: no command.
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
    data.others === 'ssh-by-name' ? {via: 'ssh', ssh: ['ssh', name]} : {via: 'none'}
  return {kubectl: data.kubectl, node: (name) => data.ways.get(name) ?? other(name)}
}

export async function liveReachData(
  flags: ReachFlags,
  readVia: Map<string, NodeReadVia>,
  nodes: V1Node[],
): Promise<ReachData> {
  const viaSsh = [...readVia.values()].some((v) => v.transport === 'ssh')
  const named = viaSsh ? await sshConfigNames(flags.sshConfig) : () => false
  const ways = new Map<string, NodeWay>()
  for (const [name, via] of readVia) {
    if (via.transport === 'ssh') {
      const address = nodes.find((n) => n.metadata?.name === name)
      const host = named(name) ? name : ((address && nodeAddress(address)) ?? name)
      ways.set(name, {via: 'ssh', ssh: ['ssh', ...(flags.sshConfig ? ['-F', flags.sshConfig] : []), host]})
    } else if (via.transport === 'kube-proxy') {
      const pod = kubeProxyPod(via.address)
      ways.set(name, pod ? {via: 'kube-proxy', ...pod} : {via: 'none'})
    } else ways.set(name, {via: 'none'})
  }
  return {kubectl: kubectl(flags), ways, others: 'none'}
}

/** For a snapshot: the live cluster it was recorded from (the manifest's context), each node by its name over ssh. */
export function snapshotReach(context: string | undefined): Reach {
  return reachOf(snapshotReachData(context))
}

export function snapshotReachData(context: string | undefined): ReachData {
  return {kubectl: kubectl({context}), ways: new Map(), others: 'ssh-by-name'}
}
