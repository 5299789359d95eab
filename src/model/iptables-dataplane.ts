import type {IptablesSave} from '../parse/iptables-save.js'
import {destinationPort, findOption, targetOption, type ParsedRule} from '../parse/iptables-rule.js'
import {IptablesTracer, splitAddr} from '../trace/iptables-tracer.js'
import type {ExpectedPort, ExpectedService} from './expected.js'
import {endpointChainName, serviceChainNames} from './chain-names.js'
import type {NodeRead} from './reach.js'
import type {
  ChainNames,
  Dataplane,
  ModeVocabulary,
  NodeInfrastructure,
  ProgrammedEndpoint,
  ProgrammedPort,
} from './dataplane.js'

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
    hooks: [
      {
        label: 'nat PREROUTING → KUBE-SERVICES (traffic from pods and outside)',
        rule: jumpsTo(dump, 'nat', 'PREROUTING', 'KUBE-SERVICES'),
      },
      {
        label: 'nat OUTPUT → KUBE-SERVICES (traffic from the node itself)',
        rule: jumpsTo(dump, 'nat', 'OUTPUT', 'KUBE-SERVICES'),
      },
      {
        label: 'nat POSTROUTING → KUBE-POSTROUTING (masquerade)',
        rule: jumpsTo(dump, 'nat', 'POSTROUTING', 'KUBE-POSTROUTING'),
      },
    ],
    nodePortsJump: jumpsTo(dump, 'nat', 'KUBE-SERVICES', 'KUBE-NODEPORTS'),
    markMasqRule: markRule,
    markMasqValue: markText ? Number(markText.split('/')[0]) : undefined,
    masqueradeRule: dump.rules('nat', 'KUBE-POSTROUTING').find((r) => r.target === 'MASQUERADE' || r.target === 'SNAT'),
    postroutingMark: postMark ? Number(postMark.split('/')[0]) : undefined,
  }
}

/** The one-address CIDR of ip as iptables-save prints it: /32 for IPv4, /128 for IPv6 (where /32 is a network). */
function hostCidr(ip: string): string {
  return ip.includes(':') ? `${ip}/128` : `${ip}/32`
}

function matchesServiceIp(rule: ParsedRule, ip: string, protocol: string, port: number): boolean {
  // Unquoted, each word of a rule is in its text as written: a text without the address cannot have it as -d (and a
  // long KUBE-SERVICES is then scanned without parsing its rules).
  if (!rule.text.includes(ip) && !rule.text.includes('"')) return false
  const d = findOption(rule, '', 'd')
  const p = findOption(rule, '', 'p')
  return (
    !!d &&
    !d.negated &&
    (d.values[0] === ip || d.values[0] === hostCidr(ip)) &&
    p?.values[0] === protocol &&
    destinationPort(rule) === String(port)
  )
}

/** Chains from this many rules are looked up by their leading -d (KUBE-SERVICES of a big cluster, once per Service). */
const INDEXED_FROM = 64

/**
 * The first rule of the chain for ip:port/protocol (matchesServiceIp), as a walk over its rules would find it: a rule
 * that opens with another -d cannot match, so in a long chain only the rules the dump's index of leading destinations
 * (rulesByLeadingDestination) gives for the address, and those that open otherwise, are looked at.
 */
function serviceIpRule(
  dump: IptablesSave,
  table: string,
  chain: string,
  ip: string,
  protocol: string,
  port: number,
): ParsedRule | undefined {
  const rules = dump.rules(table, chain)
  if (rules.length < INDEXED_FROM) return rules.find((r) => matchesServiceIp(r, ip, protocol, port))
  const index = dump.rulesByLeadingDestination(table, chain)
  const candidates = [index.unled, ...[ip, hostCidr(ip)].map((v) => index.ledBy(v))].flat().sort((a, b) => a - b)
  for (const i of candidates) if (matchesServiceIp(rules[i], ip, protocol, port)) return rules[i]
  return undefined
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
      const chain = jump.target!
      const sepRules = dump.rules('nat', chain)
      const dnatRule = sepRules.find((r) => r.target === 'DNAT')
      const dnatTo = dnatRule ? targetOption(dnatRule, '--to-destination') : undefined
      const parsed = dnatTo ? splitAddr(dnatTo) : undefined
      const dnatIp = parsed?.ip
      return {
        jump,
        chain,
        probability: probabilityOf(jump),
        dnatRule,
        backend: parsed && dnatTo ? {ip: parsed.ip, port: parsed.port, address: dnatTo} : undefined,
        hairpinMasq: sepRules.some(
          (r) =>
            r.target === 'KUBE-MARK-MASQ' &&
            dnatIp !== undefined &&
            findOption(r, '', 's')?.values[0]?.split('/')[0] === dnatIp,
        ),
      }
    })
}

