import type {KubeConfig, V1Pod} from '@kubernetes/client-node'
import {ApiException, CoreV1Api} from '../../../vendor/client-node.js'
import {HOST_ROOT} from '../../node-commands.js'
import {trackUntilExit, untrack as untrackOnExit} from '../../../util/ending-signals.js'
import {LEFTOVER_CLEANUP, MANAGED_BY, MANAGED_BY_LABEL, RUN_LABEL} from './debug-pod-labels.js'
import {abortableBy} from '../../../kube/abortable.js'
import type {PodRef} from './find-pod.js'
import {KubeForbiddenError, KubeStreamError, KubeTimeoutError} from '../../../kube/errors.js'

const CONTAINER = 'debug'

/** Container states that will not turn into a running container by waiting. */
const STUCK =
  /^(ErrImagePull|ImagePullBackOff|InvalidImageName|ErrImageNeverPull|CreateContainerError|CreateContainerConfigError|RunContainerError|CrashLoopBackOff)$/

export interface DebugPodSettings {
  namespace: string
  /** This run's id (the `kproxy-doctor/run` label and part of each Pod's name). */
  runId: string
  /** kubectl with the user's --kubeconfig/--context, for the command that removes a Pod left behind. */
  kubectl: string[]
}

/** `kproxy-doctor-RUN-NODE`: known before the create call, so a Pod whose creation was cut short can still be deleted. */
function debugPodName(runId: string, node: string): string {
  return `kproxy-doctor-${runId}-${node.slice(0, 40)}`.replace(/[-.]+$/, '')
}

/**
 * What the debug Pod's reads need, and no more. NET_ADMIN: iptables-save, nft list, ipvsadm and conntrack -L read the
 * kernel's tables (netlink, getsockopt); NET_RAW: the legacy iptables-save opens a raw socket to read them;
 * SYS_CHROOT: a program the image lacks runs as the node's own, `chroot /host PROGRAM`, which is also why the node's
 * root is mounted (read-only: nothing is written). Not privileged, no other capability, no hostPID (no read looks at
 * the node's processes), no privilege escalation, its own root filesystem read-only.
 */
export const DEBUG_POD_CAPABILITIES = ['NET_ADMIN', 'NET_RAW', 'SYS_CHROOT']

/** What the Pod may take of the node: the reads are a few programs printing text (nft holds a ruleset in memory). */
export const DEBUG_POD_RESOURCES = {
  requests: {cpu: '50m', memory: '64Mi'},
  limits: {cpu: '1', memory: '512Mi'},
}

/**
 * The debug Pod for one node: pinned to it (spec.nodeName, no scheduler), in its network namespace, with the
 * capabilities its reads need (DEBUG_POD_CAPABILITIES), tolerating every taint, the node's root filesystem read-only
 * at HOST_ROOT, resources bounded. Its container only waits (`cat` on an open stdin: kube-proxy's image has cat and
 * no shell or sleep); the doctor execs the reads into it. The image is pulled only if the node lacks it;
 * activeDeadlineSeconds stops the container should the Pod outlive the run.
 */
export function debugPodSpec(settings: DebugPodSettings, node: string, image: string, timeoutMs: number): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: debugPodName(settings.runId, node),
      namespace: settings.namespace,
      labels: {[MANAGED_BY_LABEL]: MANAGED_BY, [RUN_LABEL]: settings.runId},
      annotations: {
        'kproxy-doctor/node': node,
        'kproxy-doctor/purpose': 'read-only diagnosis of kube-proxy rules; deleted when the node has been read',
      },
    },
    spec: {
      nodeName: node,
      hostNetwork: true,
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 1,
      activeDeadlineSeconds: Math.min(Math.ceil((10 * timeoutMs) / 1000) + 60, MAX_ACTIVE_DEADLINE_S),
      tolerations: [{operator: 'Exists'}],
      containers: [
        {
          name: CONTAINER,
          image,
          imagePullPolicy: 'IfNotPresent',
          command: ['cat'],
          stdin: true,
          securityContext: {
            privileged: false,
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            capabilities: {drop: ['ALL'], add: DEBUG_POD_CAPABILITIES},
          },
          resources: DEBUG_POD_RESOURCES,
          volumeMounts: [{name: 'host-root', mountPath: HOST_ROOT, readOnly: true}],
        },
      ],
      volumes: [{name: 'host-root', hostPath: {path: '/', type: 'Directory'}}],
    },
  }
}

