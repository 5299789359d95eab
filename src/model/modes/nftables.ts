import type {NodeObservation} from '../../node/observation.js'
import {NftTracer} from '../../trace/nft-tracer.js'
import type {IptablesOwners} from '../../trace/netfilter-tracer.js'
import type {IptablesSave} from '../../parse/iptables-save.js'
import type {NftRuleset} from '../../parse/nft-ruleset.js'
import {NFT_VOCABULARY, nftDataplane} from '../nft-dataplane.js'
import {readNftFile, walkError} from './dump-files.js'
import {familyLabel, type NodeFacts, type ProxyModeAdapter} from './mode.js'

const table = (obs: NodeObservation, facts: NodeFacts) => obs.nft?.table(`${facts.family} kube-proxy`)

/** Whether every table of an iptables save is a table of the ruleset (iptables-nft's tables are nftables tables). */
function inRuleset(rs: NftRuleset, dump: IptablesSave, family: 'ip' | 'ip6'): boolean {
  const names = dump.tableNames()
  return names.length > 0 && names.every((t) => rs.table(`${family} ${t}`) !== undefined)
}

/**
 * The iptables tables of the family beside the ruleset, by backend: each backend's own save where both were read, else
 * the save `iptables-save` answered, by the backend its header names (a save that names none: iptables-nft's when
 * the ruleset holds its tables, else iptables-legacy's).
 */
function iptablesOwners(obs: NodeObservation, facts: NodeFacts): IptablesOwners {
  const rs = obs.nft
  const ipFamily = facts.family === 'ip6' ? 6 : 4
  const own = ipFamily === 6 ? obs.ip6tables : obs.iptables
  const backend = (b: 'nft' | 'legacy') => obs.backends?.find((x) => x.family === ipFamily && x.backend === b)?.dump
  const ownBackend =
    own === undefined || own.tableNames().length === 0
      ? undefined
      : own.backend !== 'unknown'
        ? own.backend
        : rs && inRuleset(rs, own, facts.family)
          ? 'nft'
          : 'legacy'
  const of = (b: 'nft' | 'legacy') => backend(b) ?? (ownBackend === b ? own : undefined)
  const nonEmpty = (d: IptablesSave | undefined) => (d && d.tableNames().length > 0 ? d : undefined)
  const owners: IptablesOwners = {}
  const nft = nonEmpty(of('nft'))
  const legacy = nonEmpty(of('legacy'))
  if (nft) owners.nft = nft
  if (legacy) owners.legacy = legacy
  return owners
}

export const nftablesMode: ProxyModeAdapter<'nftables'> = {
  mode: 'nftables',
  recognise: (obs, facts) =>
    table(obs, facts)?.chains.get('services') ? {reason: 'the rules on the node'} : undefined,
  readable: (obs) => !!obs.nft,
  notRead: (facts) => ({reason: `${familyLabel(facts)} rules not read (nft list ruleset)`}),
  vocabulary: NFT_VOCABULARY,
  dataplane: (obs, facts) => nftDataplane(obs.nft!, facts.family, iptablesOwners(obs, facts)),
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
