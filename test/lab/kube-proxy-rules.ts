import {endpointChainName, serviceChainNames, servicePortName} from '../../src/model/chain-names.js'
import {
  CLUSTER_CIDR,
  CLUSTER_CIDR6,
  familyView,
  labEndpoints,
  type LabNode,
  type LabPod,
  type LabService,
} from './lab-cluster.js'

/** Ways to break one node's rules, as a stuck kube-proxy or a hand edit would. */
export interface RuleFaults {
  /** Drop the DNAT rule from the SEP chain of this endpoint IP. */
  dropDnatFor?: string
  /** Leave this endpoint IP out, as a kube-proxy that missed an update would. */
  omitEndpoint?: string
  /** Add an endpoint to KUBE-SVC that no EndpointSlice has. */
  staleEndpoint?: {ip: string; port: number}
  omitNodePorts?: boolean
  unhookPrerouting?: boolean
  omitMasquerade?: boolean
  /** Leave out the ClientIP affinity rules of a Service that asks for them. */
  omitAffinity?: boolean
  /** DNAT this endpoint IP to this port instead of its target port. */
  wrongPortFor?: {ip: string; port: number}
  /** Leave the first Service's ClusterIP out of KUBE-SERVICES (nftables: of the service-ips map), as a missed update would. */
  omitClusterIp?: boolean
}

const q = (s: string) => `"${s}"`

/**
 * The iptables-restore input kube-proxy (1.28+, iptables mode) would write on `node` for the lab's Services; with
 * family 6 the ip6tables-restore input for their IPv6 ClusterIPs and the Pods' IPv6 addresses (same chain names:
 * kube-proxy hashes the service port name, and the endpoint as "[ip]:port").
 */