/**
 * The longest a debug Pod may live, whatever --timeout: a run that dies without deleting it (killed, a crash) leaves a
 * debug Pod on the node for at most this long.
 */
const MAX_ACTIVE_DEADLINE_S = 900

/** Single-quotes a word for a POSIX shell when it is not plain (a kubeconfig path with spaces). */
function shellWord(word: string): string {
  return /^[A-Za-z0-9_./:@%+=,-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`
}

/** Each debug Pod not yet deleted is tracked: an ending signal deletes it before the process exits (util/ending-signals). */
function track(name: string, remove: () => Promise<string | undefined>): void {
  trackUntilExit(`debug-pod/${name}`, {kind: 'debug Pod', remove, leftover: LEFTOVER_CLEANUP})
}

function untrack(name: string): void {
  untrackOnExit(`debug-pod/${name}`)
}

/** Calls the API with a deadline; a 403 is a KubeForbiddenError for `verb pods`, other failures a KubeStreamError. */
async function bounded<T>(
  what: string,
  verb: string,
  namespace: string,
  timeoutMs: number,
  call: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const deadline = new AbortController()
  const timer = setTimeout(() => deadline.abort(), timeoutMs)
  try {
    return await call(deadline.signal)
  } catch (e) {
    if (deadline.signal.aborted) throw new KubeTimeoutError(what, timeoutMs, {cause: e})
    if (e instanceof ApiException && e.code === 403)
      throw new KubeForbiddenError(
        verb,
        'pods',
        namespace,
        typeof e.body === 'string' ? e.body : JSON.stringify(e.body ?? ''),
        {cause: e},
      )
    if (e instanceof ApiException)
      throw new KubeStreamError(`${what} failed with HTTP ${e.code}${statusMessage(e.body)}`, {
        httpStatus: e.code,
        cause: e,
      })
    throw new KubeStreamError(`${what} failed: ${(e as Error).message}`, {cause: e})
  } finally {
    clearTimeout(timer)
  }
}

function statusMessage(body: unknown): string {
  try {
    const message = (
      typeof body === 'string' ? (JSON.parse(body) as {message?: string}) : (body as {message?: string} | undefined)
    )?.message
    return message ? `: ${message}` : ''
  } catch {
    return ''
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Creates, waits for and deletes this run's debug Pods. Every Pod is tracked from before its create call until it is
 * gone: Ctrl-C, SIGTERM, SIGHUP or SIGQUIT deletes the tracked ones, each within the timeout, before the process exits.
 */
export class DebugPods {
  private readonly core: CoreV1Api

  constructor(
    kubeConfig: KubeConfig,
    private readonly settings: DebugPodSettings,
    private readonly timeoutMs: number,
  ) {
    this.core = kubeConfig.makeApiClient(CoreV1Api)
  }

  /**
   * Creates the node's debug Pod and waits until its container runs (within the timeout). On any failure the Pod is
   * deleted and the error thrown names why (a 403 is a KubeForbiddenError for "create pods"); its `leftover` is the
   * line to print when that deletion failed.
   */
  async start(node: string, image: string): Promise<PodRef> {
    const pod = debugPodSpec(this.settings, node, image, this.timeoutMs)
    const {namespace} = this.settings
    const name = pod.metadata!.name!
    const ref: PodRef = {namespace, name, container: CONTAINER, image}
    const create = bounded(`create pod ${namespace}/${name}`, 'create', namespace, this.timeoutMs, (signal) =>
      this.core.createNamespacedPod({namespace, body: pod}, abortableBy(signal)),
    )
    create.catch(() => undefined)
    track(name, async () => {
      await create.catch(() => undefined)
      return this.remove(ref, node)
    })
    try {
      await create
    } catch (e) {
      // Refused (403, 422…): nothing was made. Cut short: it may exist, so it is deleted like any other.
      if (!(e instanceof KubeTimeoutError)) untrack(name)
      else Object.assign(e, {leftover: await this.remove(ref, node)})
      throw e
    }
    try {
      await this.waitRunning(ref)
    } catch (e) {
      const leftover = await this.remove(ref, node)
      throw Object.assign(new KubeStreamError((e as Error).message, {cause: e}), {leftover})
    }
    return ref
  }

  private async waitRunning(ref: PodRef): Promise<void> {
    const startedAt = Date.now()
    let last = 'Pending'
    for (let pause = 100; ; pause = Math.min(1000, pause * 2)) {
      const left = this.timeoutMs - (Date.now() - startedAt)
      if (left <= 0) break
      let pod: V1Pod
      try {
        pod = await bounded(`get pod ${ref.namespace}/${ref.name}`, 'get', ref.namespace, left, (signal) =>
          this.core.readNamespacedPod({namespace: ref.namespace, name: ref.name}, abortableBy(signal)),
        )
      } catch (e) {
        // A get cut by what was left of the wait is the wait running out, not a hung API server.
        if (e instanceof KubeTimeoutError && Date.now() - startedAt >= this.timeoutMs) break
        throw e
      }
      const state = pod.status?.containerStatuses?.find((c) => c.name === CONTAINER)?.state
      if (pod.status?.phase === 'Running' && state?.running) return
      const waiting = state?.waiting?.reason
      if (waiting && STUCK.test(waiting))
        throw new KubeStreamError(
          `the debug Pod ${ref.namespace}/${ref.name} cannot start: ${waiting}${state?.waiting?.message ? ` (${state.waiting.message})` : ''}`,
        )
      if (pod.status?.phase === 'Failed' || pod.status?.phase === 'Succeeded' || state?.terminated)
        throw new KubeStreamError(
          `the debug Pod ${ref.namespace}/${ref.name} ended before it was used: ${state?.terminated?.reason ?? pod.status?.reason ?? pod.status?.phase}`,
        )
      last = [pod.status?.phase ?? 'Pending', waiting].filter(Boolean).join(', ')
      await sleep(Math.min(pause, Math.max(0, this.timeoutMs - (Date.now() - startedAt))))
    }
    throw new KubeStreamError(
      `the debug Pod ${ref.namespace}/${ref.name} was not running within ${this.timeoutMs / 1000}s (${last})`,
    )
  }

  /**
   * Deletes the Pod (no grace period: it only waits) and waits, within the timeout, until the API no longer has it.
   * Never throws: a failure is the line to print, with the kubectl command that removes it.
   */
  async remove(ref: PodRef, node: string): Promise<string | undefined> {
    const {namespace, name} = ref
    const startedAt = Date.now()
    try {
      try {
        await bounded(`delete pod ${namespace}/${name}`, 'delete', namespace, this.timeoutMs, (signal) =>
          this.core.deleteNamespacedPod({namespace, name, gracePeriodSeconds: 0}, abortableBy(signal)),
        )
      } catch (e) {
        if (!(e instanceof KubeStreamError && e.httpStatus === 404)) throw e
      }
      for (let pause = 100; ; pause = Math.min(1000, pause * 2)) {
        const left = this.timeoutMs - (Date.now() - startedAt)
        if (left <= 0) throw new Error(`still there after ${this.timeoutMs / 1000}s`)
        try {
          await bounded(`get pod ${namespace}/${name}`, 'get', namespace, left, (signal) =>
            this.core.readNamespacedPod({namespace, name}, abortableBy(signal)),
          )
        } catch (e) {
          if (e instanceof KubeStreamError && e.httpStatus === 404) break
          throw e
        }
        await sleep(pause)
      }
      untrack(name)
      return undefined
    } catch (e) {
      untrack(name)
      const why =
        e instanceof KubeForbiddenError
          ? `RBAC forbids ${e.verb} on pods in namespace "${namespace}" (403)`
          : (e as Error).message
      const kubectl = [...this.settings.kubectl, 'delete', 'pod', '-n', namespace, name].map(shellWord).join(' ')
      return `the debug Pod ${namespace}/${name} on ${node} was not deleted (${why}): delete it with: ${kubectl}`
    }
  }
}
