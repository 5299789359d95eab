import type {NodeObservation} from '../../node/bundle.js'
import {ipvsDataplane} from '../ipvs-dataplane.js'
import type {ProxyModeAdapter} from './mode.js'

/** IPVS mode's iptables glue: the KUBE-NODE-PORT chain, or the KUBE-CLUSTER-IP ipset match in KUBE-SERVICES. */
export function ipvsGlue(obs: NodeObservation): boolean {
  const d = obs.iptables
  return !!(d?.hasChain('nat', 'KUBE-NODE-PORT') || d?.rules('nat', 'KUBE-SERVICES').some((r) => r.text.includes('KUBE-CLUSTER-IP')))
}

export const ipvsMode: ProxyModeAdapter = {
  mode: 'ipvs',
  recognise: (obs) => (ipvsGlue(obs) ? 'the rules on the node (KUBE-CLUSTER-IP ipset match)' : undefined),
  readable: (obs) => !!obs.ipvs && !!obs.iptables,
  dataplane: (obs, facts) => ipvsDataplane(obs.iptables!, obs.ipvs!, facts.nodeAddress, obs.name),
  leftovers: () => undefined,
}
