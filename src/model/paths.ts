import type {V1Node} from '@kubernetes/client-node'
import type {ExpectedEndpoint, ExpectedPort, ExpectedService} from './expected.js'
import {linksRead, type BridgeState} from '../parse/bridge-state.js'
import type {Dataplane, ModeVocabulary} from './dataplane.js'
import {STEPS, type Step} from './steps.js'
import {addressInCidr, cidrContains, cidrSize, familyOf, parseCidr, type Cidr} from '../net/address.js'
import type {Packet, RouteGuess, TraceOutcome, TraceResult, TraceStep, Tracer} from '../trace/types.js'
import {compareNames} from './name-order.js'

export type Entry =
  'pod→ClusterIP' | 'node→ClusterIP' | 'outside→NodePort' | 'outside→LoadBalancer' | 'outside→externalIP' | 'pod→itself'

export const ENTRIES: Entry[] = [
  'pod→ClusterIP',
  'node→ClusterIP',
  'outside→NodePort',
  'outside→LoadBalancer',
  'outside→externalIP',
  'pod→itself',
]

/** The steps only some entry points cross; every other step but the cluster's side is crossed by every entry point. */
const STEP_CROSSED_BY: Partial<Record<Step, (entry: Entry) => boolean>> = {
  endpoints: () => false,
  'nodeport-match': (entry) => entry === 'outside→NodePort',
  'external-policy': (entry) => entry.startsWith('outside→'),
  'bridge/hairpin': (entry) => entry === 'pod→itself',
}

/** The node's steps a packet of `entry` crosses, in the order it meets them (model/steps.ts). */
export function stepsCrossedBy(entry: Entry): Step[] {
  return STEPS.filter((step) => STEP_CROSSED_BY[step]?.(entry) ?? true)
}

export interface PathResult {
  node: string
  entry: Entry
  port: string
  /** null when the tracer could not decide (a rule it cannot evaluate). */
  ok: boolean | null
  breaksAt: Step | null
  /**
   * The node where the path breaks (or cannot be decided): its own node, or the node of an endpoint it sends to when
   * only that endpoint's half breaks; null when breaksAt is.
   */
  breaksOn: string | null
  detail: string
  /** The second halves, one per endpoint on another node the path DNATs to (see followEndpoints). */
  remote: RemoteHalf[]
  packet: Packet
  trace: TraceResult
  /** svc --from POD: the client the walk starts from ("shop/client-7d9 10.244.1.5 on node-a"); absent: the doctor's own. */
  source?: string
}

/**
 * svc --from POD: the client whose packets the walks follow. Its packets cross only its own node's rules before the
 * endpoint's node (the second halves), so only its node walks, from its address, and no other node is a source.
 */
export interface PathClient {
  /** namespace/name */
  pod: string
  node: string
  /** status.podIPs; a host-network Pod sends from its node's address. */
  ips: readonly string[]
  hostNetwork: boolean
}

/** What the endpoint's node does with a path's packets to one endpoint it hosts: the second half of the path. */
export interface RemoteHalf {
  /** The endpoint, host:port. */
  endpoint: string
  pod: string | null
  /** The node that hosts the endpoint. */
  node: string
  /** The share of the path's new connections sent to this endpoint (0..1). */
  share: number
  /** false: the half was not traced (its node's rules were not read); ok and breaksAt are then null. */
  followed: boolean
  ok: boolean | null
  breaksAt: Step | null
  detail: string
  /** The walk of the half on the endpoint's node (when followed), for --explain. */
  trace?: TraceResult
}

/** A client outside the cluster, of the packet's family: documentation addresses (RFC 5737, RFC 3849), never sent to, only traced. */
const OUTSIDE_CLIENT = '203.0.113.10'
const OUTSIDE_CLIENT6 = '2001:db8::10'

/**
 * The outside client a LoadBalancer walk starts from: `outside` itself unless loadBalancerSourceRanges leave it out,
 * else an address in the first range (a source the Service lets in: its firewall refusing it is a break).
 */
function allowedSource(outside: string, ranges: string[] = []): string {
  const cidrs = ranges.map((r) => parseCidr(r.trim())).filter((c): c is Cidr => !!c)
  if (cidrs.length === 0 || cidrs.some((c) => cidrContains(c, outside))) return outside
  const size = cidrSize(cidrs[0])
  return addressInCidr(cidrs[0], size > 11 ? 10 : size > 2 ? 1 : 0)
}

