import {ipvsSetName} from '../../src/model/chain-names.js'
import {
  CLUSTER_CIDR,
  CLUSTER_CIDR6,
  endpointPort,
  familyView,
  selects,
  type LabNode,
  type LabPod,
  type LabService,
} from './lab-cluster.js'

/** Ways an IPVS node goes wrong. */
export interface IpvsFaults {
  omitRealServer?: string
  staleRealServer?: {ip: string; port: number}
  weightZeroFor?: string
  wrongPortFor?: {ip: string; port: number}
  omitClusterVs?: boolean
  omitNodePortVs?: boolean
  unbindVip?: string
  omitIpsetMember?: {set: string; member: string}
  sysctl?: Record<string, string>
  omitLoopBack?: boolean
}

export interface IpvsTexts {
  iptablesSave: string
  ipvsadmSave: string
  ipvsadmList: string
  ipsetSave: string
  kubeIpvs0: string
  sysctl: string
}

/** The header `ipvsadm -Ln` prints once, above every family's virtual servers. */
const IPVSADM_LIST_HEADER = [
  'IP Virtual Server version 1.2.1 (size=4096)',
  'Prot LocalAddress:Port Scheduler Flags',
  '  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn',
]

/**
 * What an IPVS-mode kube-proxy leaves on `node`, as the tools print it (ipvsadm -Sn and -Ln, ipset save, ip -o addr,
 * sysctl, iptables-save); with family 6 its IPv6 half: virtual and real servers as "[ip]:port", the KUBE-6-* ipsets
 * (family inet6), inet6 addresses on kube-ipvs0 and the ip6tables-save glue. `ipvsadmList` has no header then.
 */