export function kubeProxyRules(
  node: LabNode,
  allServices: LabService[],
  allPods: LabPod[],
  faults: RuleFaults = {},
  family: 4 | 6 = 4,
): string {
  const {services, pods} = familyView(family, allServices, allPods)
  const host = family === 6 ? '/128' : '/32'
  const clusterCidr = family === 6 ? CLUSTER_CIDR6 : CLUSTER_CIDR
  const hostPort = (ip: string, port: number) => (family === 6 ? `[${ip}]:${port}` : `${ip}:${port}`)
  const mask = family === 6 ? 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff' : '255.255.255.255'
  const rejectWith = family === 6 ? 'icmp6-port-unreachable' : 'icmp-port-unreachable'
  const filter: string[] = []
  const nat: string[] = []
  const natChains = new Set<string>()
  for (const svc of services) {
    for (const sp of svc.ports) {
      const proto = sp.protocol.toLowerCase()
      const spn = servicePortName(svc.namespace, svc.name, sp.name)
      const chains = serviceChainNames(spn, proto)
      const eps = labEndpoints(svc, sp, pods, {
        omit: faults.omitEndpoint,
        stale: svc === services[0] ? faults.staleEndpoint : undefined,
      })
      const etpLocal = svc.externalTrafficPolicy === 'Local' && !!sp.nodePort
      const localEps = eps.filter((e) => e.node === node.name)
      const match = `-d ${svc.clusterIP}${host} -p ${proto} -m comment --comment ${q(`${spn} cluster IP`)} -m ${proto} --dport ${sp.port}`
      if (eps.length === 0) {
        filter.push(
          `-A KUBE-SERVICES ${match} -j REJECT --reject-with ${rejectWith}`.replace(
            `-m comment --comment ${q(`${spn} cluster IP`)}`,
            `-m comment --comment ${q(`${spn} has no endpoints`)}`,
          ),
        )
        if (sp.nodePort)
          filter.push(
            `-A KUBE-EXTERNAL-SERVICES -p ${proto} -m comment --comment ${q(`${spn} has no endpoints`)} -m addrtype --dst-type LOCAL -m ${proto} --dport ${sp.nodePort} -j REJECT --reject-with ${rejectWith}`,
          )
        continue
      }
      if (!(faults.omitClusterIp && svc === services[0])) nat.push(`-A KUBE-SERVICES ${match} -j ${chains.svc}`)
      natChains.add(chains.svc)
      nat.push(`-A ${chains.svc} ! -s ${clusterCidr} ${match} -j KUBE-MARK-MASQ`)
      if (sp.nodePort && !faults.omitNodePorts) {
        natChains.add(chains.ext)
        nat.push(
          `-A KUBE-NODEPORTS -p ${proto} -m comment --comment ${q(spn)} -m ${proto} --dport ${sp.nodePort} -j ${chains.ext}`,
        )
        if (etpLocal) {
          // externalTrafficPolicy: Local keeps the client's address: only this node's endpoints, no masquerade.
          nat.push(
            `-A ${chains.ext} -s ${clusterCidr} -m comment --comment ${q(`pod traffic for ${spn} external destinations`)} -j ${chains.svc}`,
          )
          nat.push(
            `-A ${chains.ext} -m comment --comment ${q(`masquerade LOCAL traffic for ${spn} external destinations`)} -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ`,
          )
          nat.push(
            `-A ${chains.ext} -m comment --comment ${q(`route LOCAL traffic for ${spn} external destinations`)} -m addrtype --src-type LOCAL -j ${chains.svc}`,
          )
          if (localEps.length > 0) nat.push(`-A ${chains.ext} -j ${chains.svl}`)
        } else {
          nat.push(
            `-A ${chains.ext} -m comment --comment ${q(`masquerade traffic for ${spn} external destinations`)} -j KUBE-MARK-MASQ`,
          )
          nat.push(`-A ${chains.ext} -j ${chains.svc}`)
        }
      }
      if (etpLocal && localEps.length === 0)
        filter.push(
          `-A KUBE-EXTERNAL-SERVICES -p ${proto} -m comment --comment ${q(`${spn} has no local endpoints`)} -m addrtype --dst-type LOCAL -m ${proto} --dport ${sp.nodePort} -j DROP`,
        )
      const jumps = (chain: string, list: typeof eps) =>
        list.forEach((ep, i) => {
          const addr = hostPort(ep.ip, ep.port)
          const prob =
            i < list.length - 1
              ? ` -m statistic --mode random --probability ${(1 / (list.length - i)).toFixed(10)}`
              : ''
          nat.push(
            `-A ${chain} -m comment --comment ${q(`${spn} -> ${addr}`)}${prob} -j ${endpointChainName(spn, proto, addr)}`,
          )
        })
      if (etpLocal && localEps.length > 0) {
        natChains.add(chains.svl)
        jumps(chains.svl, localEps)
      }
      // ClientIP affinity: a client seen recently goes back to its endpoint before any random choice.
      if (svc.affinitySeconds && !faults.omitAffinity)
        for (const ep of eps) {
          const sep = endpointChainName(spn, proto, hostPort(ep.ip, ep.port))
          nat.push(
            `-A ${chains.svc} -m comment --comment ${q(`${spn} -> ${hostPort(ep.ip, ep.port)}`)} -m recent --rcheck --seconds ${svc.affinitySeconds} --reap --name ${sep} --mask ${mask} --rsource -j ${sep}`,
          )
        }
      jumps(chains.svc, eps)
      eps.forEach((ep) => {
        const addr = hostPort(ep.ip, ep.port)
        const sep = endpointChainName(spn, proto, addr)
        natChains.add(sep)
        nat.push(`-A ${sep} -s ${ep.ip}${host} -m comment --comment ${q(spn)} -j KUBE-MARK-MASQ`)
        const to = faults.wrongPortFor?.ip === ep.ip ? hostPort(ep.ip, faults.wrongPortFor.port) : addr
        const affinity =
          svc.affinitySeconds && !faults.omitAffinity ? ` -m recent --set --name ${sep} --mask ${mask} --rsource` : ''
        if (faults.dropDnatFor !== ep.ip)
          nat.push(
            `-A ${sep} -p ${proto} -m comment --comment ${q(spn)}${affinity} -m ${proto} -j DNAT --to-destination ${to}`,
          )
      })
    }
  }
  nat.push(
    `-A KUBE-SERVICES -m comment --comment ${q('kubernetes service nodeports; NOTE: this must be the last rule in this chain')} -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`,
  )
  return [
    '*filter',
    ':INPUT ACCEPT [0:0]',
    ':FORWARD ACCEPT [0:0]',
    ':OUTPUT ACCEPT [0:0]',
    ':KUBE-EXTERNAL-SERVICES - [0:0]',
    ':KUBE-FORWARD - [0:0]',
    ':KUBE-NODEPORTS - [0:0]',
    ':KUBE-PROXY-CANARY - [0:0]',
    ':KUBE-PROXY-FIREWALL - [0:0]',
    ':KUBE-SERVICES - [0:0]',
    `-A INPUT -m conntrack --ctstate NEW -m comment --comment ${q('kubernetes load balancer firewall')} -j KUBE-PROXY-FIREWALL`,
    `-A INPUT -m comment --comment ${q('kubernetes health check service ports')} -j KUBE-NODEPORTS`,
    `-A INPUT -m conntrack --ctstate NEW -m comment --comment ${q('kubernetes externally-visible service portals')} -j KUBE-EXTERNAL-SERVICES`,
    `-A FORWARD -m conntrack --ctstate NEW -m comment --comment ${q('kubernetes load balancer firewall')} -j KUBE-PROXY-FIREWALL`,
    `-A FORWARD -m comment --comment ${q('kubernetes forwarding rules')} -j KUBE-FORWARD`,
    `-A FORWARD -m conntrack --ctstate NEW -m comment --comment ${q('kubernetes service portals')} -j KUBE-SERVICES`,
    `-A FORWARD -m conntrack --ctstate NEW -m comment --comment ${q('kubernetes externally-visible service portals')} -j KUBE-EXTERNAL-SERVICES`,
    `-A OUTPUT -m conntrack --ctstate NEW -m comment --comment ${q('kubernetes load balancer firewall')} -j KUBE-PROXY-FIREWALL`,
    `-A OUTPUT -m conntrack --ctstate NEW -m comment --comment ${q('kubernetes service portals')} -j KUBE-SERVICES`,
    `-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP`,
    `-A KUBE-FORWARD -m comment --comment ${q('kubernetes forwarding rules')} -m mark --mark 0x4000/0x4000 -j ACCEPT`,
    `-A KUBE-FORWARD -m comment --comment ${q('kubernetes forwarding conntrack rule')} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
    ...filter,
    'COMMIT',
    '*nat',
    ':PREROUTING ACCEPT [0:0]',
    ':INPUT ACCEPT [0:0]',
    ':OUTPUT ACCEPT [0:0]',
    ':POSTROUTING ACCEPT [0:0]',
    ':KUBE-MARK-MASQ - [0:0]',
    ':KUBE-NODEPORTS - [0:0]',
    ':KUBE-POSTROUTING - [0:0]',
    ':KUBE-PROXY-CANARY - [0:0]',
    ':KUBE-SERVICES - [0:0]',
    ...[...natChains].sort().map((c) => `:${c} - [0:0]`),
    ...(faults.unhookPrerouting
      ? []
      : [`-A PREROUTING -m comment --comment ${q('kubernetes service portals')} -j KUBE-SERVICES`]),
    `-A OUTPUT -m comment --comment ${q('kubernetes service portals')} -j KUBE-SERVICES`,
    `-A POSTROUTING -m comment --comment ${q('kubernetes postrouting rules')} -j KUBE-POSTROUTING`,
    `-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000`,
    `-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN`,
    `-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000`,
    ...(faults.omitMasquerade
      ? []
      : [
          `-A KUBE-POSTROUTING -m comment --comment ${q('kubernetes service traffic requiring SNAT')} -j MASQUERADE --random-fully`,
        ]),
    ...nat,
    'COMMIT',
    '',
  ].join('\n')
}