/** The node's pod CIDRs (spec.podCIDRs, else spec.podCIDR), parsed. */
function podCidrs(node: V1Node | undefined): Cidr[] {
  if (!node) return []
  const seen = podCidrsOf.get(node)
  const list = node.spec?.podCIDRs?.length ? node.spec.podCIDRs : node.spec?.podCIDR ? [node.spec.podCIDR] : []
  if (seen && seen.list === list) return seen.cidrs
  const cidrs = list.map((c) => parseCidr(c)).filter((c) => c !== undefined)
  podCidrsOf.set(node, {list, cidrs})
  return cidrs
}

/** Asked for every packet a node routes (a scan routes thousands): parsed once per node object and list. */
const podCidrsOf = new WeakMap<V1Node, {list: string[]; cidrs: Cidr[]}>()

export interface PathInputs {
  node: string
  address?: string
  k8sNode?: V1Node
  dataplane: Dataplane
  expected: ExpectedService
  network?: BridgeState
  /** Pod IPs known on this node, to pick a client address that is not a backend. */
  podIPsOnNode: ReadonlySet<string>
  /** svc --from POD: walk only its packets (see PathClient). */
  client?: PathClient
}

/** The bridge of the port a Pod's address was seen behind (its packets enter the node by it), if known. */
function bridgeOf(network: BridgeState | undefined, ip: string): string | undefined {
  const port = network?.portOfIp.get(ip)
  return port ? network!.ports.find((p) => p.port === port)?.bridge : undefined
}

/** The address the client's packets to the ClusterIP leave with: its Pod IP of the family, or its node's. */
export function clientAddress(
  client: PathClient,
  clusterIP: string,
  nodeAddress: string | undefined,
): string | undefined {
  if (client.hostNetwork) return nodeAddress
  return client.ips.find((ip) => familyOf(ip) === familyOf(clusterIP))
}

function clientPodIp(inputs: PathInputs, avoid: Set<string>, family: 4 | 6 | undefined): string | undefined {
  const parsed = podCidrs(inputs.k8sNode).find((c) => c.family === family)
  if (parsed) {
    const top = Math.min(254, cidrSize(parsed) - 2)
    for (let offset = top; offset > 1; offset--) {
      const ip = addressInCidr(parsed, offset)
      if (!avoid.has(ip)) return ip
    }
  }
  for (const ip of inputs.podIPsOnNode) if (!avoid.has(ip) && familyOf(ip) === family) return ip
  return undefined
}

/** Docker's default bridge carries Docker's own subnet: never the way to, or from, another node's pods. */
const DOCKER_BRIDGE = 'docker0'

/** A node as the router of a packet: its pod CIDR, its pods and its bridges (for interface matches). */
interface RouterInputs {
  k8sNode?: V1Node
  network?: BridgeState
  podIPsOnNode: ReadonlySet<string>
}

/** Interfaces a packet to or from another node never uses here: loopback, the pod bridges and their ports, Docker's bridge. */
function nodeLocalInterfaces(r: RouterInputs): ReadonlySet<string> {
  const out = new Set(['lo', DOCKER_BRIDGE])
  for (const p of r.network?.ports ?? []) out.add(p.bridge).add(p.port)
  return out
}

function isPodOfNode(r: RouterInputs, ip: string): boolean {
  if (r.podIPsOnNode.has(ip)) return true
  return podCidrs(r.k8sNode).some((cidr) => cidrContains(cidr, ip))
}

/**
 * Where the node routes a forwarded packet, from what was read (no route table): a pod of this node is behind its
 * bridge; anything else leaves by an interface that is none of the node-local ones.
 */
function routeGuess(r: RouterInputs): (dst: string) => RouteGuess {
  const local = nodeLocalInterfaces(r)
  const bridges = new Set((r.network?.ports ?? []).map((p) => p.bridge))
  const guessed = new Map<string, RouteGuess>()
  const guess = (dst: string): RouteGuess => {
    if (!isPodOfNode(r, dst)) return {outNotVia: local}
    const port = r.network?.portOfIp.get(dst)
    const bridge = port
      ? r.network!.ports.find((p) => p.port === port)?.bridge
      : bridges.size === 1
        ? [...bridges][0]
        : undefined
    return bridge ? {outIface: bridge} : {}
  }
  // Asked for each endpoint by every walk of every entry point: worked out once per address.
  return (dst) => {
    let g = guessed.get(dst)
    if (!g) guessed.set(dst, (g = guess(dst)))
    return g
  }
}

