import {parseIp} from '../../net/address.js'
import type {DnsRecordType} from '../../parse/dns-lookup.js'
import {CHAIN_TRAILER} from '../../parse/iptables-chains.js'

/**
 * The arguments the node reads take (node-reads.ts), each validated before it becomes a word of a command: nothing
 * from input reaches a node unchecked, and what reaches a shell is quoted all the same.
 */

/** Single-quotes a word for a POSIX shell; the values are validated first, this is a second wall. */
export function quote(word: string): string {
  return `'${word.replaceAll("'", `'\\''`)}'`
}

/** A bare IPv4 or IPv6 address in its canonical spelling; anything else (a CIDR, a name, brackets) throws. */
export function ipArgument(text: string): string {
  const ip = typeof text === 'string' && !text.startsWith('[') ? parseIp(text) : undefined
  if (!ip) throw new Error(`refusing to build a node command: ${JSON.stringify(text)} is not an IP address`)
  return ip.text
}

/** A TCP/UDP port number as a word (1-65535); anything else throws. */
export function portArgument(port: number): string {
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new Error(`refusing to build a node command: ${JSON.stringify(port)} is not a port number`)
  return String(port)
}

const DNS_NAME = /^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$/
const DNS_SERVER = /^[0-9a-fA-F:.]+$/
const RECORD_TYPES: ReadonlySet<string> = new Set(['A', 'AAAA'])

/**
 * The by-hand DNS lookup of one record type, for nodes whose sshd refuses port forwarding. Arguments are validated,
 * never shell-quoted input.
 */
export function dnsLookupCommand(name: string, server: string, type: DnsRecordType): string {
  if (!DNS_NAME.test(name) || !DNS_SERVER.test(server) || !parseIp(server) || !RECORD_TYPES.has(type))
    throw new Error(`refusing to build a DNS command for "${name}" ${type} @ "${server}"`)
  return `if command -v dig >/dev/null; then dig +short +tcp +time=2 +tries=1 ${name} ${type} @${server}; elif command -v nslookup >/dev/null; then nslookup -vc -timeout=2 -type=${type} ${name} ${server}; else echo 'kpd: no dig or nslookup' >&2; exit 127; fi`
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

/** The sysctl keys the `pathSysctls` read asks for these interfaces (validated). */
export function pathSysctlNames(interfaces: string[], ipv6 = false): string[] {
  return [...PATH_SYSCTLS, ...(ipv6 ? IPV6_PATH_SYSCTLS : []), ...interfaces.flatMap(interfaceSysctls)]
}

export const CONNTRACK_PROTOCOLS = ['tcp', 'udp', 'sctp'] as const
export type ConntrackProtocol = (typeof CONNTRACK_PROTOCOLS)[number]

export function conntrackProtocol(protocol: ConntrackProtocol): ConntrackProtocol {
  if (!(CONNTRACK_PROTOCOLS as readonly string[]).includes(protocol))
    throw new Error(`refusing to build a node command: ${JSON.stringify(protocol)} is not a conntrack protocol`)
  return protocol
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

/** An iptables tool's address family, 4 or 6; anything else throws. */
function ipFamily(family: 4 | 6): void {
  if (family !== 4 && family !== 6)
    throw new Error(`refusing to build a node command: ${JSON.stringify(family)} is not an IP family`)
}

/** A table from the fixed list; anything else throws. */
function iptablesTable(table: IptablesTable): void {
  if (!(IPTABLES_TABLES as readonly string[]).includes(table))
    throw new Error(`refusing to build a node command: ${JSON.stringify(table)} is not an iptables table`)
}

/** Chains at most one `iptablesChains` read lists. */
export const MAX_CHAINS_PER_READ = 256

/** `iptables -S` of each chain, each answer followed by its trailer (see parse/iptables-chains.ts). */
export function iptablesChainsCommand(a: {family: 4 | 6; reads: Array<{table: IptablesTable; chain: string}>}): string {
  ipFamily(a.family)
  if (!Array.isArray(a.reads) || a.reads.length === 0 || a.reads.length > MAX_CHAINS_PER_READ)
    throw new Error(`refusing to build a node command: 1 to ${MAX_CHAINS_PER_READ} chains per read`)
  const tool = a.family === 6 ? 'ip6tables' : 'iptables'
  const parts: string[] = []
  for (const {table, chain} of a.reads) {
    iptablesTable(table)
    if (!isChainName(chain))
      throw new Error(`refusing to build a node command: ${JSON.stringify(chain)} is not a chain name`)
    // Never asked of iptables-legacy (see readScopedRules); --modprobe=/bin/false all the same: iptables loads no module.
    parts.push(`${tool} --modprobe=/bin/false -w 5 -t ${table} -S ${quote(chain)}; echo "${CHAIN_TRAILER}$?"`)
  }
  return parts.join('; ')
}

/**
 * `iptables-save -c -t TABLE` (ip6tables-save for family 6): one whole table with every rule's counters ("[PACKETS:BYTES]
 * -A …"), where `iptables -v -S CHAIN` would copy the whole table from the kernel for each chain (iptables-legacy). The
 * table from the fixed list; `--modprobe=/bin/false`: iptables-save loads no module. No -Z: nothing is zeroed.
 */
export function tableCountersArgv(a: {family: 4 | 6; table: IptablesTable}): string[] {
  ipFamily(a.family)
  iptablesTable(a.table)
  return [a.family === 6 ? 'ip6tables-save' : 'iptables-save', '--modprobe=/bin/false', '-c', '-t', a.table]
}

/**
 * `iptables -v -S CHAIN` of one chain (ip6tables for family 6): its rules with the kernel's counters ("-c PACKETS
 * BYTES"). The table from the fixed list, the chain name validated; `--modprobe=/bin/false`: iptables loads no module.
 */
export function ruleCountersArgv(a: {family: 4 | 6; table: IptablesTable; chain: string}): string[] {
  ipFamily(a.family)
  iptablesTable(a.table)
  if (!isChainName(a.chain))
    throw new Error(`refusing to build a node command: ${JSON.stringify(a.chain)} is not a chain name`)
  const tool = a.family === 6 ? 'ip6tables' : 'iptables'
  return [tool, '--modprobe=/bin/false', '-w', '5', '-t', a.table, '-v', '-S', a.chain]
}

/** The nft families kube-proxy writes its table in. */
export const NFT_KUBE_PROXY_FAMILIES = ['ip', 'ip6'] as const
export type NftKubeProxyFamily = (typeof NFT_KUBE_PROXY_FAMILIES)[number]

export function nftFamily(family: NftKubeProxyFamily): NftKubeProxyFamily {
  if (!(NFT_KUBE_PROXY_FAMILIES as readonly string[]).includes(family))
    throw new Error(`refusing to build a node command: ${JSON.stringify(family)} is not an nft family kube-proxy uses`)
  return family
}
