import type {KubeConfig, V1DaemonSet, V1Pod} from '@kubernetes/client-node'
import {ApiException, AppsV1Api, CoreV1Api} from '../../../vendor/client-node.js'
import {abortableBy} from '../../../kube/abortable.js'
import {KubeForbiddenError, KubeStreamError, KubeTimeoutError} from '../../../kube/errors.js'

/** Which Pods are kube-proxy's: the DaemonSet's namespace and label selector (configurable; kubeadm's by default). */
export interface PodSelector {
  namespace: string
  labelSelector: string
  /** The container to exec into where the Pod has several (default: kube-proxy's, else the first). */
  container?: string
  /** Whose Pods these are, in the report's words (default "kube-proxy's"). */
  whose?: string
}

/** A Pod to exec into or port-forward to, and the container to use. */
export interface PodRef {
  namespace: string
  name: string
  container: string
  /** The container's image. */
  image?: string
}

/** Why a node has no usable Pod: none scheduled there, or one that is not running. */
export type PodOnNode = {kind: 'found'; pod: PodRef} | {kind: 'none'; reason: string}

/** The selected Pods and, of the DaemonSets their controller references name, those that exist with that uid. */
interface KubeProxyPods {
  pods: V1Pod[]
  /** By name: a DaemonSet of the selector's namespace that a Pod names as its controller, with the same uid. */
  daemonSets: Map<string, V1DaemonSet>
}

/** The DaemonSet a Pod names as its controller (apps/v1), if any. */
function controllerDaemonSet(p: V1Pod): {name: string; uid: string} | undefined {
  const ref = (p.metadata?.ownerReferences ?? []).find((r) => r?.controller === true)
  return ref?.kind === 'DaemonSet' && ref.apiVersion === 'apps/v1' && typeof ref.name === 'string'
    ? {name: ref.name, uid: String(ref.uid)}
    : undefined
}

/** The DaemonSet of `all` that owns `p` (the one its controller reference names, with the same uid), if any. */
function ownerOf(all: KubeProxyPods, p: V1Pod): V1DaemonSet | undefined {
  const ref = controllerDaemonSet(p)
  const ds = ref && all.daemonSets.get(ref.name)
  return ds && ds.metadata?.uid === ref.uid ? ds : undefined
}

const containerOf = (containers: Array<{name: string; image?: string}>, name = 'kube-proxy') =>
  containers.find((c) => c.name === name) ?? containers[0]

/**
 * Lists the selected Pods once, then reads each DaemonSet they name as controller (one get each): anyone who can
 * create a Pod can label it `k8s-app=kube-proxy`, but only a DaemonSet of kube-proxy's namespace is kube-proxy's.
 */
function kubeProxyPods(kubeConfig: KubeConfig, selector: PodSelector, timeoutMs: number): () => Promise<KubeProxyPods> {
  let listing: Promise<KubeProxyPods> | undefined
  return () =>
    (listing ??= (async () => {
      const pods = await listPods(kubeConfig, selector, timeoutMs)
      const names = new Set(pods.flatMap((p) => controllerDaemonSet(p)?.name ?? []))
      const daemonSets = new Map<string, V1DaemonSet>()
      for (const name of names) {
        const ds = await readDaemonSet(kubeConfig, selector.namespace, name, timeoutMs)
        if (ds) daemonSets.set(name, ds)
      }
      return {pods, daemonSets}
    })())
}

/**
 * Per node, the Pod that is kube-proxy's (or the selector's agent's) to exec into: running on that node, on the host's
 * network, owned by a DaemonSet of the selector's namespace. One list call and one get per DaemonSet (bounded by `timeoutMs`); a 403 is a
 * KubeForbiddenError naming "list pods" or "get daemonsets".
 */
export function podsByNode(
  kubeConfig: KubeConfig,
  selector: PodSelector,
  timeoutMs: number,
): (node: string) => Promise<PodOnNode> {
  const read = kubeProxyPods(kubeConfig, selector, timeoutMs)
  return async (node) => {
    const all = await read()
    const pods = all.pods.filter((p) => p.spec?.nodeName === node)
    const where = `${selector.namespace} -l ${selector.labelSelector}`
    if (pods.length === 0) return {kind: 'none', reason: `no Pod of ${where} runs on ${node}`}
    const owned = pods.filter((p) => ownerOf(all, p))
    const named = (p: V1Pod) => `the Pod ${selector.namespace}/${p.metadata?.name} on ${node}`
    if (owned.length === 0)
      return {
        kind: 'none',
        reason: `${named(pods[0])} is not owned by a DaemonSet of ${selector.namespace}: not exec'd into as ${selector.whose ?? "kube-proxy's"}`,
      }
    const running = owned.find((p) => p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp)
    if (!running) return {kind: 'none', reason: `${named(owned[0])} is ${owned[0].status?.phase ?? 'not running'}`}
    if (running.spec?.hostNetwork !== true)
      return {
        kind: 'none',
        reason: `${named(running)} does not use the node's network: it does not see the node's rules`,
      }
    const container = containerOf(running.spec?.containers ?? [], selector.container)
    if (!container) return {kind: 'none', reason: `${named(running)} has no container`}
    return {
      kind: 'found',
      pod: {
        namespace: selector.namespace,
        name: running.metadata?.name ?? '',
        container: container.name,
        ...(container.image ? {image: container.image} : {}),
      },
    }
  }
}

