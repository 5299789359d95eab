import type {NodeObservation} from '../../node/observation.js'
import {NftTracer} from '../../trace/nft-tracer.js'
import {NFT_VOCABULARY, nftDataplane} from '../nft-dataplane.js'
import {readNftFile, walkError} from './dump-files.js'
import {familyLabel, type NodeFacts, type ProxyModeAdapter} from './mode.js'

const table = (obs: NodeObservation, facts: NodeFacts) => obs.nft?.table(`${facts.family} kube-proxy`)

export const nftablesMode: ProxyModeAdapter<'nftables'> = {
  mode: 'nftables',
  recognise: (obs, facts) =>
    table(obs, facts)?.chains.get('services') ? {reason: 'the rules on the node'} : undefined,
  readable: (obs) => !!obs.nft,
  notRead: (facts) => ({reason: `${familyLabel(facts)} rules not read (nft list ruleset)`}),
  vocabulary: NFT_VOCABULARY,
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
  fromFiles: {
    picks: 'nft',
    build(files, {localAddresses}) {
      const {ruleset, notes} = readNftFile(files.nft!)
      return {
        tracer: new NftTracer(ruleset, {localAddresses}),
        notes,
        inputLines: (result) => result,
        walkError: (e) => walkError(e, files.nft!),
        close: () => undefined,
      }
    },
  },
}