function portLabel(p: ExpectedPort): string {
  return p.portName || String(p.port)
}

export function tracePaths(inputs: PathInputs): PathResult[] {
  const svc = inputs.expected
  if (svc.notProxied || !svc.clusterIP) return []
  if (inputs.client && inputs.client.node !== inputs.node) return []
  const local = inputs.address ? [inputs.address] : []
  const route = routeGuess(inputs)
  const tracer = inputs.dataplane.tracer(local, false, route)
  const localTracer = inputs.dataplane.tracer(local, true, route)
  const bridge =
    inputs.network && new Set(inputs.network.ports.map((p) => p.bridge)).size === 1
      ? inputs.network.ports[0].bridge
      : undefined
  const out: PathResult[] = []
  const OUTSIDE = familyOf(svc.clusterIP) === 6 ? OUTSIDE_CLIENT6 : OUTSIDE_CLIENT
  for (const port of svc.ports) {
    const backends = new Set(port.allEndpoints.map((e) => e.ip))
    const names = inputs.dataplane.names(port)
    const run = (
      entry: Entry,
      packet: Packet,
      expected: ExpectedEndpoint[],
      judgeOpts: Omit<JudgeOptions, 'endpointChain'>,
      locallyGenerated = false,
      source?: string,
    ) => {
      const trace = (locallyGenerated ? localTracer : tracer).trace(packet)
      const j = judge(
        trace,
        port,
        expected,
        {chain: names.internal, ...judgeOpts, endpointChain: names.endpoint},
        inputs,
      )
      out.push({
        node: inputs.node,
        entry,
        port: portLabel(port),
        packet,
        trace,
        ...j,
        breaksOn: j.breaksAt === null ? null : inputs.node,
        remote: [],
        ...(source ? {source} : {}),
      })
    }
    const proto = port.protocol
    if (inputs.client) {
      const c = inputs.client
      const src = clientAddress(c, svc.clusterIP, inputs.address)
      if (!src) continue
      const source = `${c.pod} ${src} on ${c.node}`
      const packet = {src, dst: svc.clusterIP, proto, dport: port.port, sport: 40000}
      // A host-network Pod's packets are the node's own (OUTPUT); a Pod's enter from its bridge (PREROUTING).
      if (c.hostNetwork)
        run('node→ClusterIP', packet, port.internal.endpoints, {hook: 'OUTPUT', needMasq: false}, true, source)
      else {
        const self = port.internal.endpoints.find((e) => e.ip === src)
        run(
          self ? 'pod→itself' : 'pod→ClusterIP',
          {...packet, inIface: bridgeOf(inputs.network, src) ?? bridge},
          port.internal.endpoints,
          {hook: 'PREROUTING', needMasq: svc.masqueradeAll, ...(self ? {self} : {})},
          false,
          source,
        )
      }
      continue
    }
    const fromOutside = {inNotVia: nodeLocalInterfaces(inputs)}
    const client = clientPodIp(inputs, backends, familyOf(svc.clusterIP))
    if (client) {
      run(
        'pod→ClusterIP',
        {src: client, dst: svc.clusterIP, proto, dport: port.port, sport: 40000, inIface: bridge},
        port.internal.endpoints,
        {hook: 'PREROUTING', needMasq: svc.masqueradeAll},
      )
    }
    if (inputs.address) {
      run(
        'node→ClusterIP',
        {src: inputs.address, dst: svc.clusterIP, proto, dport: port.port, sport: 40001},
        port.internal.endpoints,
        {hook: 'OUTPUT', needMasq: false},
        true,
      )
      if (port.nodePort)
        run(
          'outside→NodePort',
          {src: OUTSIDE, dst: inputs.address, proto, dport: port.nodePort, sport: 40002, ...fromOutside},
          port.external.endpoints,
          {
            hook: 'PREROUTING',
            needMasq: !port.external.local,
            nodePort: true,
            chain: names.externalPolicy,
          },
        )
    }
    const outsideAddresses = [
      ['outside→LoadBalancer', svc.loadBalancerIPs[0], allowedSource(OUTSIDE, svc.loadBalancerSourceRanges), 40003],
      ['outside→externalIP', svc.externalIPs[0], OUTSIDE, 40004],
    ] as const
    for (const [entry, address, src, sport] of outsideAddresses)
      if (address)
        run(entry, {src, dst: address, proto, dport: port.port, sport, ...fromOutside}, port.external.endpoints, {
          hook: 'PREROUTING',
          needMasq: !port.external.local,
          chain: names.externalPolicy,
        })
    const self = port.internal.endpoints.find((e) => e.nodeName === inputs.node)
    if (self) {
      run(
        'pod→itself',
        {src: self.ip, dst: svc.clusterIP, proto, dport: port.port, sport: 40005, inIface: bridge},
        port.internal.endpoints,
        {hook: 'PREROUTING', needMasq: svc.masqueradeAll, self},
      )
    }
  }
  return out
}

