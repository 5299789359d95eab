import type {
  V1ContainerPort,
  V1LabelSelector,
  V1NetworkPolicy,
  V1NetworkPolicyIngressRule,
  V1NetworkPolicyPeer,
  V1NetworkPolicyPort,
} from '@kubernetes/client-node'
import {inCidr, parseCidr} from '../net/address.js'

/**
 * NetworkPolicy (networking.k8s.io/v1) as the API defines it, judged statically for one connection after DNAT: from a
 * source to an endpoint Pod's IP and port. Three-valued: `true` allowed, `false` denied, `undefined` it depends on
 * what is not known of the source (the labels and IP of "any Pod of a namespace").
 */
export type Tri = boolean | undefined

export const and = (a: Tri, b: Tri): Tri =>
  a === false || b === false ? false : a === true && b === true ? true : undefined
const or = (a: Tri, b: Tri): Tri => (a === true || b === true ? true : a === false && b === false ? false : undefined)
const not = (a: Tri): Tri => (a === undefined ? undefined : !a)
export const any = (xs: Tri[]): Tri => xs.reduce<Tri>(or, false)
const all = (xs: Tri[]): Tri => xs.reduce<Tri>(and, true)

type Labels = Record<string, string>

/** Where a connection comes from. */
export type PolicySource =
  /** One Pod (`--from`); a host-network Pod is judged as its node's address. */
  | {kind: 'pod'; namespace: string; name: string; ip?: string; labels: Labels; hostNetwork: boolean}
  /** Any Pod of a namespace (labels and IP unknown). */
  | {kind: 'namespace'; namespace: string}
  /** A node's own network namespace (host-network Pods, kubelet, NodePort traffic SNATed to the node). */
  | {kind: 'host'; node: string; ip?: string}

/** The endpoint Pod a Service's packet is DNATed to. */
export interface PolicyDestination {
  namespace: string
  name: string
  ip: string
  labels: Labels
  /** Its containers' ports: a named port in a policy is resolved against them. */
  containerPorts: V1ContainerPort[]
}

/** The port after DNAT (the targetPort, resolved) and its protocol. */
export interface PolicyPort {
  port: number
  protocol: string
}

/** One rule of a policy (its index in spec.ingress or spec.egress) and what it decides for this connection. */
export interface RuleMatch {
  policy: V1NetworkPolicy
  /** 0-based index in spec.ingress / spec.egress. */
  rule: number
  /** Its peers take the source (ingress) or the destination (egress). */
  peers: Tri
  /** Its ports take the port. */
  ports: boolean
}

export interface DirectionVerdict {
  direction: 'ingress' | 'egress'
  /** Allowed in this direction: true, false, or it depends on what is not known of the source. */
  allowed: Tri
  /** The policies of this direction that select the Pod (`selected` undefined: they may). */
  selecting: Array<{policy: V1NetworkPolicy; selected: Tri}>
  /** Every rule of the selecting policies, with what it decides. */
  rules: RuleMatch[]
  /** Not judged by policy at all, and why (a host-network source's egress). */
  notApplicable?: string
}

export const policyName = (p: V1NetworkPolicy) => `${p.metadata?.namespace ?? ''}/${p.metadata?.name ?? ''}`

/** spec.policyTypes, defaulted as the API server does: Ingress always, Egress when there are egress rules. */
export function policyTypes(p: V1NetworkPolicy): string[] {
  const given = p.spec?.policyTypes
  if (given && given.length > 0) return given
  return ['Ingress', ...((p.spec?.egress ?? []).length > 0 ? ['Egress'] : [])]
}

