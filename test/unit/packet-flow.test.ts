/**
 * One packet-flow table through the three tracers, as kube-proxy's own proxier tests run one list of flows per mode:
 * each row is a packet at an entry point of a lab node, and what each mode's tracer must make of it (the verdict, each
 * DNAT destination with its share of new connections, and whether it is masqueraded), on rules written by the lab's
 * generators for that mode (test/fixtures/). Where kube-proxy's modes really differ (a wrong port of a ClusterIP,
 * localhost NodePorts, a LoadBalancer IP bound on kube-ipvs0), the row says so per mode. Every mode's generator writes
 * externalIPs and LoadBalancer IPs (with loadBalancerSourceRanges and externalTrafficPolicy Local for them); the IPVS
 * generator has no externalTrafficPolicy Local for NodePorts nor session affinity: those rows are for the other modes.
 */
import assert from 'node:assert/strict'
import {describe, test} from 'node:test'
import {IpsetState} from '../../src/parse/ipset-save.js'
import {parseDeviceAddresses, parseIpvsadm} from '../../src/parse/ipvsadm.js'
import {BufferSource} from '../../src/parse/dump-source.js'
import {IptablesSave} from '../../src/parse/iptables-save.js'
import {parseNftDump} from '../../src/parse/nft-dump.js'
import {IptablesTracer} from '../../src/trace/iptables-tracer.js'
import {IpvsTracer} from '../../src/trace/ipvs-tracer.js'
import {NftTracer} from '../../src/trace/nft-tracer.js'
import type {Packet, TraceResult, Tracer} from '../../src/trace/types.js'
import {kubeProxyIpvsTexts} from '../fixtures/kube-proxy-ipvs.js'
import {kubeProxyNftRules} from '../fixtures/kube-proxy-nft.js'
import {kubeProxyRules} from '../fixtures/kube-proxy-rules.js'
import {
  DNS,
  NODES,
  OUTSIDE_IP,
  WEB,
  dualStackNode,
  dualStackPods,
  dualStackService,
  labPods,
  type LabPod,
  type LabService,
} from '../fixtures/lab-cluster.js'

const MODES = ['iptables', 'nftables', 'ipvs'] as const
type Mode = (typeof MODES)[number]

/** The cluster a row's node programs: the lab's, or the lab changed. */
interface Cluster {
  web: LabService
  pods: LabPod[]
  family: 4 | 6
}
const LAB: Cluster = {web: WEB, pods: labPods(), family: 4}
const NO_ENDPOINTS: Cluster = {...LAB, pods: labPods().map((p) => (p.kind === 'web' ? {...p, ready: false} : p))}
const LOCAL_POLICY: Cluster = {...LAB, web: {...WEB, externalTrafficPolicy: 'Local'}}
const AFFINITY: Cluster = {...LAB, web: {...WEB, affinitySeconds: 10800}}
const DUAL_STACK: Cluster = {web: dualStackService(WEB), pods: dualStackPods(labPods()), family: 6}
const EXTERNAL_IP = '192.0.2.50'
const LB_IP = '192.0.2.80'
/** web as a LoadBalancer Service (a MetalLB-style ingress IP) with an external IP too. */
const EXPOSED: LabService = {...WEB, type: 'LoadBalancer', externalIPs: [EXTERNAL_IP], loadBalancerIPs: [LB_IP]}
const LB: Cluster = {...LAB, web: EXPOSED}
const LB_LOCAL: Cluster = {...LAB, web: {...EXPOSED, externalTrafficPolicy: 'Local'}}
/** externalTrafficPolicy Local, web-a1 not ready: node-a has no local endpoint left. */
const LB_LOCAL_NONE_HERE: Cluster = {
  ...LB_LOCAL,
  pods: labPods().map((p) => (p.name === 'web-a1' ? {...p, ready: false} : p)),
}
const LB_NO_ENDPOINTS: Cluster = {...NO_ENDPOINTS, web: EXPOSED}
/** loadBalancerSourceRanges: only the lab's outside network (OUTSIDE_IP's) may open connections to the LB IP. */
const LB_RANGES: Cluster = {...LAB, web: {...EXPOSED, loadBalancerSourceRanges: ['10.200.0.0/24']}}
const LB_DUAL_STACK: Cluster = {...DUAL_STACK, web: dualStackService(LB_RANGES.web)}

