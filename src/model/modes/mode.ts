import type {NodeObservation} from '../../node/observation.js'
import type {Dataplane} from '../dataplane.js'

export type ProxyMode = 'iptables' | 'nftables' | 'ipvs'

/** The address family being judged: nftables keeps one kube-proxy table per family, iptables one dump per family. */
export type TableFamily = 'ip' | 'ip6'

export interface NodeFacts {
  family: TableFamily
  /** The node's own address (NodePorts, IPVS node virtual servers). */
  nodeAddress?: string
}

/**
 * One kube-proxy mode: how its rules are recognised on a node, whether what was read is enough to judge it, and the
 * dataplane (desired-vs-programmed reading, tracer, vocabulary) it judges with. Adding a mode is one adapter and one
 * line in the registry.
 */
export interface ProxyModeAdapter {
  mode: ProxyMode
  /** Evidence on the node that kube-proxy runs this mode, as a reason for the report; undefined when there is none. */
  recognise(obs: NodeObservation, facts: NodeFacts): string | undefined
  /** What was read is enough to build this mode's dataplane for the family of `facts`. */
  readable(obs: NodeObservation, facts: NodeFacts): boolean
  dataplane(obs: NodeObservation, facts: NodeFacts): Dataplane
  /** This mode's rules left behind on a node that runs `running`, described; undefined when there are none. */
  leftovers(obs: NodeObservation, facts: NodeFacts, running: ProxyMode): string | undefined
}
