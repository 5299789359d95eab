import type {NodeObservation} from '../../node/bundle.js'
import {iptablesDataplane} from '../iptables-dataplane.js'
import {ipvsGlue} from './ipvs.js'
import type {ProxyModeAdapter} from './mode.js'

const hasServicesChain = (obs: NodeObservation) => !!obs.iptables?.hasChain('nat', 'KUBE-SERVICES')

export const iptablesMode: ProxyModeAdapter = {
  mode: 'iptables',
  recognise: (obs) => (hasServicesChain(obs) && !ipvsGlue(obs) ? 'the rules on the node' : undefined),
  readable: (obs) => !!obs.iptables,
  dataplane: (obs) => iptablesDataplane(obs.iptables!),
  leftovers(obs, _facts, running) {
    if (running === 'ipvs') return obs.iptables?.chainNames('nat').some((c) => c.startsWith('KUBE-SVC-')) ? 'KUBE-SVC-* chains from iptables mode' : undefined
    return hasServicesChain(obs) ? 'iptables chains nat KUBE-SERVICES (and its KUBE-SVC/KUBE-SEP chains) from iptables mode' : undefined
  },
}
