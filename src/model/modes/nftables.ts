import {familySave, type NodeObservation} from '../../node/observation.js'
import {NftTracer} from '../../trace/nft-tracer.js'
import {NetfilterTracer, type IptablesOwners} from '../../trace/netfilter-tracer.js'
import {familyOf} from '../../net/address.js'
import type {IptablesSave} from '../../parse/iptables-save.js'
import type {NftRuleset} from '../../parse/nft-ruleset.js'
import {NFT_VOCABULARY, nftDataplane} from '../nft-dataplane.js'
import {readIpsetFile, readIptablesFile, readNftFile, walkError, withInputLines} from './dump-files.js'
import {familyLabel, type NodeFacts, type ProxyModeAdapter} from './mode.js'

const table = (obs: NodeObservation, facts: NodeFacts) => obs.nft?.table(`${facts.family} kube-proxy`)

/** Whether every table of an iptables save is a table of the ruleset (iptables-nft's tables are nftables tables). */
function inRuleset(rs: NftRuleset, dump: IptablesSave, family: 'ip' | 'ip6'): boolean {
  const names = dump.tableNames()
  return names.length > 0 && names.every((t) => rs.table(`${family} ${t}`) !== undefined)
}

/** The backend an iptables save's header names; else iptables-nft's when the ruleset holds its tables, else legacy's. */
function backendOf(rs: NftRuleset | undefined, dump: IptablesSave, family: 'ip' | 'ip6'): 'nft' | 'legacy' {
  if (dump.backend !== 'unknown') return dump.backend
  return rs && inRuleset(rs, dump, family) ? 'nft' : 'legacy'
}

/**
 * The iptables tables of the family beside the ruleset, by backend: each backend's own save where both were read, else
 * the save `iptables-save` answered, by the backend its header names (a save that names none: iptables-nft's when
 * the ruleset holds its tables, else iptables-legacy's).
 */
function iptablesOwners(obs: NodeObservation, facts: NodeFacts): IptablesOwners {
  const rs = obs.nft
  const ipFamily = facts.family === 'ip6' ? 6 : 4
  const own = familySave(obs, ipFamily)
  const backend = (b: 'nft' | 'legacy') => obs.backends?.find((x) => x.family === ipFamily && x.backend === b)?.dump
  const ownBackend = own === undefined || own.tableNames().length === 0 ? undefined : backendOf(rs, own, facts.family)
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
  readFailed: (obs) => (obs.nft ? undefined : obs.nftNotRead),
  notRead: (facts, _source, obs) => ({
    reason: `${familyLabel(facts)} rules not read (${obs.nftNotRead ?? 'nft list ruleset'})`,
  }),
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
    // The node's iptables-save beside its ruleset: every table walked in the kernel's order (see NetfilterTracer).
    takes: ['iptables-save', 'ipset-save'],
    build(files, {localAddresses, dst}) {
      const {ruleset, notes} = readNftFile(files.nft!)
      let rules
      let ipsets
      try {
        rules = files['iptables-save'] === undefined ? undefined : readIptablesFile(files['iptables-save'], dst)
        ipsets = readIpsetFile(files['ipset-save'])
      } catch (e) {
        rules?.dump.close()
        ruleset.close()
        throw e
      }
      const family = familyOf(dst) === 6 ? 'ip6' : 'ip'
      const owners: IptablesOwners = {}
      if (rules) owners[backendOf(ruleset, rules.dump, family)] = rules.dump
      if (ipsets) owners.ipsets = ipsets
      return {
        tracer: rules
          ? new NetfilterTracer(ruleset, owners, family, {localAddresses})
          : new NftTracer(ruleset, {localAddresses}),
        notes: [...notes, ...(rules?.paste?.notes ?? [])],
        inputLines: (result) => (rules ? withInputLines(result, rules) : result),
        walkError: (e) => (rules ? walkError(e, rules.file, rules.paste) : walkError(e, files.nft!)),
        close: () => {
          rules?.dump.close()
          ruleset.close()
        },
      }
    },
  },
}
