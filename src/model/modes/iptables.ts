import type {NodeObservation} from '../../node/observation.js'
import {iptablesDataplane} from '../iptables-dataplane.js'
import {ipvsGlue} from './ipvs.js'
import type {NodeFacts, ProxyModeAdapter} from './mode.js'

/** The family's rules: iptables-save for IPv4, ip6tables-save for IPv6. */
const familyDump = (obs: NodeObservation, facts: NodeFacts) => (facts.family === 'ip6' ? obs.ip6tables : obs.iptables)
const hasServicesChain = (obs: NodeObservation, facts: NodeFacts) =>
  !!familyDump(obs, facts)?.hasChain('nat', 'KUBE-SERVICES')

export const iptablesMode: ProxyModeAdapter = {
  mode: 'iptables',
  recognise: (obs, facts) =>
    hasServicesChain(obs, facts) && !ipvsGlue(obs, facts) ? 'the rules on the node' : undefined,
  readable: (obs, facts) => !!familyDump(obs, facts),
  dataplane: (obs, facts) => iptablesDataplane(familyDump(obs, facts)!, facts.family),
  leftovers(obs, facts, running) {
    const tool = facts.family === 'ip6' ? 'ip6tables' : 'iptables'
    if (running === 'ipvs')
      return familyDump(obs, facts)
        ?.chainNames('nat')
        .some((c) => c.startsWith('KUBE-SVC-'))
        ? `KUBE-SVC-* chains from iptables mode (${tool})`
        : undefined
    return hasServicesChain(obs, facts)
      ? `${tool} chains nat KUBE-SERVICES (and its KUBE-SVC/KUBE-SEP chains) from iptables mode`
      : undefined
  },
}
