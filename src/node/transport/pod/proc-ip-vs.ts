import {addressInCidr, canonicalIp} from '../../../net/address.js'
import {joinHostPort} from '../../../net/host-port.js'

/** `HEX:HEXPORT` (IPv4) or `[IPV6]:HEXPORT`, as the kernel prints addresses in /proc/net/ip_vs. */
function endpoint(text: string): string | undefined {
  const v4 = /^([0-9A-Fa-f]{8}):([0-9A-Fa-f]{4})$/.exec(text)
  if (v4) return joinHostPort(addressInCidr({family: 4, base: BigInt(`0x${v4[1]}`), bits: 32}, 0), parseInt(v4[2], 16))
  const v6 = /^\[([0-9A-Fa-f:]+)\]:([0-9A-Fa-f]{4})$/.exec(text)
  if (v6) return joinHostPort(canonicalIp(v6[1]), parseInt(v6[2], 16))
  return undefined
}

/**
 * The kernel's IPVS table (/proc/net/ip_vs: what `ipvsadm -Ln` prints, with addresses and ports in hex) written as
 * `ipvsadm -Ln` text, for nodes read where `ipvsadm` is absent. Lines it does not understand are left out.
 */
export function procIpVsAsIpvsadm(text: string): string {
  const out = [
    'Prot LocalAddress:Port Scheduler Flags',
    '  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn',
  ]
  for (const raw of text.split('\n')) {
    const words = raw.trim().split(/\s+/)
    if (/^(TCP|UDP|SCTP)$/.test(words[0] ?? '')) {
      const address = endpoint(words[1] ?? '')
      if (!address || !words[2]) continue
      const persistent = words.indexOf('persistent')
      out.push(
        `${words[0]}  ${address} ${words[2]}${persistent >= 0 ? ` persistent ${Number(words[persistent + 1])}` : ''}`,
      )
    } else if (words[0] === '->') {
      const address = endpoint(words[1] ?? '')
      if (address && words[2] && /^\d+$/.test(words[3] ?? ''))
        out.push(`  -> ${address}  ${words[2]} ${words[3]} ${words[4] ?? 0} ${words[5] ?? 0}`)
    }
  }
  return out.join('\n') + '\n'
}
