import type {ClusterState} from '../../src/cluster/types.js'
import {parseKubeProxyConfig} from '../../src/cluster/kube-proxy-config.js'
import type {NodeObservation} from '../../src/node/observation.js'
import type {DnsRecordAnswer} from '../../src/node/probe/dns-probe.js'
import {parseBridgeState, withCniResults} from '../../src/parse/bridge-state.js'
import {parseCniResults} from '../../src/parse/cni-results.js'
import {BufferSource} from '../../src/parse/dump-source.js'
import {IptablesSave} from '../../src/parse/iptables-save.js'
import {
  cniCacheFile,
  cniCacheGrep,
  endpointSliceObject,
  kubeProxyConfigMap,
  nodeObject,
  podObject,
  serviceObject,
} from '../fixtures/api-objects.js'
import {kubeProxyRules, type RuleFaults} from '../fixtures/kube-proxy-rules.js'
import {kubeProxyIpvsTexts, type IpvsFaults} from '../fixtures/kube-proxy-ipvs.js'
import {IpsetState} from '../../src/parse/ipset-save.js'
import {parseDeviceAddresses, parseIpvsadm, parseSysctl} from '../../src/parse/ipvsadm.js'
import {
  DNS,
  NODES as LAB_NODES,
  WEB as LAB_WEB,
  dualStackNode,
  dualStackPods,
  dualStackService,
  labPods,
  type LabPod,
  type LabService,
} from '../fixtures/lab-cluster.js'

export interface OfflineOptions {
  /** A dual-stack cluster: the web Service, its Pods and the nodes get IPv6 addresses too, and an IPv6 EndpointSlice. */
  dualStack?: boolean
  /** Dual-stack: faults in a node's IPv6 rules (ip6tables-save), addresses in them IPv6. */
  faults6?: Record<string, RuleFaults>
  faults?: Record<string, RuleFaults>
  /** Pods whose bridge port has hairpin off. */
  hairpinOff?: string[]
  pods?: LabPod[]
  /** Replace a node's dump text entirely. */
  dumpFor?: Record<string, string>
  /**
   * A node's DNS answer: `answers` per record type, or the shorthand of one A answer (addresses, rcode, error); method
   * "none" with `error`: nothing asked. Default: the right A answer, and the right AAAA one when dual-stack.
   */
  dns?: Record<
    string,
    {answers?: DnsRecordAnswer[]; addresses?: string[]; error?: string; rcode?: string; method?: string}
  >
  /** Nodes in IPVS mode, with their faults; `list` reads `ipvsadm -Ln` instead of `-Sn`. */
  ipvs?: Record<string, IpvsFaults & {list?: boolean}>
  /** Dual-stack IPVS nodes: faults in a node's IPv6 virtual servers, KUBE-6-* ipsets or ip6tables glue. */
  ipvs6?: Record<string, IpvsFaults>
  strictARP?: boolean
  /** Changes to the web Service (e.g. externalTrafficPolicy). */
  web?: Partial<LabService>
  /** Hand edits of a node's generated iptables-save text (a rule added, changed or removed). */
  editDump?: Record<string, (text: string) => string>
  /** Hand edits of a node's bridge-state text (hairpin, links, neighbours, fdb). */
  editNetwork?: Record<string, (text: string) => string>
  /** Nodes whose CNI result cache was read: the lab's files for the node's pods (grep output), through this edit. */
  cniCache?: Record<string, (text: string) => string>
  /** Changes to the API objects as read (a Service field, the DNS Service, kube-proxy's Pods or configuration). */
  editCluster?: (cluster: ClusterState) => void
  /** Replaces what was read on a node (kube-proxy's status, an unreadable node). */
  editObservation?: Record<string, (obs: NodeObservation) => NodeObservation>
}

