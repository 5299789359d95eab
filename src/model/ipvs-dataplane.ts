import type {IpvsState} from '../node/observation.js'
import type {IptablesSave} from '../parse/iptables-save.js'
import {vsKey, type VirtualServer} from '../parse/ipvsadm.js'
import {IpvsTracer} from '../trace/ipvs-tracer.js'
import {joinHostPort} from '../net/host-port.js'
import type {
  ChainNames,
  Dataplane,
  ModeVocabulary,
  NodeInfrastructure,
  ProgrammedEndpoint,
  ProgrammedPort,
  ProgrammedRule,
} from './dataplane.js'
import type {ExpectedPort, ExpectedService} from './expected.js'
import {listChain, readInfrastructure as readIptablesInfrastructure} from './iptables-dataplane.js'
import {ipvsSetName} from './chain-names.js'
import type {NodeRead} from './reach.js'

export const IPVS_VOCABULARY: ModeVocabulary = {
  mode: 'ipvs',
  steps: {
    entry: 'the jumps from nat PREROUTING and OUTPUT to KUBE-SERVICES',
    'service-match': 'nat KUBE-SERVICES',
    'nodeport-match': 'nat KUBE-NODE-PORT',
    'external-policy': "the KUBE-EXTERNAL-IP and KUBE-LOAD-BALANCER sets' rules",
    service: 'the virtual server (VS) of the address and port',
    endpoint: 'a real server (RS) of the virtual server',
    DNAT: "the real server's address (IPVS masquerade forwarding)",
    masquerade: 'KUBE-POSTROUTING',
  },
  nodePortsInServices: false,
  markChain: 'KUBE-MARK-MASQ',
  masqChain: 'KUBE-POSTROUTING',
  isNatTable: (t) => t === 'nat' || t === 'ipvs',
  isServiceChain: (c) => c.startsWith('VS '),
  isEndpointChain: (c) => c.startsWith('RS '),
}

function rule(v: {line: number; text: string}, target: string): ProgrammedRule {
  return {table: 'ipvs', line: v.line, text: v.text, target}
}

/** What IPVS on one node holds for a Service: each port's virtual servers and their real servers. */
export interface IpvsPrograms {
  names(port: ExpectedPort): ChainNames
  programmed(svc: ExpectedService): ProgrammedPort[]
  /** `ipvsadm -Ln`, filtered to a virtual or real server's address. */
  show(pattern: string): NodeRead
}

/**
 * The IPVS engine: a node's virtual servers per service address (ClusterIP, the node's address and NodePort,
 * externalIPs, LoadBalancer IPs) and real servers per endpoint, as `ipvsadm` lists them. kube-proxy's IPVS mode and
 * kube-router's service proxy program the same kernel state; each adds its own glue around it.
 */
