import {sha256} from '@noble/hashes/sha2'

// kube-proxy names its per-service chains after a hash so that they fit iptables' 28-character limit:
// prefix + the first 16 characters of base32(sha256(servicePortName + protocol [+ "ip:port"])).
const BASE32_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'

export function base32(bytes: Uint8Array): string {
  let out = ''
  let buffer = 0
  let bits = 0
  for (const byte of bytes) {
    buffer = (buffer << 8) | byte
    bits += 8
    while (bits >= 5) {
      out += BASE32_ALPHABET[(buffer >>> (bits - 5)) & 31]
      bits -= 5
    }
  }
  if (bits > 0) out += BASE32_ALPHABET[(buffer << (5 - bits)) & 31]
  return out
}

function hash16(input: string): string {
  let hash = recentHashes.get(input)
  if (hash === undefined) {
    // The first 10 bytes are the first 80 bits: the first 16 characters, with no bits left over.
    hash = base32(sha256(input).subarray(0, 10))
    if (recentHashes.size >= RECENT_HASHES) recentHashes.clear()
    recentHashes.set(input, hash)
  }
  return hash
}

/** A scan names the same Service's chains on every node and in several checks: the last few thousand names are kept. */
const recentHashes = new Map<string, string>()
const RECENT_HASHES = 4096

/** The nat chains of kube-proxy's userspace mode (removed in 1.26): still there, they are leftovers. */
export const USERSPACE_MODE_CHAINS = [
  'KUBE-PORTALS-CONTAINER',
  'KUBE-PORTALS-HOST',
  'KUBE-NODEPORT-CONTAINER',
  'KUBE-NODEPORT-HOST',
] as const

/** "ns/name" or "ns/name:portName", the way kube-proxy prints a ServicePortName. */
export function servicePortName(namespace: string, name: string, portName: string | undefined): string {
  return `${namespace}/${name}${portName ? ':' + portName : ''}`
}

export interface ServiceChainNames {
  svc: string
  svl: string
  ext: string
  fw: string
}

export function serviceChainNames(svcPortName: string, protocol: string): ServiceChainNames {
  const h = hash16(svcPortName + protocol.toLowerCase())
  return {svc: `KUBE-SVC-${h}`, svl: `KUBE-SVL-${h}`, ext: `KUBE-EXT-${h}`, fw: `KUBE-FW-${h}`}
}

export function endpointChainName(svcPortName: string, protocol: string, endpoint: string): string {
  return `KUBE-SEP-${hash16(svcPortName + protocol.toLowerCase() + endpoint)}`
}

/** ip:port, with brackets for IPv6 as Go's net.JoinHostPort writes it. */

/** nftables mode: "ns/name/proto/portName", the base of kube-proxy's per-service chain names. */
export function nftServicePortBase(
  namespace: string,
  name: string,
  protocol: string,
  portName: string | undefined,
): string {
  return `${namespace}/${name}/${protocol.toLowerCase()}/${portName ?? ''}`
}

function hash8(input: string): string {
  // The first 5 bytes are the first 40 bits: the first 8 characters, with no bits left over.
  return base32(sha256(input).subarray(0, 5))
}

export interface NftServiceChainNames {
  service: string
  local: string
  external: string
  firewall: string
}

export function nftServiceChainNames(base: string): NftServiceChainNames {
  const id = `${hash8(base)}-${base}`
  return {service: `service-${id}`, local: `local-${id}`, external: `external-${id}`, firewall: `firewall-${id}`}
}

/** endpoint-HASH8-ns/name/proto/port__IP/PORT; an IPv6 address with "." for ":" (a chain name cannot hold a colon). */
export function nftEndpointChainName(base: string, ip: string, port: number): string {
  const name = `${base}__${ip.replaceAll(':', '.')}/${port}`
  return `endpoint-${hash8(name)}-${name}`
}

/**
 * IPVS mode's ipset of one family: an IPv6 set's "KUBE-" prefix becomes "KUBE-6-" (both families' sets live side by
 * side), cut to ipset's 31 characters, as kube-proxy's NewIPSet names them.
 */
export function ipvsSetName(name: string, family: 4 | 6): string {
  return family === 6 && name.startsWith('KUBE-') ? name.replace('KUBE-', 'KUBE-6-').slice(0, 31) : name
}
