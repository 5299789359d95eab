import {parseIp} from '../net/address.js'

/** A for an IPv4 ClusterIP, AAAA for an IPv6 one. */
export type DnsRecordType = 'A' | 'AAAA'

/** The address family of each record type's addresses. */
export const RECORD_FAMILY: Record<DnsRecordType, 4 | 6> = {A: 4, AAAA: 6}

/** Reads the addresses of `type` (IPv4 for A, IPv6 for AAAA) out of `dig +short` or `nslookup` output. */
export function parseLookupOutput(text: string, type: DnsRecordType): string[] {
  const out: string[] = []
  const ofType = (t: string) => {
    const ip = parseIp(t)
    return ip?.family === RECORD_FAMILY[type] ? ip.text : undefined
  }
  // nslookup first names the server it asked ("Server:", "Address: 10.96.0.10#53"); the answers follow "Name:".
  let pastServer = false
  for (const line of text.split('\n')) {
    const t = line.trim()
    const bare = ofType(t)
    if (bare) out.push(bare)
    else if (/^Name:/.test(t)) pastServer = true
    else if (pastServer) {
      const m = /^Address(?:\s+\d+)?:\s*(\S+)(?:\s+\S+)?$/.exec(t)
      const ip = m && ofType(m[1])
      if (ip) out.push(ip)
    }
  }
  return out
}
