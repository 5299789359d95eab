import type {V1Node} from '@kubernetes/client-node'
import type {ExpectedEndpoint, ExpectedPort, ExpectedService} from './expected.js'
import type {BridgeState} from '../parse/bridge-state.js'
import type {Dataplane, ModeVocabulary} from './dataplane.js'
import {addressInCidr, cidrSize, parseCidr} from '../net/address.js'
import type {Packet, TraceOutcome, TraceResult} from '../trace/types.js'

export type Entry = 'pod→ClusterIP' | 'node→ClusterIP' | 'outside→NodePort' | 'outside→LoadBalancer' | 'outside→externalIP' | 'pod→itself'

export const ENTRIES: Entry[] = ['pod→ClusterIP', 'node→ClusterIP', 'outside→NodePort', 'outside→LoadBalancer', 'outside→externalIP', 'pod→itself']

/** The steps of the path, in the order a packet meets them. */
const STEPS = ['endpoints', 'PREROUTING', 'OUTPUT', 'KUBE-SERVICES', 'KUBE-NODEPORTS', 'KUBE-EXT', 'KUBE-SVC', 'KUBE-SEP', 'DNAT', 'filter', 'POSTROUTING', 'bridge/hairpin'] as const
export type Step = (typeof STEPS)[number] | 'unknown'

export interface PathResult {
  node: string
  entry: Entry
  port: string
  /** null when the tracer could not decide (a rule it cannot evaluate). */
  ok: boolean | null
  breaksAt: Step | null
  detail: string
  packet: Packet
  trace: TraceResult
}

/** A stand-in address outside the cluster, from TEST-NET-3 (RFC 5737): never sent to, only traced. */
const OUTSIDE_CLIENT = '203.0.113.10'

export interface PathInputs {
  node: string
  address?: string
  k8sNode?: V1Node
  dataplane: Dataplane
  expected: ExpectedService
  network?: BridgeState
  /** Pod IPs known on this node, to pick a client address that is not a backend. */
  podIPsOnNode: string[]
}

function clientPodIp(inputs: PathInputs, avoid: Set<string>): string | undefined {
  const cidr = inputs.k8sNode?.spec?.podCIDR
  const parsed = cidr ? parseCidr(cidr) : undefined
  if (parsed) {
    const top = Math.min(254, cidrSize(parsed) - 2)
    for (let offset = top; offset > 1; offset--) {
      const ip = addressInCidr(parsed, offset)
      if (!avoid.has(ip)) return ip
    }
  }
  return inputs.podIPsOnNode.find((ip) => !avoid.has(ip))
}

function portLabel(p: ExpectedPort): string {
  return p.portName || String(p.port)
}