/** The lab's cluster as the doctor would read it, built in memory: API objects plus each node's dumps. */
export function offlineCluster(opts: OfflineOptions = {}): {cluster: ClusterState; observations: NodeObservation[]} {
  const pods = opts.pods ?? (opts.dualStack ? dualStackPods(labPods()) : labPods())
  const WEB = {...(opts.dualStack ? dualStackService(LAB_WEB) : LAB_WEB), ...opts.web}
  const NODES = opts.dualStack ? LAB_NODES.map(dualStackNode) : LAB_NODES
  // The fixtures are plain JSON shaped like the API's objects.
  const cluster = {
    service: serviceObject(WEB),
    slices: [endpointSliceObject(WEB, pods), ...(WEB.clusterIP6 ? [endpointSliceObject(WEB, pods, 6)] : [])],
    endpointsSource: 'EndpointSlice',
    pods: pods.filter((p) => p.namespace === 'shop').map(podObject),
    nodes: NODES.map(nodeObject),
    kubeProxyPods: [],
    proxyConfig: {
      ...parseKubeProxyConfig(kubeProxyConfigMap().data['config.conf'], 'test'),
      ...(opts.strictARP ? {ipvsStrictARP: true} : {}),
    },
    dns: {service: serviceObject(DNS), slices: [endpointSliceObject(DNS, pods)]},
    clusterDomain: 'cluster.local',
    clusterDomainSource: 'test',
    unread: [],
  } as unknown as ClusterState
  const observations = NODES.map((node): NodeObservation => {
    const ipvsFaults = opts.ipvs?.[node.name]
    const ipvsTexts = ipvsFaults ? kubeProxyIpvsTexts(node, [WEB, DNS], pods, ipvsFaults) : undefined
    // A dual-stack IPVS node: one ipvsadm listing, one ipset dump and one kube-ipvs0 for both families; ip6tables glue.
    const ipvs6 =
      ipvsFaults && opts.dualStack
        ? kubeProxyIpvsTexts(node, [WEB, DNS], pods, opts.ipvs6?.[node.name] ?? {}, 6)
        : undefined
    const both = (key: 'ipvsadmSave' | 'ipvsadmList' | 'ipsetSave' | 'kubeIpvs0') =>
      (ipvsTexts?.[key] ?? '') + (ipvs6?.[key] ?? '')
    const generated =
      opts.dumpFor?.[node.name] ??
      ipvsTexts?.iptablesSave ??
      kubeProxyRules(node, [WEB, DNS], pods, opts.faults?.[node.name] ?? {})
    const text = opts.editDump?.[node.name]?.(generated) ?? generated
    const local = pods.filter((p) => p.node === node.name)
    const networkText = [
      '## hairpin',
      ...local.map(
        (p) => `/sys/class/net/cbr0/brif/v${p.name}/hairpin_mode ${opts.hairpinOff?.includes(p.name) ? 0 : 1}`,
      ),
      '## links',
      '3: cbr0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP mode DEFAULT group default qlen 1000\\    link/ether 02:00:00:00:00:01 brd ff:ff:ff:ff:ff:ff',
      '## neigh',
      ...local.map((p, i) => `${p.ip} dev cbr0 lladdr 02:00:00:00:01:${(i + 16).toString(16)} REACHABLE`),
      '## fdb',
      ...local.map((p, i) => `02:00:00:00:01:${(i + 16).toString(16)} dev v${p.name} master cbr0`),
    ].join('\n')
    const network = opts.editNetwork?.[node.name]?.(networkText) ?? networkText
    const cniEdit = opts.cniCache?.[node.name]
    const cniText = cniEdit?.(cniCacheGrep(local.map((p) => cniCacheFile(p, node.gateway))))
    const dnsOpt = opts.dns?.[node.name]
    const method = dnsOpt?.method ?? 'test'
    const rightAnswers: DnsRecordAnswer[] = [
      {type: 'A', addresses: [WEB.clusterIP], rcode: 'NOERROR'},
      ...(WEB.clusterIP6 ? [{type: 'AAAA' as const, addresses: [WEB.clusterIP6], rcode: 'NOERROR'}] : []),
    ]
    const shorthand = (d: {addresses?: string[]; error?: string; rcode?: string}): DnsRecordAnswer[] => [
      {type: 'A', addresses: d.addresses ?? [], ...(d.error ? {error: d.error} : {rcode: d.rcode ?? 'NOERROR'})},
    ]
    const answers = !dnsOpt ? rightAnswers : method === 'none' ? [] : (dnsOpt.answers ?? shorthand(dnsOpt))
    const obs: NodeObservation = {
      name: node.name,
      reachable: true,
      ...(ipvsTexts
        ? {
            kubeProxy: {proxyMode: 'ipvs'},
            ipvs: {
              virtualServers: parseIpvsadm(both(ipvsFaults!.list ? 'ipvsadmList' : 'ipvsadmSave')),
              ipsets: IpsetState.parse(both('ipsetSave')),
              vips: parseDeviceAddresses(both('kubeIpvs0')),
              sysctls: parseSysctl(ipvsTexts.sysctl),
            },
          }
        : {}),
      iptables: IptablesSave.parse(new BufferSource(Buffer.from(text))),
      ...(opts.dualStack
        ? {
            ip6tables: IptablesSave.parse(
              new BufferSource(
                Buffer.from(
                  ipvs6?.iptablesSave ?? kubeProxyRules(node, [WEB, DNS], pods, opts.faults6?.[node.name] ?? {}, 6),
                ),
              ),
            ),
          }
        : {}),
      network:
        cniText !== undefined
          ? withCniResults(parseBridgeState(network), parseCniResults(cniText))
          : parseBridgeState(network),
      dns: {
        name: 'web.shop.svc.cluster.local',
        server: DNS.clusterIP,
        method,
        answers,
        ...(method === 'none' && dnsOpt?.error ? {error: dnsOpt.error} : {}),
      },
    }
    return opts.editObservation?.[node.name]?.(obs) ?? obs
  })
  opts.editCluster?.(cluster)
  return {cluster, observations}
}
