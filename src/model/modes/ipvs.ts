import type {NodeObservation} from '../../node/bundle.js'
import {ipvsDataplane} from '../ipvs-dataplane.js'
import type {NodeFacts, ProxyModeAdapter} from './mode.js'

/** IPVS mode's iptables glue: the KUBE-NODE-PORT chain, or the KUBE-CLUSTER-IP ipset match in KUBE-SERVICES. */
export function ipvsGlue(obs: NodeObservation, facts?: NodeFacts): boolean {
  const d = facts?.family === 'ip6' ? obs.ip6tables : obs.iptables
  return !!(d?.hasChain('nat', 'KUBE-NODE-PORT') || d?.rules('nat', 'KUBE-SERVICES').some((r) => r.text.includes('KUBE-CLUSTER-IP')))
}

export const ipvsMode: ProxyModeAdapter = {
  mode: 'ipvs',
  recognise: (obs, facts) => (ipvsGlue(obs, facts) || ipvsGlue(obs) ? 'the rules on the node (KUBE-CLUSTER-IP ipset match)' : undefined),
  // IPv6 virtual servers (their KUBE-6-* ipsets and ip6tables glue) are not judged yet: that family is said to be unchecked.
  readable: (obs, facts) => facts.family === 'ip' && !!obs.ipvs && !!obs.iptables,
  dataplane: (obs, facts) => ipvsDataplane(obs.iptables!, obs.ipvs!, facts.nodeAddress, obs.name),
  leftovers: () => undefined,
}