export function tracePaths(inputs: PathInputs): PathResult[] {
  const svc = inputs.expected
  if (svc.notProxied || !svc.clusterIP) return []
  const local = inputs.address ? [inputs.address] : []
  const tracer = inputs.dataplane.tracer(local)
  const localTracer = inputs.dataplane.tracer(local, true)
  const bridge = inputs.network && new Set(inputs.network.ports.map((p) => p.bridge)).size === 1 ? inputs.network.ports[0].bridge : undefined
  const out: PathResult[] = []
  for (const port of svc.ports) {
    const backends = new Set(port.allEndpoints.map((e) => e.ip))
    const names = inputs.dataplane.names(port)
    const run = (entry: Entry, packet: Packet, expected: ExpectedEndpoint[], judgeOpts: Omit<JudgeOptions, 'endpointChain'>, locallyGenerated = false) => {
      const trace = (locallyGenerated ? localTracer : tracer).trace(packet)
      out.push({node: inputs.node, entry, port: portLabel(port), packet, trace, ...judge(trace, port, expected, {chain: names.internal, ...judgeOpts, endpointChain: names.endpoint}, inputs)})
    }
    const proto = port.protocol
    const client = clientPodIp(inputs, backends)
    if (client) {
      run('pod→ClusterIP', {src: client, dst: svc.clusterIP, proto, dport: port.port, sport: 40000, inIface: bridge}, port.internal.endpoints, {hook: 'PREROUTING', needMasq: svc.masqueradeAll})
    }
    if (inputs.address) {
      run('node→ClusterIP', {src: inputs.address, dst: svc.clusterIP, proto, dport: port.port, sport: 40001}, port.internal.endpoints, {hook: 'OUTPUT', needMasq: false}, true)
      if (port.nodePort)
        run('outside→NodePort', {src: OUTSIDE_CLIENT, dst: inputs.address, proto, dport: port.nodePort, sport: 40002}, port.external.endpoints, {
          hook: 'PREROUTING',
          needMasq: !port.external.local,
          nodePort: true,
          chain: names.externalPolicy,
        })
    }
    if (svc.loadBalancerIPs[0])
      run('outside→LoadBalancer', {src: OUTSIDE_CLIENT, dst: svc.loadBalancerIPs[0], proto, dport: port.port, sport: 40003}, port.external.endpoints, {
        hook: 'PREROUTING',
        needMasq: !port.external.local,
        chain: names.externalPolicy,
      })
    if (svc.externalIPs[0])
      run('outside→externalIP', {src: OUTSIDE_CLIENT, dst: svc.externalIPs[0], proto, dport: port.port, sport: 40004}, port.external.endpoints, {
        hook: 'PREROUTING',
        needMasq: !port.external.local,
        chain: names.externalPolicy,
      })
    const self = port.internal.endpoints.find((e) => e.nodeName === inputs.node)
    if (self) {
      run('pod→itself', {src: self.ip, dst: svc.clusterIP, proto, dport: port.port, sport: 40005, inIface: bridge}, port.internal.endpoints, {hook: 'PREROUTING', needMasq: svc.masqueradeAll, self})
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
  const last = o.steps[o.steps.length - 1]
  return last ? `${last.table} ${last.chain} line ${last.line}: ${last.rule}` : 'the chain policy'
}

/** The nat chains a walk entered: those whose rules matched and those jumped to (even when empty). */
function natChainsEntered(o: TraceOutcome, v: ModeVocabulary): Set<string> {
  const out = new Set<string>()
  for (const s of o.steps) {
    if (!v.isNatTable(s.table)) continue
    out.add(s.chain)
    for (const m of s.rule.matchAll(/(?:\s-[jg]|\bjump|\bgoto)\s+(\S+?),?(?=\s|$)/g)) out.add(m[1])
  }
  return out
}

function judgeOutcome(o: TraceOutcome, port: ExpectedPort, expected: Set<string>, opts: JudgeOptions, inputs: PathInputs): Judgement | undefined {
  const v = inputs.dataplane.vocab
  const nat = natChainsEntered(o, v)
  const share = pct(o.probability)
  const servicesChain = v.services.split(' ').pop()!
  const nodePortsChain = v.nodePorts.split(' ').pop()!
  if (o.verdict === 'UNKNOWN') return {ok: null, breaksAt: 'unknown', detail: `cannot tell: ${o.reason}`}
  if (!nat.has(servicesChain))
    return {ok: false, breaksAt: opts.hook, detail: `${opts.hook} does not send the packet to ${servicesChain} (${o.verdict === 'ACCEPT' ? 'left untranslated' : o.verdict})`}
  const sawService = [...nat].some((c) => v.isServiceChain(c))
  if (o.verdict === 'REJECT' || o.verdict === 'DROP') {
    if (!sawService) {
      const last = o.steps[o.steps.length - 1]
      const kubeRule = last && (/^KUBE-/.test(last.chain) || v.isNatTable(last.table))
      return {ok: false, breaksAt: kubeRule ? (opts.nodePort ? 'KUBE-NODEPORTS' : 'KUBE-SERVICES') : 'filter', detail: `${o.verdict} by ${terminalRule(o)}`}
    }
    return {ok: false, breaksAt: 'filter', detail: `${share} of new connections: ${o.verdict} by ${terminalRule(o)}`}
  }
  if (!sawService) {
    const at: Step = opts.nodePort ? (nat.has(nodePortsChain) || v.mode === 'nftables' ? 'KUBE-NODEPORTS' : 'KUBE-SERVICES') : 'KUBE-SERVICES'
    const where = at === 'KUBE-NODEPORTS' ? v.nodePorts : v.services
    return {ok: false, breaksAt: at, detail: `no entry in ${where} for ${opts.nodePort ? `node port ${port.nodePort}` : `${port.svcPortName}`}: the packet leaves untranslated`}
  }
  const sep = [...nat].find((c) => v.isEndpointChain(c))
  if (!sep) return {ok: false, breaksAt: 'KUBE-SVC', detail: `${share} of new connections pass through the service chain without choosing an endpoint`}
  if (o.verdict !== 'DNAT') return {ok: false, breaksAt: 'KUBE-SEP', detail: `${share} of new connections: ${sep} has no DNAT rule, the packet leaves untranslated`}
  if (!expected.has(o.destination!)) return {ok: false, breaksAt: 'DNAT', detail: `${share} of new connections DNAT to ${o.destination} (via ${sep}), which is not a ready endpoint`}
  if (opts.needMasq && !o.masquerade) return {ok: false, breaksAt: 'POSTROUTING', detail: `${share} of new connections to ${o.destination} are not masqueraded: replies bypass this node`}
  if (opts.self && o.destination === opts.self.address) {
    if (!o.masquerade)
      return {
        ok: false,
        breaksAt: 'POSTROUTING',
        detail: `when ${opts.self.podName ?? opts.self.ip} is chosen (${share}), the packet is not masqueraded: the pod sees its own address as source and the reply never returns`,
      }
    const net = inputs.network
    const portName = net?.portOfIp.get(opts.self.ip)
    const bp = portName ? net!.ports.find((p) => p.port === portName) : undefined
    if (bp && !bp.hairpin && !net!.promiscuousBridges.has(bp.bridge))
      return {
        ok: false,
        breaksAt: 'bridge/hairpin',
        detail: `when ${opts.self.podName ?? opts.self.ip} is chosen (${share}), the reply must go back out ${bp.port} on ${bp.bridge}, whose hairpin_mode is 0`,
      }
  }
  return undefined
}

function judge(trace: TraceResult, port: ExpectedPort, expected: ExpectedEndpoint[], opts: JudgeOptions, inputs: PathInputs): Judgement {
  if (expected.length === 0) {
    if (port.hasEndpoints)
      return {ok: null, breaksAt: null, detail: 'no endpoint on this node and the traffic policy is Local: dropped here by design (health checks steer load balancers to nodes with endpoints)'}
    return {ok: false, breaksAt: 'endpoints', detail: 'the Service has no ready endpoints: kube-proxy rejects the connection'}
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
  const entered = new Set(trace.outcomes.flatMap((o) => [...natChainsEntered(o, inputs.dataplane.vocab)]))
  const hollow = missing.find((e) => entered.has(opts.endpointChain(e)))
  if (hollow)
    return {
      ok: false,
      breaksAt: 'KUBE-SEP',
      detail: `${opts.endpointChain(hollow)} (endpoint ${hollow.address}${hollow.podName ? `, ${hollow.podName}` : ''}) has no DNAT rule: the jump falls through and the endpoint never gets traffic`,
    }
  if (missing.length > 0)
    return {
      ok: false,
      breaksAt: 'KUBE-SVC',
      detail: `endpoint ${missing.map((e) => `${e.address}${e.podName ? ` (${e.podName})` : ''}`).join(', ')} is never chosen: missing from ${opts.chain ?? 'its service chain'}`,
    }
  return {ok: true, breaksAt: null, detail: `reaches ${expected.length} endpoint(s): ${trace.destinations.join(', ')}`}
}