const DIGEST = /@(sha256:[0-9a-f]{64})$/

/**
 * The image for the debug Pods: kube-proxy's DaemonSet's (its Pod template's kube-proxy container), pinned by the
 * digest a running Pod of that DaemonSet reports (status imageID), so the node runs what kube-proxy runs and nothing a
 * Pod's creator chose. One list, one get per DaemonSet; a reason (give --debug-image) when there is no such DaemonSet
 * or digest.
 */
export function kubeProxyImage(
  kubeConfig: KubeConfig,
  selector: PodSelector,
  timeoutMs: number,
): () => Promise<{image: string; where: string} | {reason: string}> {
  const read = kubeProxyPods(kubeConfig, selector, timeoutMs)
  return async () => {
    const all = await read()
    const where = `${selector.namespace} -l ${selector.labelSelector}`
    const owned = all.pods.filter((p) => ownerOf(all, p))
    const ds = owned.length > 0 ? ownerOf(all, owned[0]) : undefined
    if (!ds)
      return {
        reason: `no Pod of ${where} is owned by a DaemonSet of ${selector.namespace} to take kube-proxy's image from: give one with --debug-image`,
      }
    const dsName = `DaemonSet ${selector.namespace}/${ds.metadata?.name}`
    const container = containerOf(ds.spec?.template?.spec?.containers ?? [])
    const image = container?.image
    if (!container || !image) return {reason: `kube-proxy's ${dsName} names no image: give one with --debug-image`}
    if (DIGEST.test(image)) return {image, where: `kube-proxy's ${dsName}`}
    for (const p of owned) {
      if (ownerOf(all, p) !== ds || p.status?.phase !== 'Running') continue
      const spec = containerOf(p.spec?.containers ?? [])
      const status = (p.status?.containerStatuses ?? []).find((c) => c.name === spec?.name)
      const digest = spec?.image === image ? DIGEST.exec(status?.imageID ?? '')?.[1] : undefined
      if (digest)
        return {
          image: `${image}@${digest}`,
          where: `kube-proxy's ${dsName}, digest from its running Pod ${selector.namespace}/${p.metadata?.name}`,
        }
    }
    return {
      reason: `no running Pod of kube-proxy's ${dsName} reports the digest of ${image}: give an image with --debug-image`,
    }
  }
}

async function readDaemonSet(
  kubeConfig: KubeConfig,
  namespace: string,
  name: string,
  timeoutMs: number,
): Promise<V1DaemonSet | undefined> {
  const deadline = new AbortController()
  const timer = setTimeout(() => deadline.abort(), timeoutMs)
  const what = `get daemonset ${namespace}/${name}`
  try {
    const apps = kubeConfig.makeApiClient(AppsV1Api)
    return await apps.readNamespacedDaemonSet({namespace, name}, abortableBy(deadline.signal))
  } catch (e) {
    if (deadline.signal.aborted) throw new KubeTimeoutError(what, timeoutMs, {cause: e})
    if (e instanceof ApiException && e.code === 404) return undefined
    if (e instanceof ApiException && e.code === 403)
      throw new KubeForbiddenError('get', 'daemonsets', namespace, String(e.body ?? ''), {cause: e})
    if (e instanceof ApiException)
      throw new KubeStreamError(`${what} failed with HTTP ${e.code}`, {httpStatus: e.code, cause: e})
    throw new KubeStreamError(`${what} failed: ${(e as Error).message}`, {cause: e})
  } finally {
    clearTimeout(timer)
  }
}

async function listPods(kubeConfig: KubeConfig, selector: PodSelector, timeoutMs: number): Promise<V1Pod[]> {
  const deadline = new AbortController()
  const timer = setTimeout(() => deadline.abort(), timeoutMs)
  const what = `list pods in ${selector.namespace} -l ${selector.labelSelector}`
  try {
    const core = kubeConfig.makeApiClient(CoreV1Api)
    return (
      await core.listNamespacedPod(
        {namespace: selector.namespace, labelSelector: selector.labelSelector},
        abortableBy(deadline.signal),
      )
    ).items
  } catch (e) {
    if (deadline.signal.aborted) throw new KubeTimeoutError(what, timeoutMs, {cause: e})
    if (e instanceof ApiException && e.code === 403)
      throw new KubeForbiddenError('list', 'pods', selector.namespace, String(e.body ?? ''), {cause: e})
    if (e instanceof ApiException)
      throw new KubeStreamError(`${what} failed with HTTP ${e.code}`, {httpStatus: e.code, cause: e})
    throw new KubeStreamError(`${what} failed: ${(e as Error).message}`, {cause: e})
  } finally {
    clearTimeout(timer)
  }
}