export function ipvsPrograms(
  ipvs: IpvsState,
  nodeAddress: string | undefined,
  nodeName: string,
  family: 4 | 6,
): IpvsPrograms {
  const loopBack = ipvsSetName('KUBE-LOOP-BACK', family)
  const find = (proto: string, ip: string | undefined, port: number | undefined): VirtualServer | undefined =>
    ip && port ? ipvs.virtualServers.find((v) => v.proto === proto && v.address === ip && v.port === port) : undefined
  const names = (port: ExpectedPort): ChainNames => {
    const nodePortVs =
      port.nodePort && nodeAddress ? `VS ${vsKey(port.protocol, nodeAddress, port.nodePort)}` : 'VS (node port)'
    return {
      internal: `VS ${vsKey(port.protocol, port.clusterIP, port.port)}`,
      external: nodePortVs,
      externalPolicy: nodePortVs,
      endpoint: (ep) => `RS ${ep.address}`,
    }
  }
  const endpointsOf = (vs: VirtualServer | undefined, port: ExpectedPort): ProgrammedEndpoint[] => {
    if (!vs) return []
    const total = vs.reals.reduce((a, r) => a + r.weight, 0)
    let remaining = total
    return vs.reals.map((r) => {
      const address = joinHostPort(r.address, r.port)
      const conditional = remaining > 0 ? r.weight / remaining : 0
      remaining -= r.weight
      const local = port.allEndpoints.find((e) => e.ip === r.address)?.nodeName === nodeName
      return {
        jump: rule(r, `RS ${address}`),
        chain: `RS ${address}`,
        probability: conditional,
        weight: r.weight,
        dnatRule: rule(r, address),
        backend: {ip: r.address, port: r.port, address},
        hairpinMasq: !local || ipvs.ipsets.has(loopBack, `${r.address},${port.protocol}:${r.port},${r.address}`),
      }
    })
  }
  const programmed = (svc: ExpectedService): ProgrammedPort[] =>
    svc.ports.map((port) => {
      const want = names(port)
      const vs = find(port.protocol, svc.clusterIP, port.port)
      const nodeVs = find(port.protocol, nodeAddress, port.nodePort)
      const externalRules = new Map<string, ProgrammedRule>()
      for (const ip of [...svc.externalIPs, ...svc.loadBalancerIPs]) {
        const e = find(port.protocol, ip, port.port)
        if (e) externalRules.set(ip, rule(e, `VS ${vsKey(e.proto, e.address, e.port)}`))
      }
      return {
        expected: port,
        clusterIPRule: vs ? rule(vs, want.internal) : undefined,
        nodePortRule: nodeVs ? rule(nodeVs, want.external) : undefined,
        externalRules,
        chain: want.internal,
        chainExists: !!vs,
        endpoints: endpointsOf(vs, port),
        // The NodePort virtual server holds its own real servers (only local ones with externalTrafficPolicy: Local).
        ...(nodeVs ? {external: {chain: want.external, endpoints: endpointsOf(nodeVs, port)}} : {}),
        want,
      }
    })
  return {
    names,
    programmed,
    show: (pattern) => ({
      argv: ['ipvsadm', '-Ln'],
      sudo: true,
      filter: ['grep', '-A4', '--', pattern.replace(/^(VS|RS) /, '').replace(/^(TCP|UDP|SCTP) /, '')],
    }),
  }
}

/**
 * kube-proxy's IPVS mode on one node for one address family: the IPVS engine's virtual and real servers; `dump` is
 * that family's iptables glue (iptables-save or ip6tables-save), whose ipsets are the family's own.
 */
export function ipvsDataplane(
  dump: IptablesSave,
  ipvs: IpvsState,
  nodeAddress: string | undefined,
  nodeName: string,
  family: 4 | 6 = 4,
): Dataplane {
  const clusterIpSet = ipvsSetName('KUBE-CLUSTER-IP', family)
  const {names, programmed, show} = ipvsPrograms(ipvs, nodeAddress, nodeName, family)
  const infrastructure = (): NodeInfrastructure => {
    const base = readIptablesInfrastructure(dump)
    const accept = dump
      .rules('nat', 'KUBE-SERVICES')
      .find((r) => r.target === 'ACCEPT' && r.text.includes(`--match-set ${clusterIpSet} `))
    return {
      ...base,
      hooks: [
        ...base.hooks,
        {label: `nat KUBE-SERVICES accepting ${clusterIpSet} (ClusterIP traffic handed to IPVS)`, rule: accept},
      ],
      nodePortsJump: dump.rules('nat', 'KUBE-SERVICES').find((r) => r.target === 'KUBE-NODE-PORT'),
    }
  }
  return {
    vocab: IPVS_VOCABULARY,
    names,
    infrastructure,
    programmed,
    tracer: (localAddresses, locallyGenerated) =>
      new IpvsTracer(dump, ipvs.virtualServers, {
        localAddresses,
        vips: ipvs.vips ?? [],
        ipsets: ipvs.ipsets,
        locallyGenerated,
      }),
    show,
    // A trace step's chain is the glue's (IPVS itself has no chain that drops).
    showChain: (table, chain) => listChain(family, table, chain),
  }
}
