import type {NodeObservation} from '../../node/observation.js'
import {ipvsSetName} from '../chain-names.js'
import {ipvsDataplane} from '../ipvs-dataplane.js'
import type {NodeFacts, ProxyModeAdapter} from './mode.js'

const addressFamily = (facts?: NodeFacts) => (facts?.family === 'ip6' ? 6 : 4)
const glueDump = (obs: NodeObservation, facts?: NodeFacts) => (facts?.family === 'ip6' ? obs.ip6tables : obs.iptables)

/** IPVS mode's iptables glue: the KUBE-NODE-PORT chain, or the family's KUBE-CLUSTER-IP ipset match in KUBE-SERVICES. */
export function ipvsGlue(obs: NodeObservation, facts?: NodeFacts): boolean {
  const d = glueDump(obs, facts)
  const clusterIpSet = ipvsSetName('KUBE-CLUSTER-IP', addressFamily(facts))
  return !!(
    d?.hasChain('nat', 'KUBE-NODE-PORT') ||
    d?.rules('nat', 'KUBE-SERVICES').some((r) => r.text.includes(`--match-set ${clusterIpSet} `))
  )
}

export const ipvsMode: ProxyModeAdapter = {
  mode: 'ipvs',
  recognise: (obs, facts) =>
    ipvsGlue(obs, facts) || ipvsGlue(obs) ? 'the rules on the node (KUBE-CLUSTER-IP ipset match)' : undefined,
  // ipvsadm lists both families' virtual servers; each family's glue is its own dump (ip6tables-save for IPv6).
  readable: (obs, facts) => !!obs.ipvs && !!glueDump(obs, facts),
  dataplane: (obs, facts) =>
    ipvsDataplane(glueDump(obs, facts)!, obs.ipvs!, facts.nodeAddress, obs.name, addressFamily(facts)),
  leftovers: () => undefined,
}
