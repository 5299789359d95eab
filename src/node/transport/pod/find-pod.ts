import type {KubeConfig, V1Pod} from '@kubernetes/client-node'
import {ApiException, CoreV1Api} from '../../../vendor/client-node.js'
import {abortableBy} from '../../../kube/abortable.js'
import {KubeForbiddenError, KubeStreamError, KubeTimeoutError} from '../../../kube/errors.js'

/** Which Pods are kube-proxy's: the DaemonSet's namespace and label selector (configurable; kubeadm's by default). */
export interface PodSelector {
  namespace: string
  labelSelector: string
}

/** A Pod to exec into or port-forward to, and the container to use. */
export interface PodRef {
  namespace: string
  name: string
  container: string
  /** The container's image (the debug Pod reuses kube-proxy's: the node has it already). */
  image?: string
}

/** Why a node has no usable Pod: none scheduled there, or one that is not running. */
export type PodOnNode = {kind: 'found'; pod: PodRef} | {kind: 'none'; reason: string}

/**
 * Lists the selected Pods once (one API call, bounded by `timeoutMs`) and answers, per node, which of them runs there
 * (by spec.nodeName). A 403 is a KubeForbiddenError naming "list pods".
 */
export function podsByNode(
  kubeConfig: KubeConfig,
  selector: PodSelector,
  timeoutMs: number,
): (node: string) => Promise<PodOnNode> {
  let listing: Promise<V1Pod[]> | undefined
  return async (node) => {
    listing ??= listPods(kubeConfig, selector, timeoutMs)
    const pods = (await listing).filter((p) => p.spec?.nodeName === node)
    const where = `${selector.namespace} -l ${selector.labelSelector}`
    if (pods.length === 0) return {kind: 'none', reason: `no Pod of ${where} runs on ${node}`}
    const running = pods.find((p) => p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp)
    if (!running)
      return {
        kind: 'none',
        reason: `the Pod ${selector.namespace}/${pods[0].metadata?.name} on ${node} is ${pods[0].status?.phase ?? 'not running'}`,
      }
    const containers = running.spec?.containers ?? []
    const container = containers.find((c) => c.name === 'kube-proxy')?.name ?? containers[0]?.name
    if (!container)
      return {kind: 'none', reason: `the Pod ${selector.namespace}/${running.metadata?.name} has no container`}
    const image = containers.find((c) => c.name === container)?.image
    return {
      kind: 'found',
      pod: {namespace: selector.namespace, name: running.metadata?.name ?? '', container, ...(image ? {image} : {})},
    }
  }
}

/**
 * The image of kube-proxy's container, per node, for the debug Pod (so the node already has it): the selected Pod on
 * that node whatever its state (a crash-looping kube-proxy still has its image there), else the first Pod listed (the
 * DaemonSet's image). One list call, as podsByNode; a 403 is a KubeForbiddenError naming "list pods".
 */
export function kubeProxyImages(
  kubeConfig: KubeConfig,
  selector: PodSelector,
  timeoutMs: number,
): (node: string) => Promise<{image: string; where: string} | {reason: string}> {
  let listing: Promise<V1Pod[]> | undefined
  const imageOf = (p: V1Pod) => {
    const containers = p.spec?.containers ?? []
    return (containers.find((c) => c.name === 'kube-proxy') ?? containers[0])?.image
  }
  return async (node) => {
    listing ??= listPods(kubeConfig, selector, timeoutMs)
    const pods = (await listing).filter((p) => imageOf(p))
    const here = pods.find((p) => p.spec?.nodeName === node)
    if (here) return {image: imageOf(here)!, where: `kube-proxy's, from ${selector.namespace}/${here.metadata?.name}`}
    if (pods[0])
      return {
        image: imageOf(pods[0])!,
        where: `kube-proxy's, from ${selector.namespace}/${pods[0].metadata?.name} (none runs on ${node}: the image may be pulled)`,
      }
    return {
      reason: `no Pod of ${selector.namespace} -l ${selector.labelSelector} to take kube-proxy's image from: give one with --debug-image`,
    }
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
