import type {NodeObservation} from '../../node/observation.js'
import {nftDataplane} from '../nft-dataplane.js'
import type {NodeFacts, ProxyModeAdapter} from './mode.js'

const table = (obs: NodeObservation, facts: NodeFacts) => obs.nft?.table(`${facts.family} kube-proxy`)

export const nftablesMode: ProxyModeAdapter = {
  mode: 'nftables',
  recognise: (obs, facts) => (table(obs, facts)?.chains.get('services') ? 'the rules on the node' : undefined),
  readable: (obs) => !!obs.nft,
  dataplane: (obs, facts) => nftDataplane(obs.nft!, facts.family),
  leftovers(obs, facts, running) {
    if (running === 'ipvs')
      return obs.nft?.table(`${facts.family} kube-proxy`)
        ? `nftables table ${facts.family} kube-proxy from nftables mode`
        : undefined
    return table(obs, facts)?.chains.get('services')
      ? `nftables table ${facts.family} kube-proxy from nftables mode`
      : undefined
  },
}