/** The tracer of `mode` for the lab node `nodeName`, on the rules the generators write for `cluster` in that mode. */
function tracerFor(mode: Mode, cluster: Cluster, nodeName: string, locallyGenerated: boolean): Tracer {
  const base = NODES.find((n) => n.name === nodeName)!
  const node = cluster.family === 6 ? dualStackNode(base) : base
  const services = [cluster.web, DNS]
  const localAddresses = [cluster.family === 6 ? node.ip6! : node.ip]
  const iptables = (text: string) => IptablesSave.parse(new BufferSource(Buffer.from(text)))
  if (mode === 'iptables')
    return new IptablesTracer(iptables(kubeProxyRules(node, services, cluster.pods, {}, cluster.family)), {
      localAddresses,
      locallyGenerated,
    })
  if (mode === 'nftables')
    return new NftTracer(parseNftDump(kubeProxyNftRules(node, services, cluster.pods, {}, cluster.family)), {
      localAddresses,
      locallyGenerated,
    })
  const texts = kubeProxyIpvsTexts(node, services, cluster.pods, {}, cluster.family)
  return new IpvsTracer(iptables(texts.iptablesSave), parseIpvsadm(texts.ipvsadmSave), {
    localAddresses,
    vips: parseDeviceAddresses(texts.kubeIpvs0),
    ipsets: IpsetState.parse(texts.ipsetSave),
    locallyGenerated,
    bridges: ['cbr0'],
  })
}

/**
 * A trace as the table writes it: one line per distinct outcome, "VERDICT [DESTINATION] SHARE% [masq] [sticky]", the
 * shares of equal outcomes added up, sorted.
 */
function flows(result: TraceResult): string[] {
  const seen = new Map<string, {head: string; flags: string; share: number}>()
  for (const o of result.outcomes) {
    const head = o.destination ? `${o.verdict} ${o.destination}` : o.verdict
    const flags = `${o.masquerade ? ' masq' : ''}${o.sticky ? ' sticky' : ''}`
    const flow = seen.get(head + flags) ?? {head, flags, share: 0}
    flow.share += o.probability
    seen.set(head + flags, flow)
  }
  return [...seen.values()].map((f) => `${f.head} ${Math.round(f.share * 100)}%${f.flags}`).sort()
}

/** DNAT to each endpoint with an equal share; `masq` lists the endpoints whose packets are masqueraded ('all': every one). */
function dnat(endpoints: string[], masq: 'all' | string[] = [], extra = ''): string[] {
  const share = `${Math.round(100 / endpoints.length)}%`
  return endpoints.map((e) => `DNAT ${e} ${share}${masq === 'all' || masq.includes(e) ? ' masq' : ''}${extra}`).sort()
}

const WEB_A1 = '10.244.1.10:8080'
const WEB_B1 = '10.244.2.10:8080'
const WEB_B2 = '10.244.2.11:8080'
const WEB_ALL = [WEB_A1, WEB_B1, WEB_B2]
const NODE_A = NODES[0].ip
const NODE_B = NODES[1].ip
const CLIENT_A = '10.244.1.100'

interface FlowRow {
  name: string
  cluster?: Cluster
  node?: string
  packet: Omit<Packet, 'sport'>
  /** The node itself sends it (OUTPUT), not a pod or another host. */
  fromNode?: boolean
  /** What every mode's tracer gives; `modes` instead where kube-proxy's modes differ or a mode has no such rules. */
  all?: string[]
  modes?: Partial<Record<Mode, string[]>>
}

const tcp = (src: string, dst: string, dport: number, inIface?: string): Omit<Packet, 'sport'> => ({
  src,
  dst,
  proto: 'tcp',
  dport,
  ...(inIface ? {inIface} : {}),
})

