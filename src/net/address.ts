import ipaddr from 'ipaddr.js'

type Family = 4 | 6

/** An address as a number, for range and prefix arithmetic. IPv4-mapped IPv6 (::ffff:a.b.c.d) reads as IPv4. */
export interface ParsedIp {
  family: Family
  value: bigint
  /** The canonical text (IPv6 compressed, lower case). */
  text: string
}

export interface Cidr {
  family: Family
  base: bigint
  bits: number
}

const WIDTH: Record<Family, number> = {4: 32, 6: 128}

function toBigInt(bytes: number[]): bigint {
  let v = 0n
  for (const b of bytes) v = (v << 8n) | BigInt(b)
  return v
}

const ipCache = new Map<string, ParsedIp | null>()

/**
 * Longer than any address's text (an IPv6 address with an IPv4 tail and a zone, in brackets) or CIDR's: such a text
 * is no address, answered without parsing and never a cache key (a node's or a paste's text would otherwise fill the
 * caches with keys of any length).
 */
const MAX_IP_TEXT = 64
const MAX_CIDR_TEXT = 2 * MAX_IP_TEXT + 1

/**
 * Parses an IPv4 or IPv6 address (brackets allowed); undefined when it is not one. Cached: tracers ask often.
 * Values from a snapshot's JSON are typed only by what the file holds: anything that is not a string is no address.
 */
export function parseIp(text: string): ParsedIp | undefined {
  if (typeof text !== 'string' || text.length > MAX_IP_TEXT) return undefined
  const hit = ipCache.get(text)
  if (hit !== undefined) return hit ?? undefined
  let parsed: ParsedIp | null = null
  const clean = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text
  const strictV4 = /^\d{1,3}(\.\d{1,3}){3}$/.test(clean)
  if (strictV4 ? ipaddr.IPv4.isValidFourPartDecimal(clean) : clean.includes(':') && ipaddr.IPv6.isValid(clean)) {
    let addr = ipaddr.parse(clean)
    if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress())
      addr = (addr as ipaddr.IPv6).toIPv4Address()
    const family: Family = addr.kind() === 'ipv4' ? 4 : 6
    parsed = {family, value: toBigInt(addr.toByteArray()), text: addr.toString()}
  }
  if (ipCache.size > 100_000) ipCache.clear()
  ipCache.set(text, parsed)
  return parsed ?? undefined
}

/** The family of an address; undefined when it is not one. */
export function familyOf(ip: string): Family | undefined {
  return parseIp(ip)?.family
}

/** An address's canonical text (IPv4-mapped IPv6 as IPv4), or the input unchanged when it is not an address. */
export function canonicalIp(ip: string): string {
  return parseIp(ip)?.text ?? ip
}

const cidrCache = new Map<string, Cidr | null>()

/** `a.b.c.d/nn`, `a.b.c.d/255.255.0.0`, `x::/nn` or a bare address (a host prefix); undefined when malformed. */
export function parseCidr(text: string): Cidr | undefined {
  if (typeof text !== 'string' || text.length > MAX_CIDR_TEXT) return undefined
  const hit = cidrCache.get(text)
  if (hit !== undefined) return hit ?? undefined
  let out: Cidr | null = null
  const slash = text.indexOf('/')
  const ip = parseIp(slash < 0 ? text : text.slice(0, slash))
  if (ip) {
    const width = WIDTH[ip.family]
    let bits: number | undefined = width
    if (slash >= 0) {
      const rest = text.slice(slash + 1)
      if (/^\d{1,3}$/.test(rest)) bits = Number(rest)
      else {
        const mask = parseIp(rest)
        bits = mask && mask.family === ip.family ? prefixOfMask(mask.value, width) : undefined
      }
    }
    if (bits !== undefined && bits <= width) {
      const shift = BigInt(width - bits)
      out = {family: ip.family, base: (ip.value >> shift) << shift, bits}
    }
  }
  if (cidrCache.size > 100_000) cidrCache.clear()
  cidrCache.set(text, out)
  return out ?? undefined
}

/** The prefix length of a contiguous netmask; undefined for a mask with holes. */
function prefixOfMask(mask: bigint, width: number): number | undefined {
  const bin = mask.toString(2).padStart(width, '0')
  const bits = bin.indexOf('0') < 0 ? width : bin.indexOf('0')
  return /^1*0*$/.test(bin) ? bits : undefined
}

export function cidrContains(cidr: Cidr, ip: string): boolean {
  const parsed = parseIp(ip)
  if (!parsed || parsed.family !== cidr.family) return false
  if (cidr.bits === WIDTH[cidr.family]) return parsed.value === cidr.base
  const shift = BigInt(WIDTH[cidr.family] - cidr.bits)
  return (parsed.value >> shift) << shift === cidr.base
}

/** Whether ip lies in the CIDR; false when either is malformed (callers that must tell the two apart parse first). */
export function inCidr(cidrText: string, ip: string): boolean {
  const c = parseCidr(cidrText)
  return c !== undefined && cidrContains(c, ip)
}

/** The address `offset` places after the CIDR's base (offset 1 is the first host). */
export function addressInCidr(cidr: Cidr, offset: number): string {
  const value = cidr.base + BigInt(offset)
  const width = WIDTH[cidr.family]
  const bytes: number[] = []
  for (let i = width / 8 - 1; i >= 0; i--) bytes.push(Number((value >> BigInt(i * 8)) & 255n))
  return ipaddr.fromByteArray(bytes).toString()
}

/** The number of addresses in the CIDR, capped (an IPv6 /64 does not fit a number). */
export function cidrSize(cidr: Cidr, cap = 1 << 30): number {
  const hostBits = WIDTH[cidr.family] - cidr.bits
  return hostBits >= 30 ? cap : Math.min(cap, 2 ** hostBits)
}

export function isLoopback(ip: string): boolean {
  const p = parseIp(ip)
  return !!p && (p.family === 4 ? inCidr('127.0.0.0/8', ip) : p.text === '::1')
}

export function isMulticast(ip: string): boolean {
  return inCidr('224.0.0.0/4', ip) || inCidr('ff00::/8', ip)
}
