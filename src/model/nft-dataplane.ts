import {parseElements, type NftChain, type NftRuleset, type NftSet, type NftTable} from '../parse/nft-ruleset.js'
import {NftTracer, nftTokens} from '../trace/nft-tracer.js'
import {NetfilterTracer, type IptablesOwners} from '../trace/netfilter-tracer.js'
import {splitAddr} from '../trace/iptables-tracer.js'
import {nftEndpointChainName, nftServiceChainNames, nftServicePortBase} from './chain-names.js'
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

export const NFT_VOCABULARY: ModeVocabulary = {
  mode: 'nftables',
  steps: {
    entry: 'the jumps from the nat-prerouting and nat-output chains to services',
    'service-match': 'nftables chain services',
    'nodeport-match': 'nftables map service-nodeports',
    'external-policy': 'the external-… chain',
    service: 'the service-… (local-… for a Local policy) chain',
    endpoint: 'the endpoint-… chain',
    DNAT: "the endpoint-… chain's dnat rule",
    masquerade: 'masquerading',
  },
  nodePortsInServices: true,
  markChain: 'mark-for-masquerade',
  masqChain: 'masquerading',
  isNatTable: (t) => t === 'ip kube-proxy' || t === 'ip6 kube-proxy',
  isServiceChain: (c) => /^(service|local|external|firewall)-[A-Z2-7]{8}-/.test(c),
  isEndpointChain: (c) => /^endpoint-[A-Z2-7]{8}-/.test(c),
}

function names(port: ExpectedPort): ChainNames {
  const base = nftServicePortBase(port.serviceNamespace, port.serviceName, port.protocol, port.portName)
  const n = nftServiceChainNames(base)
  return {
    internal: port.internal.local ? n.local : n.service,
    external: n.external,
    externalPolicy: port.external.local ? n.local : n.service,
    endpoint: (ep) => nftEndpointChainName(base, ep.ip, ep.port),
  }
}

function ruleOf(c: NftChain, i: number): ProgrammedRule {
  const r = c.rules[i]
  return {table: r.table, line: r.line, text: r.text}
}

function findRule(t: NftTable | undefined, chain: string, test: (text: string) => boolean): ProgrammedRule | undefined {
  const c = t?.chains.get(chain)
  const i = c ? c.rules.findIndex((r) => test(r.text)) : -1
  return i >= 0 ? ruleOf(c!, i) : undefined
}

function verdictTarget(value: string | undefined): string | undefined {
  if (!value) return undefined
  const [kind, target] = value.trim().split(/\s+/)
  if (kind === 'goto' || kind === 'jump') return target === 'reject-chain' ? 'REJECT' : target
  return kind.toUpperCase()
}

/** The element of a map whose key equals `key` exactly, as evidence. */
function element(t: NftTable | undefined, map: string, key: string[]): ProgrammedRule | undefined {
  const set: NftSet | undefined = t?.sets.get(map)
  const el = set?.elements.find((e) => e.key.length === key.length && e.key.every((k, i) => k === key[i]))
  if (!set || !el) return undefined
  return {
    table: set.table,
    line: set.line,
    text: `map ${map} element ${el.key.join(' . ')} : ${el.value}`,
    target: verdictTarget(el.value),
  }
}

function readEndpoints(t: NftTable, chainName: string): ProgrammedEndpoint[] {
  const chain = t.chains.get(chainName)
  if (!chain) return []
  const i = chain.rules.findIndex((r) => /\bnumgen random mod \d+/.test(r.text))
  if (i < 0) {
    // A single endpoint may be a plain goto.
    const g = chain.rules.findIndex((r) => /^(goto|jump) endpoint-/.test(r.text))
    return g < 0 ? [] : [endpointOf(t, ruleOf(chain, g), nftTokens(chain.rules[g].text)[1], 1)]
  }
  const toks = nftTokens(chain.rules[i].text)
  const mod = Number(toks[toks.indexOf('mod') + 1])
  const map = parseElements((toks.find((x) => x.startsWith('{')) ?? '{}').slice(1, -1))
  let remaining = 1
  return map.map((el) => {
    const [lo, hi] = el.key[0].split('-').map(Number)
    const share = ((hi ?? lo) - lo + 1) / mod
    const conditional = remaining > 0 ? share / remaining : 0
    remaining -= share
    return endpointOf(t, ruleOf(chain, i), verdictTarget(el.value) ?? '', Math.min(1, conditional))
  })
}

function endpointOf(t: NftTable, jump: ProgrammedRule, chain: string, probability: number): ProgrammedEndpoint {
  const dnatRule = findRule(t, chain, (x) => /\bdnat\b/.test(x))
  const to = dnatRule ? /\bto\s+(\S+)/.exec(dnatRule.text)?.[1] : undefined
  const addr = to ? splitAddr(to) : undefined
  const ip = addr?.ip
  return {
    jump: {...jump, target: chain},
    chain,
    probability,
    dnatRule,
    backend: addr && to ? {ip: addr.ip, port: addr.port, address: to} : undefined,
    hairpinMasq:
      !!ip &&
      !!findRule(
        t,
        chain,
        (x) => (x.includes(`ip saddr ${ip} `) || x.includes(`ip6 saddr ${ip} `)) && /jump mark-for-masquerade/.test(x),
      ),
  }
}