const ROWS: FlowRow[] = [
  {
    name: 'pod→ClusterIP: every endpoint, a third each, no masquerade',
    packet: tcp(CLIENT_A, WEB.clusterIP, 80, 'cbr0'),
    all: dnat(WEB_ALL),
  },
  {
    name: 'node→ClusterIP: every endpoint, masqueraded (the node is outside the cluster CIDR)',
    packet: tcp(NODE_A, WEB.clusterIP, 80),
    fromNode: true,
    all: dnat(WEB_ALL, 'all'),
  },
  {
    name: 'outside→NodePort: every endpoint, masqueraded (externalTrafficPolicy Cluster)',
    packet: tcp(OUTSIDE_IP, NODE_A, 30080, 'eth0'),
    all: dnat(WEB_ALL, 'all'),
  },
  {
    name: 'outside→NodePort of the other node: the same, from there',
    node: 'node-b',
    packet: tcp(OUTSIDE_IP, NODE_B, 30080, 'eth0'),
    all: dnat(WEB_ALL, 'all'),
  },
  {
    name: 'outside→ClusterIP routed to the node: every endpoint, masqueraded',
    packet: tcp(OUTSIDE_IP, WEB.clusterIP, 80, 'eth0'),
    all: dnat(WEB_ALL, 'all'),
  },
  {
    name: 'pod→itself (hairpin): masqueraded only when it lands on itself',
    packet: tcp('10.244.1.10', WEB.clusterIP, 80, 'cbr0'),
    all: dnat(WEB_ALL, [WEB_A1]),
  },
  {
    name: 'pod→ClusterIP of cluster DNS over UDP: its one endpoint',
    packet: {src: CLIENT_A, dst: DNS.clusterIP, proto: 'udp', dport: 53, inIface: 'cbr0'},
    all: ['DNAT 10.244.1.53:53 100%'],
  },
  {
    name: 'pod→ClusterIP of cluster DNS over TCP: its one endpoint',
    packet: tcp(CLIENT_A, DNS.clusterIP, 53, 'cbr0'),
    all: ['DNAT 10.244.1.53:53 100%'],
  },
  {
    name: 'pod→ClusterIP on a port the Service does not have: iptables lets it through untouched, nftables and IPVS reject it',
    packet: tcp(CLIENT_A, WEB.clusterIP, 81, 'cbr0'),
    modes: {iptables: ['ACCEPT 100%'], nftables: ['REJECT 100%'], ipvs: ['REJECT 100%']},
  },
  {
    name: 'pod→ClusterIP over UDP on a TCP port: as a wrong port',
    packet: {src: CLIENT_A, dst: WEB.clusterIP, proto: 'udp', dport: 80, inIface: 'cbr0'},
    modes: {iptables: ['ACCEPT 100%'], nftables: ['REJECT 100%'], ipvs: ['REJECT 100%']},
  },
  {
    name: 'outside→a node port no Service has: delivered to the node untouched',
    packet: tcp(OUTSIDE_IP, NODE_A, 30081, 'eth0'),
    all: ['ACCEPT 100%'],
  },
  {
    name: 'node→localhost NodePort (127.0.0.1): iptables DNATs it (localhostNodePorts), nftables and IPVS do not (IPVS marks it for masquerade: the port is in KUBE-NODE-PORT-TCP)',
    packet: tcp('127.0.0.1', '127.0.0.1', 30080),
    fromNode: true,
    modes: {iptables: dnat(WEB_ALL, 'all'), nftables: ['ACCEPT 100%'], ipvs: ['ACCEPT 100% masq']},
  },
  {
    name: 'a Service without endpoints: pod→ClusterIP rejected (IPVS: its virtual server has no real server, dropped)',
    cluster: NO_ENDPOINTS,
    packet: tcp(CLIENT_A, WEB.clusterIP, 80, 'cbr0'),
    modes: {iptables: ['REJECT 100%'], nftables: ['REJECT 100%'], ipvs: ['DROP 100%']},
  },
  {
    name: 'a Service without endpoints: node→ClusterIP rejected (IPVS: dropped, marked for masquerade on its way)',
    cluster: NO_ENDPOINTS,
    packet: tcp(NODE_A, WEB.clusterIP, 80),
    fromNode: true,
    modes: {iptables: ['REJECT 100%'], nftables: ['REJECT 100%'], ipvs: ['DROP 100% masq']},
  },
  {
    name: 'a Service without endpoints: outside→NodePort rejected (IPVS: dropped)',
    cluster: NO_ENDPOINTS,
    packet: tcp(OUTSIDE_IP, NODE_A, 30080, 'eth0'),
    modes: {iptables: ['REJECT 100%'], nftables: ['REJECT 100%'], ipvs: ['DROP 100%']},
  },
  {
    name: 'externalTrafficPolicy Local: outside→NodePort on a node with local endpoints keeps to them, unmasqueraded',
    cluster: LOCAL_POLICY,
    node: 'node-b',
    packet: tcp(OUTSIDE_IP, NODE_B, 30080, 'eth0'),
    modes: {iptables: dnat([WEB_B1, WEB_B2]), nftables: dnat([WEB_B1, WEB_B2])},
  },
  {
    name: 'externalTrafficPolicy Local: pod→ClusterIP still reaches every endpoint',
    cluster: LOCAL_POLICY,
    node: 'node-b',
    packet: tcp('10.244.2.100', WEB.clusterIP, 80, 'cbr0'),
    modes: {iptables: dnat(WEB_ALL), nftables: dnat(WEB_ALL)},
  },
  {
    name: 'ClientIP affinity: pod→ClusterIP, every endpoint, sticky',
    cluster: AFFINITY,
    packet: tcp(CLIENT_A, WEB.clusterIP, 80, 'cbr0'),
    modes: {iptables: dnat(WEB_ALL, [], ' sticky')},
  },
  {
    name: 'IPv6: pod→ClusterIP, every endpoint, a third each',
    cluster: DUAL_STACK,
    packet: tcp('fd00:10:244:1::100', 'fd00:10:96::10:10', 80, 'cbr0'),
    all: dnat(['[fd00:10:244:1::10]:8080', '[fd00:10:244:2::10]:8080', '[fd00:10:244:2::11]:8080']),
  },
  {
    name: 'IPv6: outside→NodePort, masqueraded',
    cluster: DUAL_STACK,
    packet: tcp('fd00:10:200::100', 'fd00:10:200::11', 30080, 'eth0'),
    all: dnat(['[fd00:10:244:1::10]:8080', '[fd00:10:244:2::10]:8080', '[fd00:10:244:2::11]:8080'], 'all'),
  },
  {
    name: 'outside→externalIP: every endpoint, masqueraded (externalTrafficPolicy Cluster)',
    cluster: LB,
    packet: tcp(OUTSIDE_IP, EXTERNAL_IP, 80, 'eth0'),
    all: dnat(WEB_ALL, 'all'),
  },
  {
    name: 'outside→LoadBalancer IP: every endpoint, masqueraded (externalTrafficPolicy Cluster)',
    cluster: LB,
    packet: tcp(OUTSIDE_IP, LB_IP, 80, 'eth0'),
    all: dnat(WEB_ALL, 'all'),
  },
  {
    name: 'outside→LoadBalancer IP on a port the Service does not have: iptables and nftables route it on untouched, IPVS rejects it (the IP is bound on kube-ipvs0)',
    cluster: LB,
    packet: tcp(OUTSIDE_IP, LB_IP, 81, 'eth0'),
    modes: {iptables: ['ACCEPT 100%'], nftables: ['ACCEPT 100%'], ipvs: ['REJECT 100%']},
  },
  {
    name: 'externalTrafficPolicy Local: outside→externalIP on a node with local endpoints keeps to them, unmasqueraded',
    cluster: LB_LOCAL,
    node: 'node-b',
    packet: tcp(OUTSIDE_IP, EXTERNAL_IP, 80, 'eth0'),
    all: dnat([WEB_B1, WEB_B2]),
  },
  {
    name: 'externalTrafficPolicy Local: outside→LoadBalancer IP on a node with local endpoints keeps to them, unmasqueraded',
    cluster: LB_LOCAL,
    node: 'node-b',
    packet: tcp(OUTSIDE_IP, LB_IP, 80, 'eth0'),
    all: dnat([WEB_B1, WEB_B2]),
  },
  {
    name: 'externalTrafficPolicy Local: outside→LoadBalancer IP on a node without local endpoints is dropped',
    cluster: LB_LOCAL_NONE_HERE,
    packet: tcp(OUTSIDE_IP, LB_IP, 80, 'eth0'),
    all: ['DROP 100%'],
  },
  {
    name: 'externalTrafficPolicy Local: outside→externalIP on a node without local endpoints is dropped',
    cluster: LB_LOCAL_NONE_HERE,
    packet: tcp(OUTSIDE_IP, EXTERNAL_IP, 80, 'eth0'),
    all: ['DROP 100%'],
  },
  {
    name: 'externalTrafficPolicy Local: pod→externalIP on a node without local endpoints still reaches every endpoint (IPVS: its virtual server holds local endpoints only, for every source: dropped)',
    cluster: LB_LOCAL_NONE_HERE,
    packet: tcp(CLIENT_A, EXTERNAL_IP, 80, 'cbr0'),
    modes: {iptables: dnat([WEB_B1, WEB_B2]), nftables: dnat([WEB_B1, WEB_B2]), ipvs: ['DROP 100%']},
  },
  {
    name: 'a Service without endpoints: outside→LoadBalancer IP rejected (IPVS: its virtual server has no real server, dropped)',
    cluster: LB_NO_ENDPOINTS,
    packet: tcp(OUTSIDE_IP, LB_IP, 80, 'eth0'),
    modes: {iptables: ['REJECT 100%'], nftables: ['REJECT 100%'], ipvs: ['DROP 100%']},
  },
  {
    name: 'a Service without endpoints: outside→externalIP rejected (IPVS: dropped)',
    cluster: LB_NO_ENDPOINTS,
    packet: tcp(OUTSIDE_IP, EXTERNAL_IP, 80, 'eth0'),
    modes: {iptables: ['REJECT 100%'], nftables: ['REJECT 100%'], ipvs: ['DROP 100%']},
  },
  {
    name: 'loadBalancerSourceRanges: outside→LoadBalancer IP from an allowed source, every endpoint, masqueraded',
    cluster: LB_RANGES,
    packet: tcp(OUTSIDE_IP, LB_IP, 80, 'eth0'),
    all: dnat(WEB_ALL, 'all'),
  },
  {
    name: 'loadBalancerSourceRanges: outside→LoadBalancer IP from a source outside them is dropped',
    cluster: LB_RANGES,
    packet: tcp('10.201.0.100', LB_IP, 80, 'eth0'),
    all: ['DROP 100%'],
  },
  {
    name: 'loadBalancerSourceRanges bind the LoadBalancer IP only: the externalIP takes any source',
    cluster: LB_RANGES,
    packet: tcp('10.201.0.100', EXTERNAL_IP, 80, 'eth0'),
    all: dnat(WEB_ALL, 'all'),
  },
  {
    name: 'IPv6: outside→LoadBalancer IP from an allowed source, masqueraded',
    cluster: LB_DUAL_STACK,
    packet: tcp('fd00:10:200::100', 'fd00:192:0::2:80', 80, 'eth0'),
    all: dnat(['[fd00:10:244:1::10]:8080', '[fd00:10:244:2::10]:8080', '[fd00:10:244:2::11]:8080'], 'all'),
  },
  {
    name: 'IPv6: outside→LoadBalancer IP from a source outside loadBalancerSourceRanges is dropped',
    cluster: LB_DUAL_STACK,
    packet: tcp('fd00:10:201::100', 'fd00:192:0::2:80', 80, 'eth0'),
    all: ['DROP 100%'],
  },
]

for (const mode of MODES) {
  describe(`packet flows through the ${mode} tracer`, () => {
    for (const row of ROWS) {
      const want = row.all ?? row.modes?.[mode]
      if (!want) continue
      test(row.name, () => {
        const tracer = tracerFor(mode, row.cluster ?? LAB, row.node ?? 'node-a', !!row.fromNode)
        assert.deepEqual(flows(tracer.trace({sport: 40000, ...row.packet})), [...want].sort())
      })
    }
  })
}
