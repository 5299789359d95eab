/** The files one node's folder of a bundle holds. */
export const NODE_FILES = {
  iptablesSave: 'iptables-save.txt',
  ip6tablesSave: 'ip6tables-save.txt',
  nftRuleset: 'nft-ruleset.txt',
  /** Where nftables mode does not run: kube-proxy's own nft tables only (`nft list table ip|ip6 kube-proxy`), its leftovers. */
  nftKubeProxyTables: 'nft-kube-proxy-tables.txt',
  /** Where the whole ruleset mattered (nftables mode, or the mode unknown) and nft could not answer: its #kpd-not-read line. */
  nftNotRead: 'nft-not-read.txt',
  /**
   * Each iptables backend save that could not run (not on the node, failing): its #kpd-not-read line, one a line. Not in
   * the save's own file, which an older build would read as an empty dump.
   */
  backendsNotRead: 'iptables-backends-not-read.txt',
  iptablesLegacySave: 'iptables-legacy-save.txt',
  iptablesNftSave: 'iptables-nft-save.txt',
  ip6tablesLegacySave: 'ip6tables-legacy-save.txt',
  ip6tablesNftSave: 'ip6tables-nft-save.txt',
  ipvsadm: 'ipvsadm.txt',
  ipset: 'ipset.txt',
  kubeIpvs0: 'kube-ipvs0.txt',
  sysctl: 'sysctl.txt',
  network: 'network.txt',
  /** libcni's result cache as `grep -r -H` printed it (pod IP → host veth). */
  cniResults: 'cni-results.txt',
  dns: 'dns.json',
  kubeProxy: 'kube-proxy.json',
  /** Packet-path reads (sysctls, routes, route lookups, conntrack), raw, with exit codes and stderr. */
  pathReads: 'path-reads.json',
  /** Where Cilium implements Services: its agent's `cilium-dbg service list -o json`. */
  ciliumServices: 'cilium-services.json',
  /** Where another implementer's agent was to be read live and could not be: why, in one line. */
  agentNotRead: 'agent-not-read.txt',
  error: 'error.txt',
} as const

export type NodeFile = (typeof NODE_FILES)[keyof typeof NODE_FILES]

/** Whether recorded nft output is `nft -j` JSON (the nft files hold either form; the content tells them apart). */
export function isNftJson(out: Buffer): boolean {
  return out.toString('utf8', 0, Math.min(out.length, 64)).trimStart().startsWith('{')
}

/** One node's raw reads, in memory, by bundle file name: what `collect` writes and `--snapshot` reads back. */
export type NodeRecording = Map<NodeFile, Buffer>

/** The recording of a node that could not be read: its first error line. */
export function errorRecording(message: string): NodeRecording {
  return new Map([[NODE_FILES.error, Buffer.from(message.split('\n')[0] + '\n')]])
}
