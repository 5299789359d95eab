import {nftEndpointChainName, nftServiceChainNames, nftServicePortBase} from '../../src/model/chain-names.js'
import type {RuleFaults} from './kube-proxy-rules.js'
import {
  CLUSTER_CIDR,
  CLUSTER_CIDR6,
  familyView,
  labEndpoints,
  type LabNode,
  type LabPod,
  type LabService,
} from './lab-cluster.js'

const elements = (items: string[]) => (items.length ? `\t\telements = { ${items.join(',\n\t\t\t')} }\n` : '')

/**
 * The `nft -f` input kube-proxy (nftables mode) would write on `node`, with the same faults as the iptables lab; with
 * family 6 its `ip6 kube-proxy` table for the Services' IPv6 ClusterIPs and the Pods' IPv6 addresses (same chain, set
 * and map names; `ip6` matches, `ipv6_addr` keys, DNAT to "[ip]:port").
 */
export function kubeProxyNftRules(
  node: LabNode,
  allServices: LabService[],
  allPods: LabPod[],
  faults: RuleFaults = {},
  family: 4 | 6 = 4,
): string {
  const {services, pods} = familyView(family, allServices, allPods)
  const ipX = family === 6 ? 'ip6' : 'ip'
  const addrType = family === 6 ? 'ipv6_addr' : 'ipv4_addr'
  const clusterCidr = family === 6 ? CLUSTER_CIDR6 : CLUSTER_CIDR
  const nodeIp = family === 6 ? node.ip6! : node.ip
  const hostPort = (ip: string, port: number) => (family === 6 ? `[${ip}]:${port}` : `${ip}:${port}`)
  const serviceIps: string[] = []
  const nodePorts: string[] = []
  const noEndpoints: string[] = []
  const noEndpointNodePorts: string[] = []
  const chains: string[] = []
  for (const svc of services) {
    for (const sp of svc.ports) {
      const proto = sp.protocol.toLowerCase()
      const base = nftServicePortBase(svc.namespace, svc.name, proto, sp.name)
      const names = nftServiceChainNames(base)
      const eps = labEndpoints(svc, sp, pods, {
        omit: faults.omitEndpoint,
        stale: svc === services[0] ? faults.staleEndpoint : undefined,
      })
      const etpLocal = svc.externalTrafficPolicy === 'Local' && !!sp.nodePort
      const localEps = eps.filter((e) => e.node === node.name)
      const dispatch = (list: typeof eps) =>
        `numgen random mod ${list.length} vmap { ${list.map((ep, i) => `${i} : goto ${nftEndpointChainName(base, ep.ip, ep.port)}`).join(', ')} }`
      if (eps.length === 0) {
        noEndpoints.push(`${svc.clusterIP} . ${proto} . ${sp.port} : goto reject-chain`)
        if (sp.nodePort) noEndpointNodePorts.push(`${proto} . ${sp.nodePort} : goto reject-chain`)
        continue
      }
      if (!(faults.omitClusterIp && svc === services[0]))
        serviceIps.push(`${svc.clusterIP} . ${proto} . ${sp.port} : goto ${names.service}`)
      if (sp.nodePort && !faults.omitNodePorts) {
        nodePorts.push(`${proto} . ${sp.nodePort} : goto ${names.external}`)
        if (etpLocal) {
          // externalTrafficPolicy: Local keeps the client's address: only this node's endpoints, no masquerade.
          const local = localEps.length > 0 ? `\t\tgoto ${names.local}\n` : ''
          chains.push(
            `\tchain ${names.external} {\n\t\t${ipX} saddr ${clusterCidr} goto ${names.service}\n\t\tfib saddr type local jump mark-for-masquerade\n\t\tfib saddr type local goto ${names.service}\n${local}\t}`,
          )
          if (localEps.length > 0) chains.push(`\tchain ${names.local} {\n\t\t${dispatch(localEps)}\n\t}`)
        } else chains.push(`\tchain ${names.external} {\n\t\tjump mark-for-masquerade\n\t\tgoto ${names.service}\n\t}`)
      }
      if (etpLocal && localEps.length === 0) noEndpointNodePorts.push(`${proto} . ${sp.nodePort} : drop`)
      chains.push(
        `\tchain ${names.service} {\n\t\t${ipX} daddr ${svc.clusterIP} ${proto} dport ${sp.port} ${ipX} saddr != ${clusterCidr} jump mark-for-masquerade\n\t\t${dispatch(eps)}\n\t}`,
      )
      for (const ep of eps) {
        const to = hostPort(ep.ip, faults.wrongPortFor?.ip === ep.ip ? faults.wrongPortFor.port : ep.port)
        const dnat = faults.dropDnatFor === ep.ip ? '' : `\t\tmeta l4proto ${proto} dnat to ${to}\n`
        chains.push(
          `\tchain ${nftEndpointChainName(base, ep.ip, ep.port)} {\n\t\t${ipX} saddr ${ep.ip} jump mark-for-masquerade\n${dnat}\t}`,
        )
      }
    }
  }
  const clusterIps = [...new Set(services.map((s) => s.clusterIP))]
  return `table ${ipX} kube-proxy {
\tcomment "rules for kube-proxy"
\tset cluster-ips {
\t\ttype ${addrType}
\t\tcomment "Active ClusterIPs"
${elements(clusterIps)}\t}
\tset nodeport-ips {
\t\ttype ${addrType}
\t\tcomment "IPs that accept NodePort traffic"
${elements([nodeIp])}\t}
\tmap no-endpoint-services {
\t\ttype ${addrType} . inet_proto . inet_service : verdict
\t\tcomment "vmap to drop or reject packets to services with no endpoints"
${elements(noEndpoints)}\t}
\tmap no-endpoint-nodeports {
\t\ttype inet_proto . inet_service : verdict
${elements(noEndpointNodePorts)}\t}
\tmap firewall-ips {
\t\ttype ${addrType} . inet_proto . inet_service : verdict
\t}
\tmap service-ips {
\t\ttype ${addrType} . inet_proto . inet_service : verdict
\t\tcomment "ClusterIP, ExternalIP and LoadBalancer IP traffic"
${elements(serviceIps)}\t}
\tmap service-nodeports {
\t\ttype inet_proto . inet_service : verdict
\t\tcomment "NodePort traffic"
${elements(nodePorts)}\t}
\tchain filter-prerouting {
\t\ttype filter hook prerouting priority -110; policy accept;
\t\tct state new jump firewall-check
\t}
\tchain filter-input {
\t\ttype filter hook input priority -110; policy accept;
\t\tct state new jump nodeport-endpoints-check
\t\tct state new jump service-endpoints-check
\t}
\tchain filter-forward {
\t\ttype filter hook forward priority -110; policy accept;
\t\tct state new jump service-endpoints-check
\t\tct state new jump cluster-ips-check
\t}
\tchain filter-output {
\t\ttype filter hook output priority -110; policy accept;
\t\tct state new jump service-endpoints-check
\t\tct state new jump firewall-check
\t}
\tchain filter-output-post-dnat {
\t\ttype filter hook output priority -90; policy accept;
\t\tct state new jump cluster-ips-check
\t}
\tchain nat-prerouting {
\t\ttype nat hook prerouting priority dstnat; policy accept;
${faults.unhookPrerouting ? '' : '\t\tjump services\n'}\t}
\tchain nat-output {
\t\ttype nat hook output priority -100; policy accept;
\t\tjump services
\t}
\tchain nat-postrouting {
\t\ttype nat hook postrouting priority srcnat; policy accept;
\t\tjump masquerading
\t}
\tchain nodeport-endpoints-check {
\t\t${ipX} daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports
\t}
\tchain service-endpoints-check {
\t\t${ipX} daddr . meta l4proto . th dport vmap @no-endpoint-services
\t}
\tchain firewall-check {
\t\t${ipX} daddr . meta l4proto . th dport vmap @firewall-ips
\t}
\tchain services {
\t\t${ipX} daddr . meta l4proto . th dport vmap @service-ips
\t\t${ipX} daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports
\t}
\tchain masquerading {
\t\tmeta mark & 0x00004000 == 0x00000000 return
\t\tmeta mark set meta mark ^ 0x00004000
${faults.omitMasquerade ? '' : '\t\tmasquerade fully-random\n'}\t}
\tchain cluster-ips-check {
\t\t${ipX} daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"
\t}
\tchain mark-for-masquerade {
\t\tmeta mark set meta mark | 0x00004000
\t}
\tchain reject-chain {
\t\tcomment "helper for @no-endpoint-services / @no-endpoint-nodeports"
\t\treject
\t}
${chains.join('\n')}
}
`
}
