import type {RouteGuess, Tracer} from '../trace/types.js'
import type {ExpectedEndpoint, ExpectedPort, ExpectedService} from './expected.js'
import type {NodeRead} from './reach.js'
import type {RuleStep} from './steps.js'

/** A rule, map element or other line of a node's dump that stands as evidence. */
export interface ProgrammedRule {
  table: string
  line: number
  text: string
  /** Where it sends the packet: a chain name or a verdict. */
  target?: string
}

/** The address a packet is sent to: a Pod's (or other endpoint's) IP and port. */
interface Backend {
  ip: string
  /** undefined when the DNAT keeps the packet's port. */
  port?: number
  /** "ip:port" ("[ip]:port" for IPv6), as kube-proxy writes it. */
  address: string
}

/** An endpoint jump of a service chain, and what its endpoint chain does. */
export interface ProgrammedEndpoint {
  jump: ProgrammedRule
  /** This mode's name for the endpoint: iptables KUBE-SEP-…, nftables endpoint-…, IPVS "RS ip:port". */
  chain: string
  /** The share of new connections this jump takes at its position (statistic probability, numgen 1/n, …). */
  probability: number
  /** The rule that sends the packet to the backend (DNAT, dnat to, the real server line). */
  dnatRule?: ProgrammedRule
  /** Where the packet goes; undefined when the endpoint has no DNAT. */
  backend?: Backend
  /** The endpoint chain marks traffic from the endpoint itself for masquerade (hairpin). */
  hairpinMasq: boolean
  /** IPVS: the real server's weight (probabilities then follow the scheduler, not the statistic chain). */
  weight?: number
}

/** What a node really has for one service port, whatever the proxy mode. Matched by structure, never by comment. */
export interface ProgrammedPort {
  expected: ExpectedPort
  clusterIPRule?: ProgrammedRule
  /** A REJECT/DROP for the ClusterIP:port (no endpoints). */
  clusterIPFilterRule?: ProgrammedRule
  nodePortRule?: ProgrammedRule
  nodePortFilterRule?: ProgrammedRule
  externalRules: Map<string, ProgrammedRule>
  /** The chain ClusterIP traffic goes to, and whether it exists. */
  chain: string
  chainExists: boolean
  endpoints: ProgrammedEndpoint[]
  /** The chain external traffic goes to, when it is not `chain` (externalTrafficPolicy: Local → KUBE-SVL …). */
  external?: {chain: string; endpoints: ProgrammedEndpoint[]}
  /** This mode's names for the chains kube-proxy should use. */
  want: ChainNames
  /** ClientIP session affinity as programmed (undefined where the mode keeps it elsewhere, e.g. IPVS persistence). */
  affinity?: {rule?: ProgrammedRule; seconds?: number}
}

/** One endpoint-holding chain of a port, with the endpoints kube-proxy should have put there. */
export interface EndpointChain {
  chain: string
  endpoints: ProgrammedEndpoint[]
  expected: ExpectedEndpoint[]
}

/** The port's endpoint chains: the one ClusterIP traffic uses, and the external-policy one when it differs. */
export function endpointChains(p: ProgrammedPort): EndpointChain[] {
  const out: EndpointChain[] = [{chain: p.chain, endpoints: p.endpoints, expected: p.expected.internal.endpoints}]
  if (p.external)
    out.push({chain: p.external.chain, endpoints: p.external.endpoints, expected: p.expected.external.endpoints})
  return out
}

export interface ChainNames {
  /** The chain holding the endpoints for ClusterIP traffic (KUBE-SVC/KUBE-SVL, service-/local-). */
  internal: string
  /** The entry chain for NodePort/LB/externalIP traffic (KUBE-EXT, external-). */
  external: string
  /** The chain holding the endpoints for that external traffic. */
  externalPolicy: string
  endpoint(ep: ExpectedEndpoint): string
}

export interface NodeInfrastructure {
  /** The dispatch chain exists (iptables KUBE-SERVICES, nftables services). */
  hasServicesChain: boolean
  /** Jumps that must exist: label and the rule found, if any. */
  hooks: Array<{label: string; rule?: ProgrammedRule}>
  nodePortsJump?: ProgrammedRule
  markMasqRule?: ProgrammedRule
  markMasqValue?: number
  masqueradeRule?: ProgrammedRule
  postroutingMark?: number
}

/** The words a mode uses, for messages and for reading traces. */
export interface ModeVocabulary {
  mode: string
  /**
   * This mode's own names for the steps of the path met in its rules (the chain, map or set a break there is in), for
   * the detail of a break and the report's messages: `service-match` is iptables' "nat KUBE-SERVICES", nftables'
   * "nftables chain services". The last word of `service-match` and `nodeport-match` is the chain a trace enters.
   */
  steps: Record<RuleStep, string>
  markChain: string
  masqChain: string
  /** Tables of a trace step that do NAT (iptables "nat"; nftables kube-proxy's table). */
  isNatTable(table: string): boolean
  isServiceChain(chain: string): boolean
  isEndpointChain(chain: string): boolean
  /**
   * The node-port lookup is part of the service lookup, never a chain a trace enters (nftables: a map the services chain
   * consults): a node port matched nowhere breaks at nodeport-match even though no node-port chain was entered.
   */
  nodePortsInServices: boolean
}

/** One proxy mode's reading of a node: what it has, how to trace through it, how a person looks at it. */
export interface Dataplane {
  vocab: ModeVocabulary
  /** The chains kube-proxy names, in this mode, for one service port. */
  names(port: ExpectedPort): ChainNames
  infrastructure(): NodeInfrastructure
  programmed(svc: ExpectedService): ProgrammedPort[]
  /** `route`: where the node sends a forwarded packet, for output-interface matches (FORWARD, POSTROUTING). */
  tracer(localAddresses: string[], locallyGenerated?: boolean, route?: (dst: string) => RouteGuess): Tracer
  /** What a person runs on the node to see `pattern` in its rules (checks turn it into a command with `nodeCommand`). */
  show(pattern: string): NodeRead
  /** What a person runs on the node to list one chain (of a trace step's table) with its policy, counters and numbers. */
  showChain(table: string, chain: string): NodeRead
}
