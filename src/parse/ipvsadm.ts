import {ParseError} from './parse-error.js'
import {joinHostPort, splitHostPort} from '../net/host-port.js'
/** IPVS virtual and real servers, from `ipvsadm -Sn` (save) or `ipvsadm -Ln` (list) output. */
interface RealServer {
  address: string
  port: number
  forward: string
  weight: number
  line: number
  text: string
}

export interface VirtualServer {
  proto: 'tcp' | 'udp' | 'sctp' | 'fwm'
  address: string
  port: number
  scheduler: string
  /** Seconds of persistence (ClientIP session affinity), when set. */
  persistent?: number
  line: number
  text: string
  reals: RealServer[]
}

const PROTO_FLAGS: Record<string, VirtualServer['proto']> = {
  '-t': 'tcp',
  '--tcp-service': 'tcp',
  '-u': 'udp',
  '--udp-service': 'udp',
  '--sctp-service': 'sctp',
  '-f': 'fwm',
  '--fwmark-service': 'fwm',
}
const FORWARD_FLAGS: Record<string, string> = {
  '-m': 'Masq',
  '--masquerading': 'Masq',
  '-g': 'Route',
  '--gatewaying': 'Route',
  '-i': 'Tunnel',
  '--ipip': 'Tunnel',
}

/** ipvsadm's `ip:port` / `[ipv6]:port`; a malformed one is a parse error naming the text. */
function addressAndPort(text: string | undefined, lineNo: number): {address: string; port: number} {
  const hp = text === undefined ? undefined : splitHostPort(text)
  if (!hp) throw new ParseError(lineNo, `"${(text ?? '').slice(0, 60)}" is not an address:port`)
  return {address: hp.host, port: hp.port}
}

export function vsKey(proto: string, address: string, port: number): string {
  return `${proto.toUpperCase()} ${joinHostPort(address, port)}`
}

/** A real server's weight: a whole number ipvsadm can print (a NaN or an Infinity would make every share NaN). */
function weight(text: string | undefined, lineNo: number): number {
  const n = Number(text)
  if (text === undefined || !/^\d+$/.test(text) || n > 2 ** 31 - 1)
    throw new ParseError(lineNo, `weight ${JSON.stringify(text ?? '')} is not a whole number`)
  return n
}

export function parseIpvsadm(text: string): VirtualServer[] {
  const out: VirtualServer[] = []
  const find = (proto: string, addr: string | undefined, lineNo: number) => {
    const hp = addressAndPort(addr, lineNo)
    return out.find((v) => vsKey(v.proto, v.address, v.port) === vsKey(proto, hp.address, hp.port))
  }
  let current: VirtualServer | undefined
  for (const [i, raw] of text.split('\n').entries()) {
    const line = raw.trim()
    const lineNo = i + 1
    if (line === '' || /^(IP Virtual Server|Prot LocalAddress|-> RemoteAddress)/.test(line)) continue
    const words = line.split(/\s+/)
    if (words[0] === '-A' || words[0] === '--add-service') {
      const proto = PROTO_FLAGS[words[1]]
      if (!proto) throw new ParseError(lineNo, `service type "${words[1]}" not understood`)
      const hp = addressAndPort(words[2], lineNo)
      const s = words.indexOf('-s')
      const p = words.indexOf('-p')
      out.push({
        proto,
        ...hp,
        scheduler: s >= 0 ? words[s + 1] : 'wlc',
        persistent: p >= 0 ? Number(words[p + 1] ?? 300) : undefined,
        line: lineNo,
        text: line,
        reals: [],
      })
    } else if (words[0] === '-a' || words[0] === '--add-server') {
      const vs = find(PROTO_FLAGS[words[1]] ?? '', words[2], lineNo)
      if (!vs) throw new ParseError(lineNo, `real server for an undeclared virtual server ${words[2]}`)
      const r = words.indexOf('-r')
      const w = words.indexOf('-w')
      const fwd = words.find((x) => FORWARD_FLAGS[x])
      vs.reals.push({
        ...addressAndPort(r >= 0 ? words[r + 1] : undefined, lineNo),
        forward: fwd ? FORWARD_FLAGS[fwd] : 'Route',
        weight: w >= 0 ? weight(words[w + 1], lineNo) : 1,
        line: lineNo,
        text: line,
      })
    } else if (/^(TCP|UDP|SCTP|FWM)$/.test(words[0])) {
      const proto = words[0].toLowerCase() as VirtualServer['proto']
      const hp = proto === 'fwm' ? {address: words[1] ?? '', port: 0} : addressAndPort(words[1], lineNo)
      const pi = words.indexOf('persistent')
      current = {
        proto,
        ...hp,
        scheduler: words[2] ?? 'wlc',
        persistent: pi >= 0 ? Number(words[pi + 1]) : undefined,
        line: lineNo,
        text: line,
        reals: [],
      }
      out.push(current)
    } else if (words[0] === '->') {
      if (!current) throw new ParseError(lineNo, `real server before any virtual server`)
      current.reals.push({
        ...addressAndPort(words[1], lineNo),
        forward: words[2],
        weight: weight(words[3], lineNo),
        line: lineNo,
        text: line,
      })
    } else throw new ParseError(lineNo, `not ipvsadm output: "${line.slice(0, 60)}"`)
  }
  return out
}

/** Addresses bound to kube-ipvs0, from `ip -o addr show dev kube-ipvs0` (or the multi-line form). */
export function parseDeviceAddresses(text: string, device = 'kube-ipvs0'): string[] {
  const out: string[] = []
  let inDevice = false
  for (const line of text.split('\n')) {
    const head = /^\d+:\s+([^:\s@]+)/.exec(line)
    if (head) inDevice = head[1] === device
    const m = /\binet6?\s+([0-9a-fA-F.:]+)\/\d+/.exec(line)
    if (m && (inDevice || line.includes(` ${device}`))) out.push(m[1])
  }
  return out
}

/** `sysctl a b c` output: "key = value" lines. */
export function parseSysctl(text: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const line of text.split('\n')) {
    // The value is the rest of the line (s: also past a line separator, which `(.*)$` would otherwise backtrack over).
    const m = /^([\w.\-/]+)\s*=\s*(.*)$/s.exec(line.trim())
    if (m) out[m[1]] = m[2].trim()
  }
  return out
}