interface JudgeOptions {
  hook: 'PREROUTING' | 'OUTPUT'
  /** The chain that holds the endpoints for this entry (KUBE-SVC or KUBE-SVL). */
  chain?: string
  endpointChain: (e: ExpectedEndpoint) => string
  needMasq: boolean
  nodePort?: boolean
  self?: ExpectedEndpoint
}

interface Judgement {
  ok: boolean | null
  breaksAt: Step | null
  detail: string
}

const rank = (s: Step | null) => (s === null ? 999 : s === 'unknown' ? 998 : STEPS.indexOf(s))

function pct(p: number): string {
  return `${Math.round(p * 1000) / 10}%`
}

function terminalRule(o: TraceOutcome): string {
  if (o.policy) return `the ${o.verdict} policy of ${o.policy.table} ${o.policy.chain} (no rule accepted the packet)`
  const last = o.steps[o.steps.length - 1]
  return last ? `${last.table} ${last.chain} line ${last.line}: ${last.rule}` : 'the chain policy'
}

/** The nat chains a walk entered: those whose rules matched and those jumped to (even when empty), in walk order. */
function natChainsEntered(o: TraceOutcome, v: ModeVocabulary): Set<string> {
  const chains = new Set<string>()
  eachNatChainEntered(o, v, (chain) => void chains.add(chain))
  return chains
}

function eachNatChainEntered(o: TraceOutcome, v: ModeVocabulary, visit: (chain: string) => void): void {
  for (const s of o.steps) {
    if (!v.isNatTable(s.table)) continue
    visit(s.chain)
    for (const target of jumpTargets(s)) visit(target)
  }
}

/** What judgeOutcome asks of the nat chains an outcome entered, in one pass (every outcome of every walk is asked). */
interface NatPassage {
  services: boolean
  nodePorts: boolean
  /** A service chain was entered. */
  service: boolean
  /** The first endpoint chain entered. */
  endpoint: string | undefined
}

function natPassage(o: TraceOutcome, v: ModeVocabulary, servicesChain: string, nodePortsChain: string): NatPassage {
  const out: NatPassage = {services: false, nodePorts: false, service: false, endpoint: undefined}
  eachNatChainEntered(o, v, (chain) => {
    if (chain === servicesChain) out.services = true
    if (chain === nodePortsChain) out.nodePorts = true
    if (!out.service && v.isServiceChain(chain)) out.service = true
    if (out.endpoint === undefined && v.isEndpointChain(chain)) out.endpoint = chain
  })
  return out
}

/**
 * The chains a step's rule jumps or goes to, kept on the step under a symbol (not enumerable: no output or comparison
 * sees it). Not a WeakMap: V8's young collector holds a WeakMap's values, and a scan's steps would then outlive their
 * Service.
 */
const JUMPS = Symbol('chains jumped to')

/** The chains a step's rule jumps or goes to, read from its text once per step (a tracer shares a rule's step between walks). */
function jumpTargets(s: TraceStep): string[] {
  const known = (s as TraceStep & {[JUMPS]?: string[]})[JUMPS]
  if (known) return known
  const targets = [...s.rule.matchAll(/(?:\s-[jg]|\bjump|\bgoto)\s+(\S+?),?(?=\s|$)/g)].map((m) => m[1])
  Object.defineProperty(s, JUMPS, {value: targets, enumerable: false})
  return targets
}

