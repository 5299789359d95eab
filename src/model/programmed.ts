import type {IptablesSave} from '../parse/iptables-save.js'
import {destinationPort, findOption, targetOption, type ParsedRule} from '../parse/iptables-rule.js'
import {splitAddr} from '../trace/iptables-tracer.js'
import type {ExpectedPort, ExpectedService} from './expected.js'

/** What a node's iptables actually hold for one endpoint jump in a KUBE-SVC/KUBE-SVL chain. */
export interface ProgrammedEndpoint {
  jump: ParsedRule
  sepChain: string
  /** The statistic probability of the jump, or 1 for an unconditional one. */
  probability: number
  dnatRule?: ParsedRule
  /** ip:port the SEP chain DNATs to. */
  dnatTo?: string
  dnatIp?: string
  dnatPort?: number
  hairpinMasq: boolean
}

export interface ProgrammedPort {
  expected: ExpectedPort
  /** nat KUBE-SERVICES rule for ClusterIP:port, whatever it jumps to. */
  clusterIPRule?: ParsedRule
  /** filter-table REJECT/DROP rule for ClusterIP:port. */
  clusterIPFilterRule?: ParsedRule
  nodePortRule?: ParsedRule
  nodePortFilterRule?: ParsedRule
  externalRules: Map<string, ParsedRule>
  /** Endpoint jumps of the chain that ClusterIP traffic goes to (KUBE-SVC or KUBE-SVL). */
  chain: string
  chainExists: boolean
  endpoints: ProgrammedEndpoint[]
}

export interface NodeInfrastructure {
  hasServicesChain: boolean
  preroutingHook?: ParsedRule
  outputHook?: ParsedRule
  postroutingHook?: ParsedRule
  nodePortsJump?: ParsedRule
  markMasqRule?: ParsedRule
  /** The mark KUBE-MARK-MASQ sets, if any. */
  markMasqValue?: number
  masqueradeRule?: ParsedRule
  /** The mark KUBE-POSTROUTING tests before masquerading. */
  postroutingMark?: number
}

function jumpsTo(dump: IptablesSave, table: string, chain: string, target: string): ParsedRule | undefined {
  return dump.rules(table, chain).find((r) => r.target === target)
}

export function readInfrastructure(dump: IptablesSave): NodeInfrastructure {
  const markRule = dump.rules('nat', 'KUBE-MARK-MASQ').find((r) => r.target === 'MARK')
  const markText = markRule ? (targetOption(markRule, '--set-xmark', '--or-mark', '--set-mark') ?? '') : ''
  const postMarkRule = dump.rules('nat', 'KUBE-POSTROUTING').find((r) => r.matches.some((m) => m.module === 'mark'))
  const postMark = postMarkRule ? findOption(postMarkRule, 'mark', '--mark')?.values[0] : undefined
  return {
    hasServicesChain: dump.hasChain('nat', 'KUBE-SERVICES'),
    preroutingHook: jumpsTo(dump, 'nat', 'PREROUTING', 'KUBE-SERVICES'),
    outputHook: jumpsTo(dump, 'nat', 'OUTPUT', 'KUBE-SERVICES'),
    postroutingHook: jumpsTo(dump, 'nat', 'POSTROUTING', 'KUBE-POSTROUTING'),
    nodePortsJump: jumpsTo(dump, 'nat', 'KUBE-SERVICES', 'KUBE-NODEPORTS'),
    markMasqRule: markRule,
    markMasqValue: markText ? Number(markText.split('/')[0]) : undefined,
    masqueradeRule: dump.rules('nat', 'KUBE-POSTROUTING').find((r) => r.target === 'MASQUERADE' || r.target === 'SNAT'),
    postroutingMark: postMark ? Number(postMark.split('/')[0]) : undefined,
  }
}

function matchesServiceIp(rule: ParsedRule, ip: string, protocol: string, port: number): boolean {
  const d = findOption(rule, '', 'd')
  const p = findOption(rule, '', 'p')
  return !!d && !d.negated && (d.values[0] === ip || d.values[0] === `${ip}/32` || d.values[0] === `${ip}/128`) && p?.values[0] === protocol && destinationPort(rule) === String(port)
}

function probabilityOf(rule: ParsedRule): number {
  const o = findOption(rule, 'statistic', '--probability')
  return o ? Number(o.values[0]) : 1
}

function readEndpoints(dump: IptablesSave, chain: string): ProgrammedEndpoint[] {
  return dump
    .rules('nat', chain)
    .filter((r) => r.target?.startsWith('KUBE-SEP-') && !findOption(r, 'recent', '--rcheck'))
    .map((jump) => {
      const sepChain = jump.target!
      const sepRules = dump.rules('nat', sepChain)
      const dnatRule = sepRules.find((r) => r.target === 'DNAT')
      const dnatTo = dnatRule ? targetOption(dnatRule, '--to-destination') : undefined
      const parsed = dnatTo ? splitAddr(dnatTo) : undefined
      const dnatIp = parsed?.ip
      return {
        jump,
        sepChain,
        probability: probabilityOf(jump),
        dnatRule,
        dnatTo,
        dnatIp,
        dnatPort: parsed?.port,
        hairpinMasq: sepRules.some((r) => r.target === 'KUBE-MARK-MASQ' && dnatIp !== undefined && findOption(r, '', 's')?.values[0]?.split('/')[0] === dnatIp),
      }
    })
}

/** Reads, for each port of the Service, the rules this node really has: matched by structure, never by comment. */
export function readProgrammed(dump: IptablesSave, svc: ExpectedService): ProgrammedPort[] {
  const natServices = dump.rules('nat', 'KUBE-SERVICES')
  const filterServices = dump.rules('filter', 'KUBE-SERVICES')
  const nodePorts = dump.rules('nat', 'KUBE-NODEPORTS')
  const externalServices = dump.rules('filter', 'KUBE-EXTERNAL-SERVICES')
  return svc.ports.map((port) => {
    const ip = svc.clusterIP!
    const clusterIPRule = natServices.find((r) => matchesServiceIp(r, ip, port.protocol, port.port))
    const chain = clusterIPRule?.target?.startsWith('KUBE-SV') ? clusterIPRule.target : port.internal.chain
    const externalRules = new Map<string, ParsedRule>()
    for (const extIp of [...svc.externalIPs, ...svc.loadBalancerIPs]) {
      const r = natServices.find((x) => matchesServiceIp(x, extIp, port.protocol, port.port))
      if (r) externalRules.set(extIp, r)
    }
    return {
      expected: port,
      clusterIPRule,
      clusterIPFilterRule: filterServices.find((r) => matchesServiceIp(r, ip, port.protocol, port.port)),
      nodePortRule: port.nodePort ? nodePorts.find((r) => findOption(r, '', 'p')?.values[0] === port.protocol && destinationPort(r) === String(port.nodePort)) : undefined,
      nodePortFilterRule: port.nodePort
        ? externalServices.find((r) => findOption(r, '', 'p')?.values[0] === port.protocol && destinationPort(r) === String(port.nodePort))
        : undefined,
      externalRules,
      chain,
      chainExists: dump.hasChain('nat', chain),
      endpoints: readEndpoints(dump, chain),
    }
  })
}
