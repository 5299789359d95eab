import {parseIp} from '../net/address.js'

/**
 * The only commands the doctor runs on a node. All are read-only; none is built from user input.
 * `sudo -n` is prefixed when the SSH user is not root, so a password prompt fails at once instead of hanging.
 */
export const NODE_COMMANDS = {
  uid: 'id -u',
  /** Whether the dumps can come back compressed (the SSH transport asks once per node). */
  hasGzip: 'command -v gzip',
  iptablesSave: 'iptables-save',
  /** Which iptables and backend answer `iptables` (`ip6tables`): whether the rules can be read chain by chain. */
  iptablesVersion: 'iptables -V',
  ip6tablesVersion: 'ip6tables -V',
  /** IPv6 rules (dual-stack and IPv6 Services): the same backend as iptables-save. */
  ip6tablesSave: 'ip6tables-save',
  nftRulesetJson: 'nft -j list ruleset',
  nftRuleset: 'nft list ruleset',
  /**
   * Which nft tables there are, at once: every table's header and its sets, no chains or rules (on a large
   * iptables-nft node listing one absent table takes over a second: nft fetches every chain first). kube-proxy's
   * nftables table always holds sets and maps, so it shows here even where a table without sets would not.
   */
  nftSets: 'nft list sets',
  iptablesLegacySave: 'iptables-legacy-save',
  iptablesNftSave: 'iptables-nft-save',
  ip6tablesLegacySave: 'ip6tables-legacy-save',
  ip6tablesNftSave: 'ip6tables-nft-save',
  ipvsadm: 'ipvsadm -Sn',
  ipsetSave: 'ipset save',
  kubeIpvs0: 'ip -o addr show dev kube-ipvs0',
  sysctls:
    'sysctl net.ipv4.ip_forward net.ipv4.vs.conntrack net.ipv4.vs.conn_reuse_mode net.ipv4.vs.expire_nodest_conn net.ipv4.conf.all.arp_ignore net.ipv4.conf.all.arp_announce',
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
  routeTable: 'ip route show',
  /** The IPv6 main table: read where the Service has IPv6 endpoints or an IPv6 ClusterIP. */
  routeTable6: 'ip -6 route show',
  /**
   * libcni's result cache (root-only: 0700/0600), every file as `PATH:LINE` lines: pod IP → host veth for the hairpin
   * check, there for idle Pods too. One program, fixed arguments; -r follows no symlink inside; -s: no folder, no output.
   */
  cniResults: 'grep -r -H -s . /var/lib/cni/results',
} as const

export type NodeCommand = keyof typeof NODE_COMMANDS

/**
 * Each iptables backend's own save command, per family: where a node has both backends, kube-proxy rules left in the
 * one that iptables-save (ip6tables-save) does not show still rewrite packets.
 */
export const BACKEND_SAVES = [
  {family: 4, backend: 'legacy', command: 'iptablesLegacySave'},
  {family: 4, backend: 'nft', command: 'iptablesNftSave'},
  {family: 6, backend: 'legacy', command: 'ip6tablesLegacySave'},
  {family: 6, backend: 'nft', command: 'ip6tablesNftSave'},
] as const satisfies ReadonlyArray<{family: 4 | 6; backend: 'legacy' | 'nft'; command: NodeCommand}>

/** The dumps, large and text: compressed on the wire where the node has gzip (see compressedCommandLine). */
const COMPRESSIBLE: ReadonlySet<NodeCommandKey> = new Set<NodeCommandKey>([
  'iptablesSave',
  'ip6tablesSave',
  'nftRulesetJson',
  'nftRuleset',
  'nftKubeProxyTable',
  'iptablesLegacySave',
  'iptablesNftSave',
  'ip6tablesLegacySave',
  'ip6tablesNftSave',
  'ipvsadm',
  'ipsetSave',
])

export function isCompressible(key: NodeCommandKey): boolean {
  return COMPRESSIBLE.has(key)
}

/**
 * How much longer than one step a dump may take: measured at 10,000 Services, iptables-nft-save takes about 10 s and
 * nftables mode's `nft list ruleset` about 47 s on a loaded 2-core machine (npm run bench), past the 20 s step.
 */
export const DUMP_STEPS = 4

