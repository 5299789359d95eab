import type {NodeObservation} from '../../src/node/observation.js'
import {interpretPathReads, type RawPathReads} from '../../src/node/read/path-reads.js'
import {DNS, NODES, WEB, labPods} from '../fixtures/lab-cluster.js'

/** A node's packet-path reads as the commands print them (the lab's healthy values), with a fault's changes. */
export interface PathFaults {
  sysctl?: Record<string, string>
  /** sysctl keys the node does not have (br_netfilter not loaded). */
  absent?: string[]
  /** The route table without node-b's pod CIDR (`missing`), or with it as another route type. */
  podRoute?: 'missing' | 'unreachable'
  conntrack?: string[]
  /** Entries of `conntrack -L -p udp -d 10.96.10.10` (the web Service made UDP in those cases). */
  udp?: string[]
  /** More entries of `conntrack -L -p udp -d 10.96.0.10` (cluster DNS, read on every svc run) than a healthy one. */
  dnsUdp?: string[]
  conntrackMissing?: boolean
}
const ok = (stdout: string) => ({code: 0, stdout, stderr: ''})
export function pathReads(node: 'node-a' | 'node-b', f: PathFaults = {}): RawPathReads {
  const self = NODES.find((n) => n.name === node)!
  const other = NODES.find((n) => n.name !== node)!
  const sysctl = {
    'net.ipv4.ip_forward': '1',
    'net.bridge.bridge-nf-call-iptables': '1',
    'net.netfilter.nf_conntrack_count': '12',
    'net.netfilter.nf_conntrack_max': '262144',
    'net.ipv4.conf.all.rp_filter': '0',
    'net.ipv4.conf.all.route_localnet': '1',
    ...f.sysctl,
  }
  const absent = f.absent ?? []
  const otherRoute =
    node === 'node-a' && f.podRoute === 'missing'
      ? []
      : node === 'node-a' && f.podRoute === 'unreachable'
        ? [`unreachable ${other.podCIDR}`]
        : [`${other.podCIDR} via ${other.ip} dev eth0`]
  const routeGet = (ip: string) => {
    if (labPods().find((p) => p.ip === ip)!.node === node)
      return ok(`${ip} dev cbr0 src ${self.gateway} uid 0 \\    cache `)
    if (node === 'node-a' && f.podRoute === 'missing')
      return ok(`${ip} via 10.200.0.1 dev eth0 src ${self.ip} uid 0 \\    cache `)
    if (node === 'node-a' && f.podRoute === 'unreachable')
      return {code: 2, stdout: '', stderr: 'RTNETLINK answers: No route to host\n'}
    return ok(`${ip} via ${other.ip} dev eth0 src ${self.ip} uid 0 \\    cache `)
  }
  return {
    sysctls: {
      code: absent.length > 0 ? 255 : 0,
      stdout: Object.entries(sysctl)
        .filter(([k]) => !absent.includes(k))
        .map(([k, v]) => `${k} = ${v}\n`)
        .join(''),
      stderr: absent
        .map((k) => `sysctl: cannot stat /proc/sys/${k.replaceAll('.', '/')}: No such file or directory\n`)
        .join(''),
    },
    routeTable: ok(
      [
        'default via 10.200.0.1 dev eth0 onlink',
        `10.200.0.0/24 dev eth0 proto kernel scope link src ${self.ip}`,
        `${self.podCIDR} dev cbr0 proto kernel scope link src ${self.gateway}`,
        ...otherRoute,
        '',
      ].join('\n'),
    ),
    routeGet: ['10.244.1.10', '10.244.2.10', '10.244.2.11'].map((address) => ({address, ...routeGet(address)})),
    conntrack: [
      {
        protocol: 'tcp',
        address: WEB.clusterIP,
        ...(f.conntrackMissing
          ? {code: 127, stdout: '', stderr: 'sh: 1: conntrack: not found\n'}
          : ok(
              [
                `tcp      6 86390 ESTABLISHED src=10.244.1.100 dst=10.96.10.10 sport=51000 dport=80 src=10.244.2.10 dst=10.244.1.100 sport=8080 dport=51000 [ASSURED] mark=0 use=1`,
                `tcp      6 110 TIME_WAIT src=10.244.1.100 dst=10.96.10.10 sport=51002 dport=80 src=10.244.1.10 dst=10.244.1.100 sport=8080 dport=51002 [ASSURED] mark=0 use=1`,
                ...(f.conntrack ?? []),
                '',
              ].join('\n'),
            )),
      },
      {
        protocol: 'udp',
        address: WEB.clusterIP,
        ...ok(
          [
            'udp      17 25 src=10.244.1.100 dst=10.96.10.10 sport=40001 dport=80 src=10.244.2.11 dst=10.244.1.100 sport=8080 dport=40001 mark=0 use=1',
            ...(f.udp ?? []),
            '',
          ].join('\n'),
        ),
      },
      {
        protocol: 'udp',
        address: DNS.clusterIP,
        ...ok(
          [
            `udp      17 21 src=${self.ip} dst=${DNS.clusterIP} sport=41000 dport=53 src=10.244.1.53 dst=${self.ip} sport=53 dport=41000 mark=0 use=1`,
            ...(f.dnsUdp ?? []),
            '',
          ].join('\n'),
        ),
      },
    ],
  }
}
export const withPath = (faults: Partial<Record<'node-a' | 'node-b', PathFaults>> = {}) => ({
  editObservation: Object.fromEntries(
    (['node-a', 'node-b'] as const).map((node) => [
      node,
      (obs: NodeObservation): NodeObservation => ({...obs, path: interpretPathReads(pathReads(node, faults[node]))}),
    ]),
  ),
})