function readInfrastructure(t: NftTable | undefined): NodeInfrastructure {
  const mark = findRule(t, 'mark-for-masquerade', (x) => /meta mark set meta mark \| /.test(x))
  const test = findRule(t, 'masquerading', (x) => /meta mark & 0x[0-9a-f]+ == 0x0+ return/.test(x))
  return {
    hasServicesChain: !!t?.chains.get('services'),
    hooks: [
      {
        label: 'nat-prerouting → services (traffic from pods and outside)',
        rule: findRule(t, 'nat-prerouting', (x) => /^jump services$/.test(x)),
      },
      {
        label: 'nat-output → services (traffic from the node itself)',
        rule: findRule(t, 'nat-output', (x) => /^jump services$/.test(x)),
      },
      {
        label: 'nat-postrouting → masquerading (masquerade)',
        rule: findRule(t, 'nat-postrouting', (x) => /^jump masquerading$/.test(x)),
      },
    ],
    nodePortsJump: findRule(t, 'services', (x) => /vmap @service-nodeports/.test(x)),
    markMasqRule: mark,
    markMasqValue: mark ? Number(/\| (0x[0-9a-f]+)/.exec(mark.text)?.[1]) : undefined,
    masqueradeRule: findRule(t, 'masquerading', (x) => /^masquerade\b/.test(x)),
    postroutingMark: test ? Number(/& (0x[0-9a-f]+)/.exec(test.text)?.[1]) : undefined,
  }
}

function readProgrammed(t: NftTable | undefined, svc: ExpectedService): ProgrammedPort[] {
  return svc.ports.map((port) => {
    const want = names(port)
    const clusterIPRule = element(t, 'service-ips', [svc.clusterIP!, port.protocol, String(port.port)])
    const chain =
      clusterIPRule?.target && NFT_VOCABULARY.isServiceChain(clusterIPRule.target)
        ? clusterIPRule.target
        : want.internal
    const externalRules = new Map<string, ProgrammedRule>()
    for (const ip of [...svc.externalIPs, ...svc.loadBalancerIPs]) {
      const r = element(t, 'service-ips', [ip, port.protocol, String(port.port)])
      if (r) externalRules.set(ip, r)
    }
    return {
      expected: port,
      clusterIPRule,
      clusterIPFilterRule: element(t, 'no-endpoint-services', [svc.clusterIP!, port.protocol, String(port.port)]),
      nodePortRule: port.nodePort ? element(t, 'service-nodeports', [port.protocol, String(port.nodePort)]) : undefined,
      nodePortFilterRule: port.nodePort
        ? element(t, 'no-endpoint-nodeports', [port.protocol, String(port.nodePort)])
        : undefined,
      externalRules,
      chain,
      chainExists: !!t?.chains.get(chain),
      endpoints: t ? readEndpoints(t, chain) : [],
      affinity: {rule: findRule(t, chain, (x) => /@affinity-/.test(x))},
      ...(want.externalPolicy !== chain && port.usesExternalChain
        ? {external: {chain: want.externalPolicy, endpoints: t ? readEndpoints(t, want.externalPolicy) : []}}
        : {}),
      want,
    }
  })
}

/**
 * kube-proxy's nftables mode: table `ip kube-proxy` (or `ip6 kube-proxy` for IPv6 Services). A packet is walked
 * through every table on the node: the ruleset's, and the iptables tables of `iptables` (iptables-nft's, legacy's).
 */
export function nftDataplane(rs: NftRuleset, family: 'ip' | 'ip6' = 'ip', iptables: IptablesOwners = {}): Dataplane {
  const table = rs.table(`${family} kube-proxy`)
  return {
    vocab: NFT_VOCABULARY,
    names,
    infrastructure: () => readInfrastructure(table),
    programmed: (svc) => readProgrammed(table, svc),
    tracer: (localAddresses, locallyGenerated, route) =>
      iptables.nft || iptables.legacy
        ? new NetfilterTracer(rs, iptables, family, {localAddresses, locallyGenerated, route})
        : new NftTracer(rs, {localAddresses, locallyGenerated, route}),
    show: (pattern) => ({
      argv: ['nft', 'list', 'table', family, 'kube-proxy'],
      sudo: true,
      filter: ['grep', '--', pattern],
    }),
    // A trace step's table is "FAMILY NAME" (a table of the ip family when the family is not said).
    showChain: (table, chain) => ({
      argv: ['nft', '-a', 'list', 'chain', ...(table.includes(' ') ? table.split(' ') : ['ip', table]), chain],
      sudo: true,
    }),
  }
}
