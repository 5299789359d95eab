import type {V1LabelSelector, V1ObjectMeta} from '@kubernetes/client-node'
import type {CustomResource} from './cluster-source.js'

/**
 * AdminNetworkPolicy and BaselineAdminNetworkPolicy (policy.networking.k8s.io/v1alpha1, cluster-scoped, from
 * kubernetes-sigs/network-policy-api), as far as the doctor reads them. The client library has no types for them: they
 * are custom resources.
 */
const V1ALPHA1 = {group: 'policy.networking.k8s.io', version: 'v1alpha1'}

/**
 * The two kinds as custom resources. A 403 is checked against discovery: a cluster without the CRD has none, and RBAC
 * refuses before it looks.
 */
export const ADMIN_POLICY_RESOURCES: Record<'AdminNetworkPolicy' | 'BaselineAdminNetworkPolicy', CustomResource> = {
  AdminNetworkPolicy: {
    kind: 'AdminNetworkPolicy',
    plural: 'adminnetworkpolicies',
    versions: [V1ALPHA1],
    refused: 'unless not discovered',
  },
  BaselineAdminNetworkPolicy: {
    kind: 'BaselineAdminNetworkPolicy',
    plural: 'baselineadminnetworkpolicies',
    versions: [V1ALPHA1],
    refused: 'unless not discovered',
  },
}

/** Pods of the namespaces namespaceSelector selects that podSelector selects (both empty: every Pod). */
interface NamespacedPodSelector {
  namespaceSelector?: V1LabelSelector
  podSelector?: V1LabelSelector
}

/** Exactly one of namespaces and pods. */
export interface AdminPolicySubject {
  namespaces?: V1LabelSelector
  pods?: NamespacedPodSelector
}

/** Exactly one field; egress peers also nodes, networks (CIDRs) and domainNames. */
export interface AdminPolicyPeer {
  namespaces?: V1LabelSelector
  pods?: NamespacedPodSelector
  nodes?: V1LabelSelector
  networks?: string[]
  domainNames?: string[]
}

/** Exactly one field; protocol defaults to TCP. */
export interface AdminPolicyPort {
  portNumber?: {protocol?: string; port: number}
  namedPort?: string
  portRange?: {protocol?: string; start: number; end: number}
}

/** One ingress (`from`) or egress (`to`) rule. ANP actions: Allow, Deny, Pass; the baseline's: Allow, Deny. */
export interface AdminPolicyRule {
  name?: string
  action: string
  from?: AdminPolicyPeer[]
  to?: AdminPolicyPeer[]
  ports?: AdminPolicyPort[]
}

export interface AdminNetworkPolicy {
  metadata?: V1ObjectMeta
  spec?: {
    /** 0–1000; a lower number is judged first. */
    priority?: number
    subject?: AdminPolicySubject
    ingress?: AdminPolicyRule[]
    egress?: AdminPolicyRule[]
  }
}

/** The cluster's one baseline: the API accepts only the name `default`. */
export interface BaselineAdminNetworkPolicy {
  metadata?: V1ObjectMeta
  spec?: {
    subject?: AdminPolicySubject
    ingress?: AdminPolicyRule[]
    egress?: AdminPolicyRule[]
  }
}
