/**
 * The only commands the doctor runs on a node. All are read-only; none is built from user input.
 * `sudo -n` is prefixed when the SSH user is not root, so a password prompt fails at once instead of hanging.
 */
export const NODE_COMMANDS = {
  uid: 'id -u',
  iptablesSave: 'iptables-save',
  nftRulesetJson: 'nft -j list ruleset',
  nftRuleset: 'nft list ruleset',
  iptablesLegacySave: 'iptables-legacy-save',
  iptablesNftSave: 'iptables-nft-save',
  ipvsadm: 'ipvsadm -Sn',
  ipsetSave: 'ipset save',
  kubeIpvs0: 'ip -o addr show dev kube-ipvs0',
  sysctls: 'sysctl net.ipv4.ip_forward net.ipv4.vs.conntrack net.ipv4.vs.conn_reuse_mode net.ipv4.vs.expire_nodest_conn net.ipv4.conf.all.arp_ignore net.ipv4.conf.all.arp_announce',
  network: [
    "echo '## hairpin'",
    'for f in /sys/class/net/*/brif/*/hairpin_mode; do [ -e "$f" ] && echo "$f $(cat "$f")"; done',
    "echo '## links'",
    'ip -o link show',
    "echo '## neigh'",
    'ip neigh show',
    "echo '## fdb'",
    'bridge fdb show 2>/dev/null',
    'true',
  ].join('; '),
} as const

export type NodeCommand = keyof typeof NODE_COMMANDS

const NEEDS_ROOT: ReadonlySet<NodeCommand> = new Set(['iptablesSave', 'nftRulesetJson', 'nftRuleset', 'iptablesLegacySave', 'iptablesNftSave', 'ipvsadm', 'ipsetSave'])

export function commandLine(cmd: NodeCommand, isRoot: boolean): string {
  const line = NODE_COMMANDS[cmd]
  return NEEDS_ROOT.has(cmd) && !isRoot ? `sudo -n ${line}` : line
}

const DNS_NAME = /^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$/
const IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/

/** The by-hand DNS lookups, for nodes whose sshd refuses port forwarding. Arguments are validated, never shell-quoted input. */
export function dnsLookupCommand(name: string, server: string): string {
  if (!DNS_NAME.test(name) || !IPV4.test(server)) throw new Error(`refusing to build a DNS command for "${name}" @ "${server}"`)
  return `if command -v dig >/dev/null; then dig +short +tcp +time=2 +tries=1 ${name} A @${server}; elif command -v nslookup >/dev/null; then nslookup -vc -timeout=2 ${name} ${server}; else echo 'kpd: no dig or nslookup' >&2; exit 127; fi`
}
