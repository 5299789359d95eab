import {nftEndpointChainName, nftServiceChainNames, nftServicePortBase} from '../src/model/chain-names.js'
import {ENDPOINTS_PER_SERVICE} from './generate.js'

const CLUSTER_CIDR = '10.128.0.0/10'
const clusterIP = (i: number) => `10.${96 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`
const podIP = (i: number, e: number) => {
  const n = i * ENDPOINTS_PER_SERVICE + e
  return `10.${128 + ((n >> 16) & 63)}.${(n >> 8) & 255}.${n & 255}`
}

/**
 * The `nft -f` input kube-proxy's nftables mode writes for `services` ClusterIP Services × 10 endpoints in namespace
 * "bench" (table ip kube-proxy: the service-ips map, one service chain and one chain per endpoint), with element
 * comments as kube-proxy writes them.
 */
export function generateNftRuleset(services: number): string {
  const chains: string[] = []
  const out = (line: string) => chains.push(line)
  const serviceIps: string[] = []
  for (let i = 0; i < services; i++) {
    const base = nftServicePortBase('bench', `svc-${i}`, 'tcp', 'http')
    const names = nftServiceChainNames(base)
    serviceIps.push(`${clusterIP(i)} . tcp . 80 comment "bench/svc-${i}:http" : goto ${names.service}`)
    const endpoints = Array.from({length: ENDPOINTS_PER_SERVICE}, (_, e) => ({
      ip: podIP(i, e),
      chain: nftEndpointChainName(base, podIP(i, e), 8080),
    }))
    out(`\tchain ${names.service} {`)
    out(`\t\tip daddr ${clusterIP(i)} tcp dport 80 ip saddr != ${CLUSTER_CIDR} jump mark-for-masquerade`)
    out(
      `\t\tnumgen random mod ${endpoints.length} vmap { ${endpoints.map((ep, n) => `${n} : goto ${ep.chain}`).join(', ')} }`,
    )
    out('\t}')
    for (const ep of endpoints)
      out(
        `\tchain ${ep.chain} {\n\t\tip saddr ${ep.ip} jump mark-for-masquerade\n\t\tmeta l4proto tcp dnat to ${ep.ip}:8080\n\t}`,
      )
  }
  return `table ip kube-proxy {
\tcomment "rules for kube-proxy"
\tmap service-ips {
\t\ttype ipv4_addr . inet_proto . inet_service : verdict
\t\tcomment "ClusterIP, ExternalIP and LoadBalancer IP traffic"
\t\telements = { ${serviceIps.join(',\n\t\t\t')} }
\t}
\tchain nat-prerouting {
\t\ttype nat hook prerouting priority dstnat; policy accept;
\t\tjump services
\t}
\tchain nat-output {
\t\ttype nat hook output priority -100; policy accept;
\t\tjump services
\t}
\tchain nat-postrouting {
\t\ttype nat hook postrouting priority srcnat; policy accept;
\t\tjump masquerading
\t}
\tchain services {
\t\tip daddr . meta l4proto . th dport vmap @service-ips
\t}
\tchain masquerading {
\t\tmeta mark & 0x00004000 == 0x00000000 return
\t\tmeta mark set meta mark ^ 0x00004000
\t\tmasquerade fully-random
\t}
\tchain mark-for-masquerade {
\t\tmeta mark set meta mark | 0x00004000
\t}
${chains.join('\n')}
}
`
}