/** The chains a vocabulary's service-match and nodeport-match steps end in (asked for every outcome of every walk). */
function matchChains(v: ModeVocabulary): {servicesChain: string; nodePortsChain: string} {
  let chains = matchChainsOf.get(v)
  if (!chains) {
    chains = {
      servicesChain: v.steps['service-match'].split(' ').pop()!,
      nodePortsChain: v.steps['nodeport-match'].split(' ').pop()!,
    }
    matchChainsOf.set(v, chains)
  }
  return chains
}

const matchChainsOf = new WeakMap<ModeVocabulary, {servicesChain: string; nodePortsChain: string}>()

function judgeOutcome(
  o: TraceOutcome,
  port: ExpectedPort,
  expected: Set<string>,
  opts: JudgeOptions,
  inputs: PathInputs,
): Judgement | undefined {
  const v = inputs.dataplane.vocab
  const share = pct(o.probability)
  const {servicesChain, nodePortsChain} = matchChains(v)
  const nat = natPassage(o, v, servicesChain, nodePortsChain)
  if (o.verdict === 'UNKNOWN') return {ok: null, breaksAt: 'unknown', detail: `cannot tell: ${o.reason}`}
  if (!nat.services)
    return {
      ok: false,
      breaksAt: 'entry',
      detail: `${opts.hook} does not send the packet to ${servicesChain} (${o.verdict === 'ACCEPT' ? 'left untranslated' : o.verdict})`,
    }
  const sawService = nat.service
  if (o.verdict === 'REJECT' || o.verdict === 'DROP') {
    if (!sawService) {
      const last = o.steps[o.steps.length - 1]
      const kubeRule = !o.policy && last && (/^KUBE-/.test(last.chain) || v.isNatTable(last.table))
      return {
        ok: false,
        breaksAt: kubeRule ? (opts.nodePort ? 'nodeport-match' : 'service-match') : 'filter',
        detail: `${o.verdict} by ${terminalRule(o)}`,
      }
    }
    return {
      ok: false,
      breaksAt: 'filter',
      detail: `${share} of new connections${o.destination ? ` (to ${o.destination})` : ''}: ${o.verdict} by ${terminalRule(o)}`,
    }
  }
  if (!sawService) {
    const at: Step = opts.nodePort && (nat.nodePorts || v.nodePortsInServices) ? 'nodeport-match' : 'service-match'
    const where = v.steps[at]
    return {
      ok: false,
      breaksAt: at,
      detail: `no entry in ${where} for ${opts.nodePort ? `node port ${port.nodePort}` : `${port.svcPortName}`}: the packet leaves untranslated`,
    }
  }
  const sep = nat.endpoint
  if (!sep)
    return {
      ok: false,
      breaksAt: 'service',
      detail: `${share} of new connections pass through the service chain without choosing an endpoint`,
    }
  if (o.verdict !== 'DNAT')
    return {
      ok: false,
      breaksAt: 'endpoint',
      detail: `${share} of new connections: ${sep} has no DNAT rule, the packet leaves untranslated`,
    }
  if (!expected.has(o.destination!))
    return {
      ok: false,
      breaksAt: 'DNAT',
      detail: `${share} of new connections DNAT to ${o.destination} (via ${sep}), which is not a ready endpoint`,
    }
  if (opts.needMasq && !o.masquerade)
    return {
      ok: false,
      breaksAt: 'masquerade',
      detail: `${share} of new connections to ${o.destination} are not masqueraded: replies bypass this node`,
    }
  if (opts.self && o.destination === opts.self.address) {
    if (!o.masquerade)
      return {
        ok: false,
        breaksAt: 'masquerade',
        detail: `when ${opts.self.podName ?? opts.self.ip} is chosen (${share}), the packet is not masqueraded: the pod sees its own address as source and the reply never returns`,
      }
    const net = inputs.network
    const portName = net?.portOfIp.get(opts.self.ip)
    const bp = portName ? net!.ports.find((p) => p.port === portName) : undefined
    // Without the links, whether the bridge is promiscuous is unknown: the hairpin check is said not made (coverage).
    if (bp && !bp.hairpin && linksRead(net!) && !net!.promiscuousBridges.has(bp.bridge))
      return {
        ok: false,
        breaksAt: 'bridge/hairpin',
        detail: `when ${opts.self.podName ?? opts.self.ip} is chosen (${share}), the reply must go back out ${bp.port} on ${bp.bridge}, whose hairpin_mode is 0`,
      }
  }
  return undefined
}