/** A label selector against labels; unknown labels (undefined) match only the empty selector. */
export function selectorMatches(selector: V1LabelSelector, labels: Labels | undefined): Tri {
  const requirements = [
    ...Object.entries(selector.matchLabels ?? {}).map(([key, value]) => ({key, operator: 'In', values: [value]})),
    ...(selector.matchExpressions ?? []),
  ]
  if (requirements.length === 0) return true
  if (labels === undefined) return undefined
  return requirements.every((r) => {
    const has = Object.prototype.hasOwnProperty.call(labels, r.key)
    switch (r.operator) {
      case 'In':
        return has && (r.values ?? []).includes(labels[r.key])
      case 'NotIn':
        return !has || !(r.values ?? []).includes(labels[r.key])
      case 'Exists':
        return has
      case 'DoesNotExist':
        return !has
      default:
        // The API server rejects any other operator; a selector it would reject selects nothing.
        return false
    }
  })
}

/** What is known of the other end of a rule: namespace and labels (undefined: unknown), IP, or a node. */
export interface Peer {
  namespace?: string
  labels?: Labels
  ip?: string
  /** Host network: only an ipBlock can take it. */
  host: boolean
}

export function sourcePeer(s: PolicySource): Peer {
  if (s.kind === 'host') return {ip: s.ip, host: true}
  if (s.kind === 'namespace') return {namespace: s.namespace, host: false}
  return s.hostNetwork ? {ip: s.ip, host: true} : {namespace: s.namespace, labels: s.labels, ip: s.ip, host: false}
}

/** A Namespace's labels for a namespaceSelector; undefined when the Namespaces were not read. */
export function namespaceLabelsOf(
  namespaceLabels: Record<string, Labels> | undefined,
  namespace: string,
): Labels | undefined {
  return namespaceLabels ? (namespaceLabels[namespace] ?? {'kubernetes.io/metadata.name': namespace}) : undefined
}

function ipBlockMatches(block: {cidr: string; except?: string[]}, ip: string | undefined): Tri {
  const cidr = parseCidr(block.cidr)
  if (!cidr) return false
  if (ip === undefined) return cidr.bits === 0 && (block.except ?? []).length === 0 ? true : undefined
  if (!inCidr(block.cidr, ip)) return false
  return !(block.except ?? []).some((e) => inCidr(e, ip))
}

/**
 * One peer of a rule, in the policy's namespace: an ipBlock takes addresses; podSelector alone takes the policy
 * namespace's Pods, namespaceSelector alone every Pod of the namespaces it selects, both together the Pods they both
 * select (AND). Host-network traffic is taken by ipBlock only.
 */
function peerMatches(
  p: V1NetworkPolicyPeer,
  policyNamespace: string,
  peer: Peer,
  namespaceLabels: Record<string, Labels> | undefined,
): Tri {
  if (p.ipBlock) return ipBlockMatches(p.ipBlock, peer.ip)
  if (peer.host) return false
  const inNamespace: Tri = p.namespaceSelector
    ? peer.namespace === undefined
      ? undefined
      : selectorMatches(p.namespaceSelector, namespaceLabelsOf(namespaceLabels, peer.namespace))
    : peer.namespace === undefined
      ? undefined
      : peer.namespace === policyNamespace
  const pod: Tri = p.podSelector ? selectorMatches(p.podSelector, peer.labels) : true
  return and(inNamespace, pod)
}

/** A rule's ports against the port after DNAT; a named port is the destination Pod's containerPort of that name. */
export function portsMatch(
  ports: V1NetworkPolicyPort[] | undefined,
  target: PolicyPort,
  destinationPorts: V1ContainerPort[],
): boolean {
  if (!ports || ports.length === 0) return true
  return ports.some((p) => portMatches(p, target, destinationPorts))
}

function portMatches(p: V1NetworkPolicyPort, target: PolicyPort, destinationPorts: V1ContainerPort[]): boolean {
  if ((p.protocol ?? 'TCP') !== target.protocol) return false
  if (p.port === undefined || p.port === null) return true
  if (typeof p.port === 'number' || /^\d+$/.test(String(p.port))) {
    const from = Number(p.port)
    return p.endPort !== undefined ? target.port >= from && target.port <= p.endPort : target.port === from
  }
  return destinationPorts.some(
    (c) => c.name === p.port && c.containerPort === target.port && (c.protocol ?? 'TCP') === target.protocol,
  )
}

