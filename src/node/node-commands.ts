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

declare const allowListed: unique symbol
/** A command line built here from an allow-list key: the only thing a transport's exec accepts. */
export type CommandLine = string & {readonly [allowListed]: true}

export function commandLine(cmd: NodeCommand, isRoot: boolean): CommandLine {
  if (!Object.hasOwn(NODE_COMMANDS, cmd)) throw new Error(`"${String(cmd)}" is not an allow-listed node command`)
  const line = NODE_COMMANDS[cmd]
  return (NEEDS_ROOT.has(cmd) && !isRoot ? `sudo -n ${line}` : line) as CommandLine
}

const DNS_NAME = /^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$/
const IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/

/** The by-hand DNS lookups, for nodes whose sshd refuses port forwarding. Arguments are validated, never shell-quoted input. */
export function dnsLookupCommand(name: string, server: string): CommandLine {
  if (!DNS_NAME.test(name) || !IPV4.test(server)) throw new Error(`refusing to build a DNS command for "${name}" @ "${server}"`)
  return `if command -v dig >/dev/null; then dig +short +tcp +time=2 +tries=1 ${name} A @${server}; elif command -v nslookup >/dev/null; then nslookup -vc -timeout=2 ${name} ${server}; else echo 'kpd: no dig or nslookup' >&2; exit 127; fi` as CommandLine
}

/** Kernel state files a transport may read: sysctls and network device attributes, nothing else. */
const READABLE_FILE = /^\/(proc\/sys|sys\/class\/net)(\/[A-Za-z0-9_.:@-]+)+$/

export function isReadableNodeFile(path: string): boolean {
  return READABLE_FILE.test(path) && !path.split('/').some((part) => part === '.' || part === '..')
}

/** `cat` of one allow-listed kernel file; the path is validated, then quoted all the same. */
export function readFileCommand(path: string): CommandLine {
  if (!isReadableNodeFile(path)) throw new Error(`refusing to read "${path}" on a node: only /proc/sys/… and /sys/class/net/… files are allow-listed`)
  return `cat -- '${path}'` as CommandLine
}

/** Commands that take validated arguments, and the arguments each takes. */
interface NodeQueryArgs {
  dnsLookup: {name: string; server: string}
}
type NodeQuery = keyof NodeQueryArgs

/** Every key a transport's `run` accepts. */
export type NodeCommandKey = NodeCommand | NodeQuery

export type ArgsOf<K extends NodeCommandKey> = K extends NodeQuery ? [args: NodeQueryArgs[K]] : []

const QUERIES: {[K in NodeQuery]: (args: NodeQueryArgs[K]) => CommandLine} = {
  dnsLookup: (a) => dnsLookupCommand(a.name, a.server),
}

export function isNodeCommandKey(key: unknown): key is NodeCommandKey {
  return typeof key === 'string' && (Object.hasOwn(NODE_COMMANDS, key) || Object.hasOwn(QUERIES, key))
}

/** The one place a key (and its arguments) becomes a command line; anything off the allow-list throws. */
export function buildCommandLine<K extends NodeCommandKey>(key: K, isRoot: boolean, ...args: ArgsOf<K>): CommandLine {
  if (!isNodeCommandKey(key)) throw new Error(`"${String(key)}" is not an allow-listed node command`)
  if (Object.hasOwn(QUERIES, key)) {
    const a = args[0]
    if (a === undefined || typeof a !== 'object') throw new Error(`node command ${key} needs its arguments`)
    return QUERIES[key as NodeQuery](a as NodeQueryArgs[NodeQuery])
  }
  return commandLine(key as NodeCommand, isRoot)
}