function judge(
  trace: TraceResult,
  port: ExpectedPort,
  expected: ExpectedEndpoint[],
  opts: JudgeOptions,
  inputs: PathInputs,
): Judgement {
  if (expected.length === 0) {
    if (port.hasEndpoints)
      return {
        ok: null,
        breaksAt: null,
        detail:
          'no endpoint on this node and the traffic policy is Local: dropped here by design (health checks steer load balancers to nodes with endpoints)',
      }
    return {
      ok: false,
      breaksAt: 'endpoints',
      detail: 'the Service has no ready endpoints: kube-proxy rejects the connection',
    }
  }
  const want = new Set(expected.map((e) => e.address))
  let worst: Judgement | undefined
  for (const o of trace.outcomes) {
    const j = judgeOutcome(o, port, want, opts, inputs)
    if (j && (!worst || rank(j.breaksAt) < rank(worst.breaksAt))) worst = j
  }
  if (worst) return worst
  const reached = new Set(trace.destinations)
  const missing = expected.filter((e) => !reached.has(e.address))
  if (missing.length === 0)
    return {
      ok: true,
      breaksAt: null,
      detail: `reaches ${expected.length} endpoint(s): ${trace.destinations.join(', ')}`,
    }
  const entered = new Set(trace.outcomes.flatMap((o) => [...natChainsEntered(o, inputs.dataplane.vocab)]))
  const hollow = missing.find((e) => entered.has(opts.endpointChain(e)))
  if (hollow)
    return {
      ok: false,
      breaksAt: 'endpoint',
      detail: `${opts.endpointChain(hollow)} (endpoint ${hollow.address}${hollow.podName ? `, ${hollow.podName}` : ''}) has no DNAT rule: the jump falls through and the endpoint never gets traffic`,
    }
  return {
    ok: false,
    breaksAt: 'service',
    detail: `endpoint ${missing.map((e) => `${e.address}${e.podName ? ` (${e.podName})` : ''}`).join(', ')} is never chosen: missing from ${opts.chain ?? 'its service chain'}`,
  }
}

/** The second half of a path whose endpoint is on another node: the packet as it arrives there, and its walk. */
export interface EndpointHalf {
  path: PathResult
  /** The node that hosts the endpoint. */
  node: string
  endpoint: ExpectedEndpoint
  /** The share of the path's new connections that take this half. */
  probability: number
  packet: Packet
  trace: TraceResult
}

/**
 * At most this many distinct second-half walks per Service (a few per source node and endpoint): each walk crosses
 * the endpoint node's whole nat PREROUTING, so a Service with thousands of endpoints on many nodes must stay bounded.
 */
const MAX_ENDPOINT_HALVES = 2_000

/** A read node, as the first or second node of a path. */
export interface PathNode extends RouterInputs {
  node: string
  address?: string
  dataplane: Dataplane
}

/**
 * For every path that DNATs to an endpoint on another read node, walks the packet as that node receives it: from the
 * source node (the client's address, or the source node's own when it masqueraded), already DNATed, through the
 * endpoint node's PREROUTING, FORWARD and POSTROUTING to the pod's bridge.
 */
function walkEndpointHalves(paths: PathResult[], nodes: PathNode[], endpoints: ExpectedEndpoint[]): EndpointHalf[] {
  const endpointAt = new Map(endpoints.map((e) => [e.address, e]))
  const nodeNamed = new Map(nodes.map((n) => [n.node, n]))
  const tracers = new Map<string, {tracer: Tracer; notVia: ReadonlySet<string>}>()
  const walks = new Map<string, TraceResult>()
  const out: EndpointHalf[] = []
  for (const path of paths) {
    const shares = new Map<ExpectedEndpoint, {probability: number; src: string}>()
    for (const o of path.trace.outcomes) {
      const endpoint = o.verdict === 'DNAT' && o.destination ? endpointAt.get(o.destination) : undefined
      if (!endpoint?.nodeName || endpoint.nodeName === path.node || !nodeNamed.has(endpoint.nodeName)) continue
      const src = o.masquerade ? nodeNamed.get(path.node)?.address : path.packet.src
      if (!src) continue
      const seen = shares.get(endpoint)
      shares.set(endpoint, {probability: (seen?.probability ?? 0) + o.probability, src})
    }
    for (const [endpoint, {probability, src}] of shares) {
      const target = nodeNamed.get(endpoint.nodeName!)!
      let at = tracers.get(target.node)
      if (!at) {
        at = arrivalTracer(target)
        tracers.set(target.node, at)
      }
      const {tracer, notVia} = at
      const packet: Packet = {
        src,
        dst: endpoint.ip,
        proto: path.packet.proto,
        dport: endpoint.port,
        sport: path.packet.sport,
        inNotVia: notVia,
      }
      const key = `${target.node} ${packet.proto} ${src} ${endpoint.address}`
      let trace = walks.get(key)
      if (!trace) {
        if (walks.size >= MAX_ENDPOINT_HALVES) return out
        trace = tracer.trace(packet)
        walks.set(key, trace)
      }
      out.push({path, node: target.node, endpoint, probability, packet, trace})
    }
  }
  return out
}