export interface PolicyWorld {
  policies: V1NetworkPolicy[]
  /** Each Namespace's labels; undefined when not read (a namespaceSelector then decides nothing). */
  namespaceLabels?: Record<string, Labels>
}

/**
 * An ingress rule's peers: the client library names the field `_from` (a word of its language); objects as kubectl and
 * the API write them (a bundle made by hand) name it `from`.
 */
export function ingressPeers(r: V1NetworkPolicyIngressRule): V1NetworkPolicyPeer[] {
  return r._from ?? (r as {from?: V1NetworkPolicyPeer[]}).from ?? []
}

/** The ingress side: the policies selecting the endpoint Pod, and whether any of their rules takes the source. */
export function judgeIngress(
  world: PolicyWorld,
  source: PolicySource,
  destination: PolicyDestination,
  target: PolicyPort,
): DirectionVerdict {
  const selecting = world.policies
    .filter((p) => p.metadata?.namespace === destination.namespace && policyTypes(p).includes('Ingress'))
    .map((policy) => ({policy, selected: selectorMatches(policy.spec?.podSelector ?? {}, destination.labels)}))
    .filter((s) => s.selected !== false)
  const peer = sourcePeer(source)
  const rules = selecting.flatMap(({policy}) =>
    (policy.spec?.ingress ?? []).map((r, rule): RuleMatch => ({
      policy,
      rule,
      peers:
        ingressPeers(r).length === 0
          ? true
          : any(ingressPeers(r).map((f) => peerMatches(f, destination.namespace, peer, world.namespaceLabels))),
      ports: portsMatch(r.ports, target, destination.containerPorts),
    })),
  )
  return {direction: 'ingress', selecting, rules, allowed: allowedBy(selecting, rules)}
}

/** The egress side: the policies selecting the source Pod, and whether any of their rules takes the endpoint. */
export function judgeEgress(
  world: PolicyWorld,
  source: PolicySource,
  destination: PolicyDestination,
  target: PolicyPort,
): DirectionVerdict {
  if (source.kind === 'host' || (source.kind === 'pod' && source.hostNetwork))
    return {
      direction: 'egress',
      allowed: true,
      selecting: [],
      rules: [],
      notApplicable: 'NetworkPolicy does not apply to host-network traffic leaving a node',
    }
  const labels = source.kind === 'pod' ? source.labels : undefined
  const selecting = world.policies
    .filter((p) => p.metadata?.namespace === source.namespace && policyTypes(p).includes('Egress'))
    .map((policy) => ({policy, selected: selectorMatches(policy.spec?.podSelector ?? {}, labels)}))
    .filter((s) => s.selected !== false)
  const peer: Peer = {namespace: destination.namespace, labels: destination.labels, ip: destination.ip, host: false}
  const rules = selecting.flatMap(({policy}) =>
    (policy.spec?.egress ?? []).map((r, rule): RuleMatch => ({
      policy,
      rule,
      peers:
        (r.to ?? []).length === 0
          ? true
          : any((r.to ?? []).map((t) => peerMatches(t, source.namespace, peer, world.namespaceLabels))),
      ports: portsMatch(r.ports, target, destination.containerPorts),
    })),
  )
  return {direction: 'egress', selecting, rules, allowed: allowedBy(selecting, rules)}
}

/**
 * No selecting policy: allowed. Else the union of the selecting policies' rules: allowed when one rule of a policy that
 * selects the Pod takes the peer and the port. With a policy that only may select (unknown labels) it may depend.
 */
function allowedBy(selecting: DirectionVerdict['selecting'], rules: RuleMatch[]): Tri {
  const noneSelects = all(selecting.map((s) => not(s.selected)))
  const someAllows = any(
    selecting.map((s) =>
      and(s.selected, any(rules.filter((r) => r.policy === s.policy).map((r) => and(r.peers, r.ports)))),
    ),
  )
  return or(noneSelects, someAllows)
}
