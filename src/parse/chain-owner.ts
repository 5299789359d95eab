import type {IptablesSave} from './iptables-save.js'

/** Who writes a chain, judged from its name the way each project names its chains. */
export type ChainOwner =
  | 'built-in'
  | 'kube-proxy'
  | 'kubelet'
  | 'Docker'
  | 'Calico'
  | 'kube-router'
  | 'Antrea'
  | 'Cilium'
  | 'Flannel'
  | 'Weave Net'
  | 'hand-written'

const BUILT_IN = new Set(['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING'])
/** kubelet's own chains share kube-proxy's KUBE- prefix. */
const KUBELET = new Set(['KUBE-FIREWALL', 'KUBE-KUBELET-CANARY', 'KUBE-IPTABLES-HINT'])

/** Prefixes checked in order: the more specific KUBE- forms (kube-router's) before kube-proxy's KUBE-. */
const PREFIXES: [string, ChainOwner][] = [
  ['KUBE-ROUTER-', 'kube-router'],
  ['KUBE-POD-FW-', 'kube-router'],
  ['KUBE-NWPLCY-', 'kube-router'],
  ['KUBE-', 'kube-proxy'],
  ['DOCKER', 'Docker'],
  ['cali-', 'Calico'],
  ['ANTREA-', 'Antrea'],
  ['CILIUM_', 'Cilium'],
  ['FLANNEL-', 'Flannel'],
  ['WEAVE-', 'Weave Net'],
]

export function chainOwner(name: string): ChainOwner {
  if (BUILT_IN.has(name)) return 'built-in'
  if (KUBELET.has(name)) return 'kubelet'
  return PREFIXES.find(([prefix]) => name.startsWith(prefix))?.[1] ?? 'hand-written'
}

/** nftables tables named by their owner (iptables-nft's own tables, `ip filter` and the like, keep iptables' chain names). */
const NFT_TABLES: Record<string, ChainOwner> = {
  'kube-proxy': 'kube-proxy',
  calico: 'Calico',
  cilium: 'Cilium',
  antrea: 'Antrea',
  'kube-router': 'kube-router',
  flannel: 'Flannel',
}
const IPTABLES_TABLES = new Set(['raw', 'mangle', 'nat', 'filter', 'security'])

/**
 * Who owns the chain a trace step is in: by chain name in an iptables table (`filter`) or in one of iptables-nft's
 * tables (`ip filter`); by table name in any other nftables table (`ip kube-proxy`, `inet calico`); a table nobody
 * names is hand-written.
 */
export function stepChainOwner(table: string, chain: string): ChainOwner {
  const tableName = table.split(' ').pop()!
  if (IPTABLES_TABLES.has(tableName)) return chainOwner(chain)
  return NFT_TABLES[tableName] ?? 'hand-written'
}

export interface ChainSummary {
  chain: string
  /** ACCEPT/DROP for built-in chains, '-' for user chains. */
  policy: string
  owner: ChainOwner
  rules: number
}

/** Every chain of one table of a dump with its policy and owner, in dump order. */
export function tableChains(dump: IptablesSave, table = 'filter'): ChainSummary[] {
  return dump.chainNames(table).map((chain) => ({
    chain,
    policy: dump.policy(table, chain) ?? '-',
    owner: chainOwner(chain),
    rules: dump.ruleCount(table, chain),
  }))
}