export function kubeProxyIpvsTexts(
  node: LabNode,
  allServices: LabService[],
  allPods: LabPod[],
  faults: IpvsFaults = {},
  family: 4 | 6 = 4,
): IpvsTexts {
  const {services, pods} = familyView(family, allServices, allPods)
  const nodeIp = family === 6 ? node.ip6! : node.ip
  const at = (ip: string, port: number) => (family === 6 ? `[${ip}]:${port}` : `${ip}:${port}`)
  const set = (name: string) => ipvsSetName(name, family)
  const save: string[] = []
  const list: string[] = family === 6 ? [] : [...IPVSADM_LIST_HEADER]
  const sets: Record<string, string[]> = {
    'KUBE-CLUSTER-IP': [],
    'KUBE-LOOP-BACK': [],
    'KUBE-NODE-PORT-TCP': [],
    'KUBE-NODE-PORT-UDP': [],
  }
  const vips = new Set<string>()
  const flag = (proto: string) => (proto === 'udp' ? '-u' : '-t')
  const addVs = (proto: string, ip: string, port: number, reals: Array<{ip: string; port: number; weight: number}>) => {
    save.push(`-A ${flag(proto)} ${at(ip, port)} -s rr`)
    list.push(`${proto.toUpperCase()}  ${at(ip, port)} rr`)
    for (const r of reals) {
      save.push(`-a ${flag(proto)} ${at(ip, port)} -r ${at(r.ip, r.port)} -m -w ${r.weight}`)
      list.push(`  -> ${at(r.ip, r.port).padEnd(28)}Masq    ${r.weight}      0          0`)
    }
  }
  for (const svc of services) {
    vips.add(svc.clusterIP)
    for (const sp of svc.ports) {
      const proto = sp.protocol.toLowerCase()
      const eps = pods.filter(
        (p) => selects(svc, p) && p.ready && endpointPort(sp, p) > 0 && p.ip !== faults.omitRealServer,
      )
      const reals = eps.map((p) => ({
        ip: p.ip,
        port: faults.wrongPortFor?.ip === p.ip ? faults.wrongPortFor.port : endpointPort(sp, p),
        weight: faults.weightZeroFor === p.ip ? 0 : 1,
      }))
      if (faults.staleRealServer && svc === services[0]) reals.push({...faults.staleRealServer, weight: 1})
      if (!(faults.omitClusterVs && svc === services[0])) addVs(proto, svc.clusterIP, sp.port, reals)
      sets['KUBE-CLUSTER-IP'].push(`${svc.clusterIP},${proto}:${sp.port}`)
      for (const p of eps.filter((x) => x.node === node.name))
        if (!faults.omitLoopBack) sets['KUBE-LOOP-BACK'].push(`${p.ip},${proto}:${endpointPort(sp, p)},${p.ip}`)
      if (sp.nodePort) {
        if (!faults.omitNodePortVs) addVs(proto, nodeIp, sp.nodePort, reals)
        sets[`KUBE-NODE-PORT-${sp.protocol}`].push(String(sp.nodePort))
      }
    }
  }
  if (faults.omitIpsetMember)
    sets[faults.omitIpsetMember.set] = sets[faults.omitIpsetMember.set].filter(
      (m) => m !== faults.omitIpsetMember!.member,
    )
  const inet = family === 6 ? 'inet6' : 'inet'
  const ipset = [
    `create ${set('KUBE-CLUSTER-IP')} hash:ip,port family ${inet} hashsize 1024 maxelem 65536 comment bucketsize 12 initval 0x1e2d3c4b`,
    ...sets['KUBE-CLUSTER-IP'].map((m) => `add ${set('KUBE-CLUSTER-IP')} ${m}`),
    `create ${set('KUBE-LOOP-BACK')} hash:ip,port,ip family ${inet} hashsize 1024 maxelem 65536 comment bucketsize 12 initval 0x5a6b7c8d`,
    ...sets['KUBE-LOOP-BACK'].map((m) => `add ${set('KUBE-LOOP-BACK')} ${m}`),
    `create ${set('KUBE-IPVS-IPS')} hash:ip family ${inet} hashsize 1024 maxelem 65536 comment bucketsize 12 initval 0x0a1b2c3d`,
    ...[...vips].map((ip) => `add ${set('KUBE-IPVS-IPS')} ${ip}`),
    `create ${set('KUBE-NODE-PORT-TCP')} bitmap:port range 0-65535 comment`,
    ...sets['KUBE-NODE-PORT-TCP'].map((m) => `add ${set('KUBE-NODE-PORT-TCP')} ${m}`),
    `create ${set('KUBE-NODE-PORT-UDP')} bitmap:port range 0-65535 comment`,
    ...sets['KUBE-NODE-PORT-UDP'].map((m) => `add ${set('KUBE-NODE-PORT-UDP')} ${m}`),
    '',
  ].join('\n')
  const bound = [...vips].filter((ip) => ip !== faults.unbindVip)
  const kubeIpvs0 =
    bound
      .map((ip) =>
        family === 6
          ? `7: kube-ipvs0    inet6 ${ip}/128 scope global \\       valid_lft forever preferred_lft forever`
          : `7: kube-ipvs0    inet ${ip}/32 scope global kube-ipvs0\\       valid_lft forever preferred_lft forever`,
      )
      .join('\n') + '\n'
  const sysctls = {
    'net.ipv4.ip_forward': '1',
    'net.ipv4.vs.conntrack': '1',
    'net.ipv4.vs.conn_reuse_mode': '0',
    'net.ipv4.vs.expire_nodest_conn': '1',
    'net.ipv4.conf.all.arp_ignore': '0',
    'net.ipv4.conf.all.arp_announce': '0',
    ...faults.sysctl,
  }
  const iptablesSave = [
    `# Generated by ${family === 6 ? 'ip6tables' : 'iptables'}-nft-save v1.8.9 (nf_tables) on Sat Nov 21 12:00:00 2026`,
    '*filter',
    ':INPUT ACCEPT [0:0]',
    ':FORWARD ACCEPT [0:0]',
    ':OUTPUT ACCEPT [0:0]',
    ':KUBE-FORWARD - [0:0]',
    ':KUBE-IPVS-FILTER - [0:0]',
    ':KUBE-NODE-PORT - [0:0]',
    '-A INPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER',
    '-A INPUT -m comment --comment "kube-proxy firewall rules" -j KUBE-NODE-PORT',
    '-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD',
    '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT',
    '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
    `-A KUBE-IPVS-FILTER -m set --match-set ${set('KUBE-CLUSTER-IP')} dst,dst -j RETURN`,
    `-A KUBE-IPVS-FILTER -m set --match-set ${set('KUBE-LOOP-BACK')} dst,dst,src -j RETURN`,
    `-A KUBE-IPVS-FILTER -m conntrack --ctstate NEW -m set --match-set ${set('KUBE-IPVS-IPS')} dst -j REJECT --reject-with ${family === 6 ? 'icmp6-port-unreachable' : 'icmp-port-unreachable'}`,
    'COMMIT',
    '*nat',
    ':PREROUTING ACCEPT [0:0]',
    ':INPUT ACCEPT [0:0]',
    ':OUTPUT ACCEPT [0:0]',
    ':POSTROUTING ACCEPT [0:0]',
    ':KUBE-MARK-MASQ - [0:0]',
    ':KUBE-NODE-PORT - [0:0]',
    ':KUBE-POSTROUTING - [0:0]',
    ':KUBE-SERVICES - [0:0]',
    '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING',
    '-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000',
    `-A KUBE-NODE-PORT -p tcp -m comment --comment "Kubernetes nodeport TCP port for masquerade purpose" -m set --match-set ${set('KUBE-NODE-PORT-TCP')} dst -j KUBE-MARK-MASQ`,
    `-A KUBE-POSTROUTING -m comment --comment "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose" -m set --match-set ${set('KUBE-LOOP-BACK')} dst,dst,src -j MASQUERADE`,
    '-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN',
    '-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0',
    '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully',
    `-A KUBE-SERVICES ! -s ${family === 6 ? CLUSTER_CIDR6 : CLUSTER_CIDR} -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set ${set('KUBE-CLUSTER-IP')} dst,dst -j KUBE-MARK-MASQ`,
    '-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT',
    `-A KUBE-SERVICES -m set --match-set ${set('KUBE-CLUSTER-IP')} dst,dst -j ACCEPT`,
    'COMMIT',
    '',
  ].join('\n')
  return {
    iptablesSave,
    ipvsadmSave: save.join('\n') + '\n',
    ipvsadmList: list.join('\n') + '\n',
    ipsetSave: ipset,
    kubeIpvs0,
    sysctl:
      Object.entries(sysctls)
        .map(([k, v]) => `${k} = ${v}`)
        .join('\n') + '\n',
  }
}
