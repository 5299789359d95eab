/** IPv4/IPv6 addresses and CIDRs as BigInt ranges, for netfilter-style matching. */
export interface Cidr {
  v6: boolean
  base: bigint
  bits: number
}

export function parseIp(text: string): {v6: boolean; value: bigint} | undefined {
  if (text.includes(':')) return parseIpv6(text)
  const parts = text.split('.')
  if (parts.length !== 4) return undefined
  let value = 0n
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p) || Number(p) > 255) return undefined
    value = (value << 8n) | BigInt(Number(p))
  }
  return {v6: false, value}
}

function parseIpv6(text: string): {v6: boolean; value: bigint} | undefined {
  const clean = text.replace(/^\[|\]$/g, '')
  const halves = clean.split('::')
  if (halves.length > 2) return undefined
  const head = halves[0] ? halves[0].split(':') : []
  const tail = halves.length === 2 && halves[1] ? halves[1].split(':') : []
  const missing = 8 - head.length - tail.length
  if (missing < 0 || (halves.length === 1 && missing !== 0)) return undefined
  const groups = [...head, ...Array(halves.length === 2 ? missing : 0).fill('0'), ...tail]
  let value = 0n
  for (const g of groups) {
    if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return undefined
    value = (value << 16n) | BigInt(parseInt(g, 16))
  }
  return {v6: true, value}
}

export function parseCidr(text: string): Cidr | undefined {
  const [ipText, bitsText] = text.split('/')
  const ip = parseIp(ipText)
  if (!ip) return undefined
  const width = ip.v6 ? 128 : 32
  let bits = width
  if (bitsText !== undefined) {
    if (/^\d+$/.test(bitsText)) bits = Number(bitsText)
    else {
      const mask = parseIp(bitsText)
      if (!mask) return undefined
      bits = mask.value.toString(2).replace(/0+$/, '').length
    }
  }
  if (bits > width) return undefined
  const shift = BigInt(width - bits)
  return {v6: ip.v6, base: (ip.value >> shift) << shift, bits}
}

export function cidrContains(cidr: Cidr, ip: string): boolean {
  const parsed = parseIp(ip)
  if (!parsed || parsed.v6 !== cidr.v6) return false
  const shift = BigInt((cidr.v6 ? 128 : 32) - cidr.bits)
  return (parsed.value >> shift) << shift === cidr.base
}

export function inCidr(cidrText: string, ip: string): boolean {
  const c = parseCidr(cidrText)
  return c !== undefined && cidrContains(c, ip)
}

export function isLoopback(ip: string): boolean {
  return inCidr('127.0.0.0/8', ip) || ip === '::1'
}
