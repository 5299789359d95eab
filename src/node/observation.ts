import {SharedChainParses, type IptablesSave} from '../parse/iptables-save.js'
import type {NftRuleset} from '../parse/nft-ruleset.js'
import type {BridgeState} from '../parse/bridge-state.js'
import type {KubeProxyStatus} from '../parse/kube-proxy-status.js'
import type {IpsetState} from '../parse/ipset-save.js'
import type {VirtualServer} from '../parse/ipvsadm.js'
import type {DnsAnswer} from './probe/dns-probe.js'
import type {PathObservation} from './read/path-reads.js'
import type {CiliumFrontend} from '../parse/cilium-services.js'

export interface IpvsState {
  virtualServers: VirtualServer[]
  ipsets: IpsetState
  /** Addresses bound to kube-ipvs0; undefined when the device was not read. */
  vips?: string[]
  sysctls: Record<string, string>
  /** Why the sysctls were not read (sysctl missing or failing, printing nothing), in notReadReason's words. */
  sysctlsNotRead?: string
}

/**
 * The node's rules read ran and printed nothing (no table): 0 bytes, only white space, or no "*table" line. That is
 * no evidence of what kube-proxy programmed (an unprogrammed node still has tables), so the node is not read.
 */
export interface EmptyRulesRead {
  /** The command that printed nothing, as the node runs it: "iptables-save". */
  command: string
  /** Its bundle file. */
  file: string
  /** What it printed: "0 bytes", "only white space, 3 bytes", "no table, 40 bytes". */
  printed: string
  /**
   * The iptables backend another read shows kube-proxy's rules in (the nft ruleset holding iptables-nft's nat
   * KUBE-SERVICES, or that backend's own save): the node's `iptables-save` reads the other one.
   */
  rulesIn?: 'legacy' | 'nft'
}

export interface NodeObservation {
  name: string
  reachable: boolean
  error?: string
  /** Not reachable because its rules read returned nothing. */
  emptyRead?: EmptyRulesRead
  iptables?: IptablesSave
  /** ip6tables-save: the IPv6 rules of a Service's IPv6 family (iptables and IPVS modes); undefined when not read. */
  ip6tables?: IptablesSave
  nft?: NftRuleset
  /** The nft read held only kube-proxy's tables (nftables mode does not run there): other tables were not read. */
  nftKubeProxyTablesOnly?: true
  /** Why the nft ruleset was not read where nftables mode may run (nft missing or failing), in notReadReason's words. */
  nftNotRead?: string
  /** Each family's two iptables backends read one by one, where the node has both tools: leftovers hide in the unused one. */
  backends?: BackendSave[]
  /** Each backend save that could not run (not on the node, failing), with why in notReadReason's words. */
  backendsNotRead?: Array<{family: 4 | 6; backend: 'legacy' | 'nft'; reason: string}>
  /** IPVS mode: virtual servers, ipsets, addresses on kube-ipvs0, the sysctls it needs. */
  ipvs?: IpvsState
  network?: BridgeState
  dns?: DnsAnswer
  kubeProxy?: KubeProxyStatus
  /** Forwarding sysctls, routes to the endpoints, conntrack entries for the Service's addresses. */
  path?: PathObservation
  /** Where Cilium implements Services: its agent's `cilium-dbg service list -o json`; undefined when not read. */
  ciliumServices?: CiliumFrontend[]
  /** Where the implementer's agent (Cilium's) was to be read and could not be: why. */
  agentNotRead?: string
}

/**
 * One iptables backend's own save; `dump` is undefined when it is unreadable (which loses only the leftover check),
 * and `unreadable` then says why (the file and its parse error).
 */
export interface BackendSave {
  family: 4 | 6
  backend: 'legacy' | 'nft'
  readonly dump: IptablesSave | undefined
  readonly unreadable?: string
}

/**
 * Before a scan's Services are judged: the nodes' iptables-save (and ip6tables-save) dumps parse a chain once for all
 * of them where it is the same bytes at the same lines on each (see SharedChainParses). A dump that shares already
 * keeps its pool: asking again (for every Service) changes nothing.
 */
export function shareChainParses(observations: NodeObservation[]): void {
  let v4: SharedChainParses | undefined
  let v6: SharedChainParses | undefined
  for (const o of observations) {
    if (o.iptables && !o.iptables.sharesParses()) o.iptables.shareParses((v4 ??= new SharedChainParses()))
    if (o.ip6tables && !o.ip6tables.sharesParses()) o.ip6tables.shareParses((v6 ??= new SharedChainParses()))
  }
}

/** The save the node's own `iptables-save` (4) or `ip6tables-save` (6) answered; undefined when not read. */
export function familySave(obs: NodeObservation, family: 4 | 6): IptablesSave | undefined {
  return family === 6 ? obs.ip6tables : obs.iptables
}

/** After one Service of a scan is judged: each dump drops the parsed chains only that Service asked for. */
export function forgetOneOffChains(observations: NodeObservation[]): void {
  for (const o of observations) {
    o.iptables?.forgetOneOffChains()
    o.ip6tables?.forgetOneOffChains()
    for (const b of o.backends ?? []) b.dump?.forgetOneOffChains()
  }
}