/** Reads, for each port of the Service, the rules this node really has: matched by structure, never by comment. */
function readProgrammed(dump: IptablesSave, svc: ExpectedService): ProgrammedPort[] {
  // Read in this order whatever the Service has: a dump with broken rules is refused naming the same first one.
  dump.rules('nat', 'KUBE-SERVICES')
  dump.rules('filter', 'KUBE-SERVICES')
  const nodePorts = dump.rules('nat', 'KUBE-NODEPORTS')
  const externalServices = dump.rules('filter', 'KUBE-EXTERNAL-SERVICES')
  return svc.ports.map((port) => {
    const ip = svc.clusterIP!
    const clusterIPRule = serviceIpRule(dump, 'nat', 'KUBE-SERVICES', ip, port.protocol, port.port)
    const want = names(port)
    const chain = clusterIPRule?.target?.startsWith('KUBE-SV') ? clusterIPRule.target : want.internal
    const externalRules = new Map<string, ParsedRule>()
    for (const extIp of [...svc.externalIPs, ...svc.loadBalancerIPs]) {
      const r = serviceIpRule(dump, 'nat', 'KUBE-SERVICES', extIp, port.protocol, port.port)
      if (r) externalRules.set(extIp, r)
    }
    return {
      expected: port,
      clusterIPRule,
      clusterIPFilterRule: serviceIpRule(dump, 'filter', 'KUBE-SERVICES', ip, port.protocol, port.port),
      nodePortRule: port.nodePort
        ? nodePorts.find(
            (r) => findOption(r, '', 'p')?.values[0] === port.protocol && destinationPort(r) === String(port.nodePort),
          )
        : undefined,
      nodePortFilterRule: port.nodePort
        ? externalServices.find(
            (r) => findOption(r, '', 'p')?.values[0] === port.protocol && destinationPort(r) === String(port.nodePort),
          )
        : undefined,
      externalRules,
      chain,
      chainExists: dump.hasChain('nat', chain),
      endpoints: readEndpoints(dump, chain),
      ...(want.externalPolicy !== chain && port.usesExternalChain
        ? {external: {chain: want.externalPolicy, endpoints: readEndpoints(dump, want.externalPolicy)}}
        : {}),
      want,
      affinity: readAffinity(dump, chain),
    }
  })
}

/** The first `-m recent --rcheck` rule of a service chain (ClientIP affinity), with its timeout. */
function readAffinity(dump: IptablesSave, chain: string): ProgrammedPort['affinity'] {
  const r = dump.rules('nat', chain).find((x) => findOption(x, 'recent', '--rcheck'))
  const seconds = r ? findOption(r, 'recent', '--seconds')?.values[0] : undefined
  return {rule: r, seconds: seconds ? Number(seconds) : undefined}
}

export const IPTABLES_VOCABULARY: ModeVocabulary = {
  mode: 'iptables',
  steps: {
    entry: 'the jumps from nat PREROUTING and OUTPUT to KUBE-SERVICES',
    'service-match': 'nat KUBE-SERVICES',
    'nodeport-match': 'nat KUBE-NODEPORTS',
    'external-policy': 'the KUBE-EXT-… chain',
    service: 'the KUBE-SVC-… (KUBE-SVL-… for a Local policy) chain',
    endpoint: 'the KUBE-SEP-… chain',
    DNAT: "the KUBE-SEP-… chain's DNAT rule",
    masquerade: 'KUBE-POSTROUTING',
  },
  nodePortsInServices: false,
  markChain: 'KUBE-MARK-MASQ',
  masqChain: 'KUBE-POSTROUTING',
  isNatTable: (t) => t === 'nat',
  isServiceChain: (c) => /^KUBE-(SVC|SVL|EXT|FW)-/.test(c),
  isEndpointChain: (c) => c.startsWith('KUBE-SEP-'),
}

function names(port: ExpectedPort): ChainNames {
  const chains = serviceChainNames(port.svcPortName, port.protocol)
  return {
    internal: port.internal.local ? chains.svl : chains.svc,
    external: chains.ext,
    externalPolicy: port.external.local ? chains.svl : chains.svc,
    endpoint: (ep) => endpointChainName(port.svcPortName, port.protocol, ep.address),
  }
}

/** kube-proxy's iptables mode on one node, for one family: `dump` is iptables-save's (ip) or ip6tables-save's (ip6). */
export function iptablesDataplane(dump: IptablesSave, family: 'ip' | 'ip6' = 'ip'): Dataplane {
  let infrastructure: NodeInfrastructure | undefined
  return {
    vocab: IPTABLES_VOCABULARY,
    names,
    // The node's own rules, the same for every Service (a scan asks for each).
    infrastructure: () => (infrastructure ??= readInfrastructure(dump)),
    programmed: (svc) => readProgrammed(dump, svc),
    tracer: (localAddresses, locallyGenerated, route) =>
      new IptablesTracer(dump, {localAddresses, locallyGenerated, route}),
    show: (pattern) => ({
      argv: [family === 'ip6' ? 'ip6tables-save' : 'iptables-save'],
      sudo: true,
      filter: ['grep', '--', pattern],
    }),
    showChain: (table, chain) => listChain(family === 'ip6' ? 6 : 4, table, chain),
  }
}

/** `iptables -t TABLE -L CHAIN -v -n --line-numbers` (ip6tables for IPv6): a chain with its policy, counters, numbers. */
export function listChain(family: 4 | 6, table: string, chain: string): NodeRead {
  return {
    argv: [family === 6 ? 'ip6tables' : 'iptables', '-t', table, '-L', chain, '-v', '-n', '--line-numbers'],
    sudo: true,
  }
}
