import type {V1ContainerPort} from '@kubernetes/client-node'
import type {
  AdminNetworkPolicy,
  AdminPolicyPeer,
  AdminPolicyPort,
  AdminPolicyRule,
  AdminPolicySubject,
  BaselineAdminNetworkPolicy,
} from '../cluster/admin-policy-objects.js'
import {inCidr, parseCidr} from '../net/address.js'
import {
  and,
  any,
  namespaceLabelsOf,
  selectorMatches,
  sourcePeer,
  type Peer,
  type PolicyDestination,
  type PolicyPort,
  type PolicySource,
  type Tri,
} from './network-policy.js'

/**
 * The rules of AdminNetworkPolicies and of the BaselineAdminNetworkPolicy (policy.networking.k8s.io/v1alpha1) against
 * one connection after DNAT, three-valued as NetworkPolicies are: which rules take it. Their precedence is
 * policy-precedence.ts's.
 */
type Labels = Record<string, string>

/** One rule of an AdminNetworkPolicy (tier `admin`) or of the baseline, and whether it takes this connection. */
export interface AdminRuleMatch {
  tier: 'admin' | 'baseline'
  policy: AdminNetworkPolicy | BaselineAdminNetworkPolicy
  direction: 'ingress' | 'egress'
  /** 0-based index in spec.ingress / spec.egress: rules are judged in this order. */
  rule: number
  /** Allow, Deny or Pass (the baseline: Allow or Deny). */
  action: string
  /** The policy's subject takes the Pod, a peer the other end and a port the port. */
  matches: Tri
}

/**
 * The subject: Pods of the selected namespaces, or Pods both selectors select. Host-network Pods are never a subject;
 * a subject with neither field (the API refuses it) selects nothing.
 */
function subjectMatches(
  subject: AdminPolicySubject | undefined,
  pod: {namespace: string; labels: Labels | undefined; host: boolean},
  namespaceLabels: Record<string, Labels> | undefined,
): Tri {
  if (pod.host || !subject) return false
  const nsLabels = namespaceLabelsOf(namespaceLabels, pod.namespace)
  if (subject.namespaces) return selectorMatches(subject.namespaces, nsLabels)
  if (subject.pods)
    return and(
      selectorMatches(subject.pods.namespaceSelector ?? {}, nsLabels),
      selectorMatches(subject.pods.podSelector ?? {}, pod.labels),
    )
  return false
}

function networksMatch(cidrs: string[], ip: string | undefined): Tri {
  const parsed = cidrs.map(parseCidr)
  if (ip === undefined) return parsed.some((c) => c?.bits === 0) ? true : undefined
  return cidrs.some((c) => inCidr(c, ip))
}

/**
 * One peer against the other end. namespaces and pods take Pods (never host-network ones), networks addresses, nodes
 * a node's own addresses (never a Pod), domainNames names (never a connection judged by address). A peer with no field
 * this doctor knows is a newer API's: fail closed, as the API asks (an Allow takes nothing, a Deny or Pass everything).
 */
function peerMatches(
  p: AdminPolicyPeer,
  other: Peer,
  action: string,
  namespaceLabels: Record<string, Labels> | undefined,
): Tri {
  const inNamespace = (selector: Parameters<typeof selectorMatches>[0]): Tri =>
    other.namespace === undefined
      ? undefined
      : selectorMatches(selector, namespaceLabelsOf(namespaceLabels, other.namespace))
  if (p.namespaces) return other.host ? false : inNamespace(p.namespaces)
  if (p.pods)
    return other.host
      ? false
      : and(inNamespace(p.pods.namespaceSelector ?? {}), selectorMatches(p.pods.podSelector ?? {}, other.labels))
  if (p.networks) return networksMatch(p.networks, other.ip)
  // A node's labels are not read: whether a nodes selector takes a host source is unknown.
  if (p.nodes) return other.host ? undefined : false
  if (p.domainNames) return false
  return action !== 'Allow'
}

/** A rule's ports against the port after DNAT; a named port is the destination Pod's containerPort of that name. */
function portsMatch(
  ports: AdminPolicyPort[] | undefined,
  target: PolicyPort,
  destinationPorts: V1ContainerPort[],
  action: string,
): boolean {
  if (!ports || ports.length === 0) return true
  return ports.some((p) => {
    if (p.portNumber) return (p.portNumber.protocol ?? 'TCP') === target.protocol && p.portNumber.port === target.port
    if (p.portRange)
      return (
        (p.portRange.protocol ?? 'TCP') === target.protocol &&
        target.port >= p.portRange.start &&
        target.port <= p.portRange.end
      )
    if (p.namedPort !== undefined)
      return destinationPorts.some(
        (c) => c.name === p.namedPort && c.containerPort === target.port && (c.protocol ?? 'TCP') === target.protocol,
      )
    return action !== 'Allow'
  })
}

/** The peers of a rule in its direction: `from` for ingress, `to` for egress. */
function rulePeers(r: AdminPolicyRule, direction: 'ingress' | 'egress'): AdminPolicyPeer[] {
  return (direction === 'ingress' ? r.from : r.to) ?? []
}

/**
 * Every rule of one policy in one direction, in order, with whether it takes the connection: ingress at the endpoint
 * Pod (the subject) from the source, egress at the source Pod (the subject) to the endpoint.
 */
export function adminRuleMatches(
  tier: AdminRuleMatch['tier'],
  policy: AdminNetworkPolicy | BaselineAdminNetworkPolicy,
  direction: 'ingress' | 'egress',
  source: PolicySource,
  destination: PolicyDestination,
  target: PolicyPort,
  namespaceLabels: Record<string, Labels> | undefined,
): AdminRuleMatch[] {
  const from = sourcePeer(source)
  const subjectPod =
    direction === 'ingress'
      ? {namespace: destination.namespace, labels: destination.labels, host: false}
      : {namespace: from.namespace ?? '', labels: from.labels, host: from.host}
  const other: Peer =
    direction === 'ingress'
      ? from
      : {namespace: destination.namespace, labels: destination.labels, ip: destination.ip, host: false}
  const subject = subjectMatches(policy.spec?.subject, subjectPod, namespaceLabels)
  const rules = (direction === 'ingress' ? policy.spec?.ingress : policy.spec?.egress) ?? []
  return rules.map((r, rule) => ({
    tier,
    policy,
    direction,
    rule,
    action: r.action,
    matches: and(
      subject,
      and(
        any(rulePeers(r, direction).map((p) => peerMatches(p, other, r.action, namespaceLabels))),
        portsMatch(r.ports, target, destination.containerPorts, r.action),
      ),
    ),
  }))
}
