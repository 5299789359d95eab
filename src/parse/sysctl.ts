import {ParseError} from './parse-error.js'
/**
 * Kernel settings read from /proc/sys: `sysctl KEY...` output ("net.ipv4.ip_forward = 1") or `grep -H '' FILE...`
 * output ("/proc/sys/net/ipv4/ip_forward:1"), with the "cannot stat"/"No such file" lines telling which keys are absent.
 */
export interface SysctlValues {
  /** Dotted key (net.ipv4.conf.eth0.rp_filter) -> value text. */
  values: Map<string, string>
  /** Keys the node does not have (e.g. net.bridge.* when br_netfilter is not loaded). */
  absent: Set<string>
}

const PROC = '/proc/sys/'
const MISSING = /^(?:sysctl: cannot stat|grep:|cat:) (\/proc\/sys\/\S+?):? No such file or directory$/

/** /proc/sys/net/ipv4/conf/eth0.100/rp_filter -> net.ipv4.conf.eth0/100.rp_filter (sysctl's own spelling: dots in names become slashes). */
function keyFromPath(path: string): string {
  return path
    .slice(PROC.length)
    .split('/')
    .map((part) => part.replaceAll('.', '/'))
    .join('.')
}

export function parseSysctl(text: string): SysctlValues {
  const values = new Map<string, string>()
  const absent = new Set<string>()
  for (const [i, raw] of text.split('\n').entries()) {
    const line = raw.trim()
    if (line === '') continue
    const missing = MISSING.exec(line)
    if (missing) {
      absent.add(keyFromPath(missing[1]))
      continue
    }
    // The value is the rest of the line, whatever it holds (the s flag: `.` also takes a line separator, U+2028, else
    // `(.*)$` fails at one and the lazy key is retried at every later ':': quadratic).
    const sysctlForm = /^([A-Za-z0-9_./-]+) = ?(.*)$/s.exec(line)
    const procForm = line.startsWith(PROC) ? /^(\/proc\/sys\/\S+?):(.*)$/s.exec(line) : null
    if (procForm) values.set(keyFromPath(procForm[1]), procForm[2].trim())
    else if (sysctlForm && !sysctlForm[1].startsWith('/')) values.set(sysctlForm[1], sysctlForm[2].trim())
    else
      throw new ParseError(i + 1, `neither "key = value" nor "/proc/sys/path:value": ${line.slice(0, 200)}`, {
        what: 'sysctl output',
      })
  }
  return {values, absent}
}

/** The keys that say whether a node forwards a family's packets and hands bridged ones to that family's netfilter. */
export const FORWARDING_KEYS = {
  4: {forward: 'net.ipv4.ip_forward', bridge: 'net.bridge.bridge-nf-call-iptables'},
  6: {forward: 'net.ipv6.conf.all.forwarding', bridge: 'net.bridge.bridge-nf-call-ip6tables'},
} as const

/** One family's settings the packet path depends on, as the kernel applies them. undefined: not read. */
export interface ForwardingSettings {
  ipForward?: boolean
  /** undefined with `brNetfilterLoaded` false: the key is absent, so bridged traffic skips iptables entirely. */
  bridgeNfCallIptables?: boolean
  /** Whether /proc/sys/net/bridge exists (br_netfilter loaded); undefined when the key was not asked for. */
  brNetfilterLoaded?: boolean
}

export function forwardingSettings(s: SysctlValues, family: 4 | 6 = 4): ForwardingSettings {
  const flag = (key: string) => {
    const v = s.values.get(key)
    return v === undefined ? undefined : v !== '0'
  }
  const keys = FORWARDING_KEYS[family]
  return {
    ipForward: flag(keys.forward),
    bridgeNfCallIptables: flag(keys.bridge),
    brNetfilterLoaded: s.values.has(keys.bridge) ? true : s.absent.has(keys.bridge) ? false : undefined,
  }
}

function intValue(s: SysctlValues, key: string): number | undefined {
  const v = s.values.get(key)
  return v !== undefined && /^-?\d+$/.test(v) ? Number(v) : undefined
}

/** rp_filter the kernel applies on an interface: the larger of conf.all and conf.IFACE (0 off, 1 strict, 2 loose). */
export function effectiveRpFilter(s: SysctlValues, iface: string): number | undefined {
  const all = intValue(s, 'net.ipv4.conf.all.rp_filter')
  const dev = intValue(s, `net.ipv4.conf.${iface.replaceAll('.', '/')}.rp_filter`)
  if (all === undefined && dev === undefined) return undefined
  return Math.max(all ?? 0, dev ?? 0)
}

/** route_localnet on an interface: on when conf.all or conf.IFACE is on (localhost NodePorts need it). */
export function effectiveRouteLocalnet(s: SysctlValues, iface: string): boolean | undefined {
  const all = intValue(s, 'net.ipv4.conf.all.route_localnet')
  const dev = intValue(s, `net.ipv4.conf.${iface.replaceAll('.', '/')}.route_localnet`)
  if (all === undefined && dev === undefined) return undefined
  return (all ?? 0) !== 0 || (dev ?? 0) !== 0
}

/** The interfaces that have a conf.IFACE.KEY value (all and default excluded), in sysctl's spelling turned back into names. */
export function interfacesWith(s: SysctlValues, key: string): string[] {
  const out: string[] = []
  for (const k of s.values.keys()) {
    const m = /^net\.ipv4\.conf\.([^.]+)\.(.+)$/.exec(k)
    if (m && m[2] === key && m[1] !== 'all' && m[1] !== 'default') out.push(m[1].replaceAll('/', '.'))
  }
  return out.sort()
}

/** nf_conntrack_count against nf_conntrack_max; undefined when either was not read. */
export function conntrackTableUsage(s: SysctlValues): {count: number; max: number; fraction: number} | undefined {
  const count = intValue(s, 'net.netfilter.nf_conntrack_count')
  const max = intValue(s, 'net.netfilter.nf_conntrack_max')
  if (count === undefined || max === undefined || max <= 0) return undefined
  return {count, max, fraction: count / max}
}
