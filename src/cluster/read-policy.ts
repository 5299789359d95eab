import type {V1EndpointSlice, V1NetworkPolicy, V1Pod} from '@kubernetes/client-node'
import {DiagnosisError} from '../errors.js'
import {
  ADMIN_POLICY_RESOURCES,
  type AdminNetworkPolicy,
  type BaselineAdminNetworkPolicy,
} from './admin-policy-objects.js'
import type {ClusterSource} from './cluster-source.js'
import type {AdminPolicyState, PolicyClients, PolicyState} from './types.js'

export interface PolicyReadInputs {
  /** The Service's namespace and its Pods (already read). */
  namespace: string
  pods: V1Pod[]
  /** kube-system's Pods when they were read (the DNS Pods are among them), and the DNS Service's EndpointSlices. */
  systemPods: V1Pod[] | undefined
  dnsSlices: V1EndpointSlice[]
}

/**
 * The NetworkPolicies of the Service's namespace and of its clients', the Namespaces' labels and the client Pod. A
 * policy list the API refuses (RBAC) or does not serve, or a bundle without them, is a gap the report names, never an
 * error; a --from Pod that does not exist is the user's error.
 */
export async function readPolicyState(
  source: ClusterSource,
  clients: PolicyClients,
  inputs: PolicyReadInputs,
): Promise<PolicyState> {
  const namespaces = [
    ...new Set([inputs.namespace, clients.pod?.namespace, clients.namespace].filter((n): n is string => !!n)),
  ]
  const clientPod = clients.pod ? await readClientPod(source, clients.pod, inputs) : undefined
  const dnsNames = new Set(
    inputs.dnsSlices.flatMap((s) => (s.endpoints ?? []).map((e) => e.targetRef?.name).filter((n) => n !== undefined)),
  )
  const dnsPods = (inputs.systemPods ?? []).filter((p) => dnsNames.has(p.metadata?.name ?? ''))
  const admin = await readAdminPolicies(source)
  const base = {clients, namespaces, dnsPods, ...(clientPod ? {clientPod} : {}), admin}
  let policies: V1NetworkPolicy[] = []
  try {
    for (const ns of namespaces) {
      const list = await source.listNetworkPolicies(ns)
      if (list === undefined)
        return {
          ...base,
          policies: [],
          unread: {reason: `NetworkPolicies are not served or not recorded (${source.describe()})`, required: false},
        }
      policies = policies.concat(list)
    }
  } catch (e) {
    return {...base, policies: [], unread: {reason: (e as Error).message, required: true}}
  }
  // Namespace labels matter only to a namespaceSelector: no policy with one, no request.
  const selectsNamespaces =
    admin.anps.length > 0 ||
    admin.banp !== undefined ||
    policies.some((p) => JSON.stringify(p.spec ?? {}).includes('"namespaceSelector"'))
  if (!selectsNamespaces) return {...base, policies}
  try {
    const list = await source.listNamespaces()
    if (list === undefined)
      return {...base, policies, namespacesUnread: `Namespaces not recorded (${source.describe()})`}
    const namespaceLabels: Record<string, Record<string, string>> = {}
    for (const n of list) {
      const name = n.metadata?.name ?? ''
      // The API server sets this label on every Namespace (v1.21+); an older object lacks it, a selector still means it.
      namespaceLabels[name] = {'kubernetes.io/metadata.name': name, ...(n.metadata?.labels ?? {})}
    }
    return {...base, policies, namespaceLabels}
  } catch (e) {
    return {...base, policies, namespacesUnread: (e as Error).message}
  }
}

/**
 * Both kinds, cluster-scoped. None where the group is not served; a refusal or a bundle without them is said, and
 * makes every verdict they could change unsure (never "allowed" on a guess).
 */
async function readAdminPolicies(source: ClusterSource): Promise<AdminPolicyState> {
  try {
    const anps = await source.listCustomObjects(ADMIN_POLICY_RESOURCES.AdminNetworkPolicy)
    const banps = await source.listCustomObjects(ADMIN_POLICY_RESOURCES.BaselineAdminNetworkPolicy)
    if (anps === 'not-recorded' || banps === 'not-recorded')
      return {
        anps: [],
        unread: {reason: `AdminNetworkPolicies not recorded (${source.describe()})`, required: false},
      }
    // Not served: no CRD installed, none.
    const banp = (banps === 'not-served' ? [] : (banps as BaselineAdminNetworkPolicy[])).find(
      (b) => b.metadata?.name === 'default',
    )
    return {anps: anps === 'not-served' ? [] : (anps as AdminNetworkPolicy[]), ...(banp ? {banp} : {})}
  } catch (e) {
    // The API client's ApiException by its code, not its class: a snapshot run must not load the client.
    const forbidden = ((e as Error).cause as {code?: unknown} | undefined)?.code === 403
    return {
      anps: [],
      unread: {
        reason: `AdminNetworkPolicies not read${forbidden ? ' (forbidden)' : ''}: ${(e as Error).message}`,
        required: true,
      },
    }
  }
}

async function readClientPod(
  source: ClusterSource,
  pod: {namespace: string; name: string},
  inputs: PolicyReadInputs,
): Promise<V1Pod> {
  const pods =
    pod.namespace === inputs.namespace
      ? inputs.pods
      : pod.namespace === 'kube-system' && inputs.systemPods
        ? inputs.systemPods
        : await source.listPods(pod.namespace)
  const found = pods.find((p) => p.metadata?.name === pod.name)
  if (!found) throw new DiagnosisError(`--from: Pod "${pod.namespace}/${pod.name}" not found (${source.describe()})`)
  return found
}