/** A node's tracer for packets arriving from another node, and the interfaces such packets never come in by. */
function arrivalTracer(target: PathNode): {tracer: Tracer; notVia: ReadonlySet<string>} {
  return {
    tracer: target.dataplane.tracer(target.address ? [target.address] : [], false, routeGuess(target)),
    notVia: nodeLocalInterfaces(target),
  }
}

/** A packet from one read node's own address to a pod on another read node, judged as that node receives it. */
export interface ArrivalWalk {
  from: string
  node: string
  endpoint: ExpectedEndpoint
  ok: boolean | null
  breaksAt: Step | null
  detail: string
  /** The walk on the endpoint's node (what a finding's condition on the break reads). */
  trace: TraceResult
}

/** At most this many arrivals walked per diagnosis (each crosses the pod node's PREROUTING and FORWARD). */
const MAX_ARRIVALS = 256

/**
 * Packets a node sends from its own address to pods on the other read nodes (the cluster DNS endpoints, which the
 * node's DNS question reaches), walked on each pod's node: the second half of a path that is not the Service's own.
 */
export function walkArrivals(nodes: PathNode[], endpoints: ExpectedEndpoint[], proto: Packet['proto']): ArrivalWalk[] {
  const nodeNamed = new Map(nodes.map((n) => [n.node, n]))
  const tracers = new Map<string, {tracer: Tracer; notVia: ReadonlySet<string>}>()
  const out: ArrivalWalk[] = []
  for (const from of nodes) {
    if (!from.address) continue
    for (const endpoint of endpoints) {
      const target = endpoint.nodeName ? nodeNamed.get(endpoint.nodeName) : undefined
      if (!target || target === from || familyOf(endpoint.ip) !== familyOf(from.address)) continue
      if (out.length >= MAX_ARRIVALS) return out
      let at = tracers.get(target.node)
      if (!at) {
        at = arrivalTracer(target)
        tracers.set(target.node, at)
      }
      const packet: Packet = {
        src: from.address,
        dst: endpoint.ip,
        proto,
        dport: endpoint.port,
        sport: 40005,
        inNotVia: at.notVia,
      }
      const trace = at.tracer.trace(packet)
      const j = judgeHalf({trace, probability: 1, endpoint, node: target.node}, target.dataplane.vocab)
      out.push({from: from.node, node: target.node, endpoint, ...j, trace})
    }
  }
  return out
}

/** Where a second half is dropped: a nat (or other mangling) hook's chain, else the filter path. */
function halfDropStep(o: TraceOutcome, v: ModeVocabulary): Step {
  const site = o.policy ?? o.steps.at(-1)
  if (!site || !v.isNatTable(site.table)) return 'filter'
  return /POSTROUTING|postrouting/.test(site.chain) ? 'masquerade' : 'entry'
}

function endpointText(e: ExpectedEndpoint, node: string): string {
  return `${e.address}${e.podName ? ` (${e.podName})` : ''} on ${node}`
}