/** How long one command may run: the step timeout, DUMP_STEPS of it for the dumps. */
export function commandTimeoutMs(key: NodeCommandKey, stepMs: number): number {
  return COMPRESSIBLE.has(key) ? stepMs * DUMP_STEPS : stepMs
}

/** The program a command line runs, for messages: past `{ ` (compressed) and `sudo -n`. */
export function programOf(line: string): string {
  return (
    line
      .replace(/^\{ /, '')
      .replace(/^sudo -n /, '')
      .split(' ')[0] ?? line
  )
}

/** What follows a compressed command's own output inside the stream: its exit status (the pipeline's is gzip's). */
const EXIT_TRAILER = '\n#kpd-exit '

/**
 * An allow-listed line whose output goes through `gzip -1` (kube-proxy's dumps shrink about 5×), its exit status
 * appended inside the compressed stream, after a newline, so the output itself comes back byte for byte.
 */
export function compressedCommandLine(line: CommandLine): CommandLine {
  return `{ ${line}; printf '${EXIT_TRAILER.replace('\n', '\\n')}%d\\n' "$?"; } | gzip -1` as CommandLine
}

/** Undoes compressedCommandLine: the output and the command's exit status (null when the stream was cut short). */
export function splitCompressedOutput(plain: Buffer): {code: number | null; stdout: Buffer} {
  const at = plain.lastIndexOf(EXIT_TRAILER)
  const m = at >= 0 ? /^(\d+)\n$/.exec(plain.subarray(at + EXIT_TRAILER.length).toString('latin1')) : null
  if (!m) return {code: null, stdout: plain}
  return {code: Number(m[1]), stdout: plain.subarray(0, at)}
}

const NEEDS_ROOT: ReadonlySet<NodeCommand> = new Set([
  'iptablesSave',
  'ip6tablesSave',
  'nftRulesetJson',
  'nftRuleset',
  'nftSets',
  'iptablesLegacySave',
  'iptablesNftSave',
  'ip6tablesLegacySave',
  'ip6tablesNftSave',
  'ipvsadm',
  'ipsetSave',
  'cniResults',
])

declare const allowListed: unique symbol
/** A command line built here from an allow-list key: the only thing a transport's exec accepts. */
export type CommandLine = string & {readonly [allowListed]: true}

export function commandLine(cmd: NodeCommand, isRoot: boolean): CommandLine {
  if (!Object.hasOwn(NODE_COMMANDS, cmd)) throw new Error(`"${String(cmd)}" is not an allow-listed node command`)
  const line = NODE_COMMANDS[cmd]
  return (NEEDS_ROOT.has(cmd) && !isRoot ? `sudo -n ${line}` : line) as CommandLine
}

const DNS_NAME = /^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$/
const DNS_SERVER = /^[0-9a-fA-F:.]+$/
const RECORD_TYPES: ReadonlySet<string> = new Set(['A', 'AAAA'])

/**
 * The by-hand DNS lookup of one record type, for nodes whose sshd refuses port forwarding. Arguments are validated,
 * never shell-quoted input.
 */
export function dnsLookupCommand(name: string, server: string, type: 'A' | 'AAAA'): CommandLine {
  if (!DNS_NAME.test(name) || !DNS_SERVER.test(server) || !parseIp(server) || !RECORD_TYPES.has(type))
    throw new Error(`refusing to build a DNS command for "${name}" ${type} @ "${server}"`)
  return `if command -v dig >/dev/null; then dig +short +tcp +time=2 +tries=1 ${name} ${type} @${server}; elif command -v nslookup >/dev/null; then nslookup -vc -timeout=2 -type=${type} ${name} ${server}; else echo 'kpd: no dig or nslookup' >&2; exit 127; fi` as CommandLine
}

/** Kernel state files a transport may read: sysctls and network device attributes, nothing else. */
const READABLE_FILE = /^\/(proc\/sys|sys\/class\/net)(\/[A-Za-z0-9_.:@-]+)+$/

export function isReadableNodeFile(path: string): boolean {
  return READABLE_FILE.test(path) && !path.split('/').some((part) => part === '.' || part === '..')
}

/** `cat` of one allow-listed kernel file; the path is validated, then quoted all the same. */
export function readFileCommand(path: string): CommandLine {
  if (!isReadableNodeFile(path))
    throw new Error(
      `refusing to read "${path}" on a node: only /proc/sys/… and /sys/class/net/… files are allow-listed`,
    )
  return `cat -- '${path}'` as CommandLine
}

/** The kernel settings the packet path depends on: forwarding, bridge netfilter, the conntrack table, rp_filter, route_localnet. */
const PATH_SYSCTLS = [
  'net.ipv4.ip_forward',
  'net.bridge.bridge-nf-call-iptables',
  'net.netfilter.nf_conntrack_count',
  'net.netfilter.nf_conntrack_max',
  'net.ipv4.conf.all.rp_filter',
  'net.ipv4.conf.all.route_localnet',
] as const

/** Read too where the Service has IPv6 addresses: IPv6 forwarding and bridge netfilter are settings of their own. */
const IPV6_PATH_SYSCTLS = ['net.ipv6.conf.all.forwarding', 'net.bridge.bridge-nf-call-ip6tables'] as const

export const CONNTRACK_PROTOCOLS = ['tcp', 'udp', 'sctp'] as const
export type ConntrackProtocol = (typeof CONNTRACK_PROTOCOLS)[number]

/** Single-quotes a word for a POSIX shell; the values are validated first, this is a second wall. */
function quote(word: string): string {
  return `'${word.replaceAll("'", `'\\''`)}'`
}

/** A bare IPv4 or IPv6 address in its canonical spelling; anything else (a CIDR, a name, brackets) throws. */
function ipArgument(text: string): string {
  const ip = typeof text === 'string' && !text.startsWith('[') ? parseIp(text) : undefined
  if (!ip) throw new Error(`refusing to build a node command: ${JSON.stringify(text)} is not an IP address`)
  return ip.text
}

/** Linux's rule for interface names (dev_valid_name): 1-15 bytes, not "." or "..", no "/", ":", whitespace or control characters. */
export function isInterfaceName(name: string): boolean {
  return (
    typeof name === 'string' &&
    Buffer.byteLength(name) >= 1 &&
    Buffer.byteLength(name) <= 15 &&
    name !== '.' &&
    name !== '..' &&
    !/[/:\s'"\\]/.test(name) &&
    [...name].every((c) => c.charCodeAt(0) > 0x1f && c.charCodeAt(0) !== 0x7f)
  )
}

/** sysctl's spelling of a per-interface key: dots in an interface name become slashes. */
function interfaceSysctls(iface: string): string[] {
  if (!isInterfaceName(iface))
    throw new Error(`refusing to build a node command: ${JSON.stringify(iface)} is not an interface name`)
  const key = iface.replaceAll('.', '/')
  return [`net.ipv4.conf.${key}.rp_filter`, `net.ipv4.conf.${key}.route_localnet`]
}

/** The sysctl keys the `pathSysctls` query reads for these interfaces (validated). */
export function pathSysctlNames(interfaces: string[], ipv6 = false): string[] {
  return [...PATH_SYSCTLS, ...(ipv6 ? IPV6_PATH_SYSCTLS : []), ...interfaces.flatMap(interfaceSysctls)]
}

/** Without -e on purpose: a missing key (br_netfilter not loaded) is said on stderr and the other keys still print. */
function pathSysctlsCommand(interfaces: string[], ipv6?: boolean): CommandLine {
  return ['sysctl', ...pathSysctlNames(interfaces, ipv6).map(quote)].join(' ') as CommandLine
}

/** The iptables tables a packet crosses, in iptables-save's order. */
export const IPTABLES_TABLES = ['raw', 'mangle', 'nat', 'filter'] as const
export type IptablesTable = (typeof IPTABLES_TABLES)[number]

/**
 * An iptables chain name the doctor passes to `iptables -S` (at most 28 characters, as iptables allows): kube-proxy's
 * (KUBE-SVC-…) and the CNIs' own (cali-fw-…, DOCKER-ISOLATION-STAGE-1, KUBE-ROUTER-INPUT) fit; a name that does not is
 * never passed on, the whole dump is read instead.
 */
const CHAIN_NAME = /^[A-Za-z0-9][A-Za-z0-9_.@+-]{0,27}$/

export function isChainName(name: unknown): name is string {
  return typeof name === 'string' && CHAIN_NAME.test(name)
}

/** Chains at most one `iptablesChains` read lists. */
export const MAX_CHAINS_PER_READ = 256

/** The marker after each chain's answer: "#kpd-chain EXIT". */
export const CHAIN_TRAILER = '#kpd-chain '

function iptablesChainsCommand(a: {family: 4 | 6; reads: Array<{table: IptablesTable; chain: string}>}): CommandLine {
  if (a.family !== 4 && a.family !== 6)
    throw new Error(`refusing to build a node command: ${JSON.stringify(a.family)} is not an IP family`)
  if (!Array.isArray(a.reads) || a.reads.length === 0 || a.reads.length > MAX_CHAINS_PER_READ)
    throw new Error(`refusing to build a node command: 1 to ${MAX_CHAINS_PER_READ} chains per read`)
  const tool = a.family === 6 ? 'ip6tables' : 'iptables'
  const parts: string[] = []
  for (const {table, chain} of a.reads) {
    if (!(IPTABLES_TABLES as readonly string[]).includes(table))
      throw new Error(`refusing to build a node command: ${JSON.stringify(table)} is not an iptables table`)
    if (!isChainName(chain))
      throw new Error(`refusing to build a node command: ${JSON.stringify(chain)} is not a chain name`)
    // Never asked of iptables-legacy (see readScopedRules); --modprobe=/bin/false all the same: iptables loads no module.
    parts.push(`${tool} --modprobe=/bin/false -w 5 -t ${table} -S ${quote(chain)}; echo "${CHAIN_TRAILER}$?"`)
  }
  return parts.join('; ') as CommandLine
}

/** The nft families kube-proxy writes its table in. */
export const NFT_KUBE_PROXY_FAMILIES = ['ip', 'ip6'] as const
export type NftKubeProxyFamily = (typeof NFT_KUBE_PROXY_FAMILIES)[number]

function nftFamily(family: NftKubeProxyFamily): NftKubeProxyFamily {
  if (!(NFT_KUBE_PROXY_FAMILIES as readonly string[]).includes(family))
    throw new Error(`refusing to build a node command: ${JSON.stringify(family)} is not an nft family kube-proxy uses`)
  return family
}

function conntrackProtocol(protocol: ConntrackProtocol): ConntrackProtocol {
  if (!(CONNTRACK_PROTOCOLS as readonly string[]).includes(protocol))
    throw new Error(`refusing to build a node command: ${JSON.stringify(protocol)} is not a conntrack protocol`)
  return protocol
}

/**
 * The argv of the queries that run one program, for transports that run programs without a shell (kube-proxy's Pod).
 * The same validation as the shell forms below.
 */
export const QUERY_ARGV = {
  routeGet: (a: {address: string}) => ['ip', '-o', 'route', 'get', ipArgument(a.address)],
  conntrackList: (a: {protocol: ConntrackProtocol; address: string}) => [
    'conntrack',
    '-L',
    '-p',
    conntrackProtocol(a.protocol),
    '-d',
    ipArgument(a.address),
  ],
  nftKubeProxyTable: (a: {family: NftKubeProxyFamily; json: boolean}) => [
    'nft',
    ...(a.json === true ? ['-j'] : []),
    'list',
    'table',
    nftFamily(a.family),
    'kube-proxy',
  ],
}

/**
 * The argv of each allow-listed key that maps to one program, for transports that exec without a shell (a Pod on the
 * node): the same programs and arguments as NODE_COMMANDS, as separate words.
 */
export const COMMAND_ARGV: Partial<Record<NodeCommand, readonly string[]>> = {
  uid: ['id', '-u'],
  iptablesSave: ['iptables-save'],
  ip6tablesSave: ['ip6tables-save'],
  nftRulesetJson: ['nft', '-j', 'list', 'ruleset'],
  nftRuleset: ['nft', 'list', 'ruleset'],
  nftSets: ['nft', 'list', 'sets'],
  iptablesLegacySave: ['iptables-legacy-save'],
  iptablesNftSave: ['iptables-nft-save'],
  ip6tablesLegacySave: ['ip6tables-legacy-save'],
  ip6tablesNftSave: ['ip6tables-nft-save'],
  ipsetSave: ['ipset', 'save'],
  kubeIpvs0: ['ip', '-o', 'addr', 'show', 'dev', 'kube-ipvs0'],
  routeTable: ['ip', 'route', 'show'],
  routeTable6: ['ip', '-6', 'route', 'show'],
  cniResults: ['grep', '-r', '-H', '-s', '.', '/var/lib/cni/results'],
}

/** Where the debug Pod mounts the node's root filesystem (read-only). */
export const HOST_ROOT = '/host'

/**
 * The node's own program instead of the image's: `chroot /host ARGV…` (the debug Pod's read-only mount of the node's
 * root). Only argv built in this file goes through it (the transports pass what COMMAND_ARGV and QUERY_ARGV gave).
 */
export function onNodeRoot(argv: readonly string[]): string[] {
  if (argv.length === 0 || argv[0] === 'chroot')
    throw new Error('refusing to build a chroot command for an empty or nested command')
  return ['chroot', HOST_ROOT, ...argv]
}

function routeGetCommand(address: string): CommandLine {
  return `ip -o route get ${quote(ipArgument(address))}` as CommandLine
}

function conntrackListCommand(protocol: ConntrackProtocol, address: string, isRoot: boolean): CommandLine {
  const line = `conntrack -L -p ${quote(conntrackProtocol(protocol))} -d ${quote(ipArgument(address))}`
  return (isRoot ? line : `sudo -n ${line}`) as CommandLine
}

/** Commands that take validated arguments, and the arguments each takes. */
interface NodeQueryArgs {
  dnsLookup: {name: string; server: string; type: 'A' | 'AAAA'}
  /** The path sysctls, plus rp_filter and route_localnet of these interfaces. */
  pathSysctls: {interfaces: string[]; ipv6?: boolean}
  /** `ip -o route get ADDRESS`: the route the kernel picks for an endpoint. */
  routeGet: {address: string}
  /** `conntrack -L -p PROTOCOL -d ADDRESS`: the entries whose original destination is a Service address. */
  conntrackList: {protocol: ConntrackProtocol; address: string}
  /**
   * `nft [-j] list table FAMILY kube-proxy`: kube-proxy's own table only. On a large iptables-nft node listing the whole
   * ruleset takes minutes (every xtables rule is translated), and even an absent table takes a second (nft fetches
   * every chain first): `nftSets` says first which tables there are.
   */
  nftKubeProxyTable: {family: NftKubeProxyFamily; json: boolean}
  /**
   * `iptables --modprobe=/bin/false -w 5 -t TABLE -S CHAIN` (ip6tables for family 6) for each chain, each answer
   * followed by "#kpd-chain EXIT". As root only (the sudoers file allows whole dumps only).
   */
  iptablesChains: {family: 4 | 6; reads: Array<{table: IptablesTable; chain: string}>}
}
type NodeQuery = keyof NodeQueryArgs

/** Every key a transport's `run` accepts. */
export type NodeCommandKey = NodeCommand | NodeQuery

export type ArgsOf<K extends NodeCommandKey> = K extends NodeQuery ? [args: NodeQueryArgs[K]] : []

const QUERIES: {[K in NodeQuery]: (args: NodeQueryArgs[K], isRoot: boolean) => CommandLine} = {
  dnsLookup: (a) => dnsLookupCommand(a.name, a.server, a.type),
  pathSysctls: (a) => pathSysctlsCommand(a.interfaces, a.ipv6),
  routeGet: (a) => routeGetCommand(a.address),
  conntrackList: (a, isRoot) => conntrackListCommand(a.protocol, a.address, isRoot),
  nftKubeProxyTable: (a, isRoot) =>
    `${isRoot ? '' : 'sudo -n '}${QUERY_ARGV.nftKubeProxyTable(a).join(' ')}` as CommandLine,
  iptablesChains: (a, isRoot) => {
    if (!isRoot) throw new Error('refusing to build a node command: chain by chain reads run as root only')
    return iptablesChainsCommand(a)
  },
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
    return (QUERIES[key as NodeQuery] as (args: unknown, isRoot: boolean) => CommandLine)(a, isRoot)
  }
  return commandLine(key as NodeCommand, isRoot)
}

/** Whether a command's failure says the tool is not on the node (the shell's 127, or sudo's "command not found"). */
export function toolMissing(result: {code: number | null; stderr: string}): boolean {
  return result.code === 127 || /command not found|sudo: \S+: not found/.test(result.stderr)
}