/** The verdict of one second half: the first place it breaks (in step order), else where it arrives. */
function judgeHalf(h: Pick<EndpointHalf, 'trace' | 'probability' | 'endpoint' | 'node'>, v: ModeVocabulary): Judgement {
  let worst: Judgement | undefined
  const to = endpointText(h.endpoint, h.node)
  for (const o of h.trace.outcomes) {
    const share = pct(h.probability * o.probability)
    let j: Judgement | undefined
    if (o.verdict === 'UNKNOWN')
      j = {
        ok: null,
        breaksAt: 'unknown',
        detail: `${share} of new connections go to ${to}, where the walk cannot tell: ${o.reason}`,
      }
    else if (o.verdict === 'DROP' || o.verdict === 'REJECT')
      j = {
        ok: false,
        breaksAt: halfDropStep(o, v),
        detail: `${share} of new connections go to ${to}, which ${o.verdict === 'DROP' ? 'drops' : 'rejects'} them (arriving DNATed): ${o.verdict} by ${terminalRule(o)}`,
      }
    else if (o.verdict === 'DNAT' && o.destination !== h.endpoint.address)
      j = {
        ok: false,
        breaksAt: 'DNAT',
        detail: `${share} of new connections go to ${to}, which translates them again, to ${o.destination}`,
      }
    if (j && (!worst || rank(j.breaksAt) < rank(worst.breaksAt))) worst = j
  }
  return (
    worst ?? {
      ok: true,
      breaksAt: null,
      detail: `${pct(h.probability)} of new connections go to ${to}, which forwards them to the pod`,
    }
  )
}

/**
 * Makes each path one path across two nodes: for every endpoint on another node it DNATs to, the verdict of that
 * endpoint's half on its node (`remote`), or "not followed" when that node's rules were not read, or were read and are
 * not judged (`readNotJudged`: why, by node, such as a proxy mode not known). A path that works on its own
 * node but whose half breaks takes the half's verdict: the first break in step order (then the largest share), with
 * `breaksOn` naming the endpoint's node. A break on the path's own node comes first and is kept. Returns the halves
 * walked, for the checks.
 */
export function followEndpoints(
  paths: PathResult[],
  nodes: PathNode[],
  endpoints: ExpectedEndpoint[],
  readNotJudged: ReadonlyMap<string, string>,
): EndpointHalf[] {
  const vocab = new Map(nodes.map((n) => [n.node, n.dataplane.vocab]))
  const endpointAt = new Map(endpoints.map((e) => [e.address, e]))
  const halves = new Map<string, EndpointHalf>()
  const paths0 = new Map(paths.map((p, i) => [p, i]))
  const walked = walkEndpointHalves(paths, nodes, endpoints)
  for (const h of walked) halves.set(`${paths0.get(h.path)} ${h.endpoint.address}`, h)
  for (const [path, i] of paths0) {
    const shares = new Map<ExpectedEndpoint, number>()
    for (const o of path.trace.outcomes) {
      const e = o.verdict === 'DNAT' && o.destination ? endpointAt.get(o.destination) : undefined
      if (e?.nodeName && e.nodeName !== path.node) shares.set(e, (shares.get(e) ?? 0) + o.probability)
    }
    path.remote = [...shares]
      .map(([e, share]): RemoteHalf => {
        const h = halves.get(`${i} ${e.address}`)
        const rounded = Math.round(share * 10_000) / 10_000
        if (!h) {
          const why = vocab.has(e.nodeName!)
            ? 'its half was not traced (too many endpoint halves, or no source address for the masqueraded packet)'
            : (readNotJudged.get(e.nodeName!) ?? `${e.nodeName}'s rules were not read`)
          return {
            endpoint: e.address,
            pod: e.podName ?? null,
            node: e.nodeName!,
            share: rounded,
            followed: false,
            ok: null,
            breaksAt: null,
            detail: `not followed: ${why}`,
          }
        }
        const j = judgeHalf(h, vocab.get(h.node)!)
        return {
          endpoint: e.address,
          pod: e.podName ?? null,
          node: e.nodeName!,
          share: rounded,
          followed: true,
          ok: j.ok,
          breaksAt: j.breaksAt,
          detail: j.detail,
          trace: h.trace,
        }
      })
      .sort((a, b) => compareNames(a.node, b.node) || compareNames(a.endpoint, b.endpoint))
    if (path.ok !== true) continue
    const worst = path.remote
      .filter((r) => r.followed && r.ok !== true)
      .sort((a, b) => rank(a.breaksAt) - rank(b.breaksAt) || b.share - a.share)[0]
    if (worst) Object.assign(path, {ok: worst.ok, breaksAt: worst.breaksAt, breaksOn: worst.node, detail: worst.detail})
  }
  return walked
}
