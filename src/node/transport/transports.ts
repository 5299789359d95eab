import {join} from 'node:path'
import type {KubeConfig} from '@kubernetes/client-node'
import type {NodeAccess} from './node-access.js'
import type {PodSelector} from './pod/find-pod.js'
import type {DebugPodSettings} from './pod/debug-pod.js'
import {loggedAccess, type VerboseLog} from './logged-access.js'
import type {TransportName} from './transport-names.js'

/** DNS-1123 subdomain: what Kubernetes allows in a node name, and so nothing that climbs out of a folder. */
const NODE_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/

/** The node to reach: its Kubernetes name and the address the API gives it. */
interface NodeTarget {
  name: string
  address?: string
}

export interface TransportOptions {
  timeoutMs: number
  /** ssh: OpenSSH client config (default ~/.ssh/config). */
  sshConfig?: string
  /** ssh: skip host key checking (only with the explicit flag). */
  insecureIgnoreHostKey?: boolean
  /** snapshot: the bundle's folder of node folders. */
  nodesDir?: string
  /** kube-proxy, debug-pod: the cluster's credentials and which Pods are kube-proxy's. */
  kube?: {kubeConfig: KubeConfig; pods: PodSelector; debug?: DebugPodSettings & {image?: string}}
  /** --verbose: every command, stream and file read on a node, with its transport and duration. */
  log?: VerboseLog
}

/** This way in does not exist for the node (no Pod there, RBAC refuses): nothing was tried on the node itself. */
export class TransportUnavailable extends Error {
  override name = 'TransportUnavailable'
  /** What the attempt left in the cluster and could not remove (a debug Pod), with the command that removes it. */
  readonly leftover?: string

  constructor(message: string, options: {leftover?: string; cause?: unknown} = {}) {
    super(message, options.cause === undefined ? undefined : {cause: options.cause})
    this.leftover = options.leftover
  }
}

/**
 * What a transport could not read on a node, the refusals it met (the Pod transports keep both), what it could not
 * clean up once closed (a debug Pod not deleted: the line says how to delete it), and what the run must warn about
 * (ssh: a host key accepted unchecked).
 */
interface TransportNotes {
  missingTools(): string[]
  forbidden(): string[]
  warnings(): string[]
  leftovers(): string[]
  origin(): string | undefined
}

export function transportNotes(access: NodeAccess): {
  missingTools: string[]
  forbidden: string[]
  warnings: string[]
  leftovers: string[]
  origin?: string
} {
  const notes = access as Partial<TransportNotes>
  return {
    missingTools: notes.missingTools?.() ?? [],
    forbidden: notes.forbidden?.() ?? [],
    warnings: notes.warnings?.() ?? [],
    leftovers: notes.leftovers?.() ?? [],
    origin: notes.origin?.(),
  }
}

/** Opens one node's access; made once per run from the options (config files are read once). */
export type NodeConnector = (target: NodeTarget) => Promise<NodeAccess>
type TransportFactory = (opts: TransportOptions) => Promise<NodeConnector>

/**
 * Every way to reach a node. A new transport (kube-proxy's API, a debug Pod) is one factory here: collection and
 * checks only see NodeAccess. The SSH client is loaded only when the ssh transport is used.
 */
const TRANSPORTS = {
  ssh: async (opts: TransportOptions): Promise<NodeConnector> => {
    const [{sshConfigReader, configNamesNode}, {resolveRoute}, {SshSession}, {SshNodeAccess}] = await Promise.all([
      import('./ssh/ssh-config-file.js'),
      import('./ssh/ssh-route.js'),
      import('./ssh/ssh-session.js'),
      import('./ssh/ssh-transport.js'),
    ])
    const source = {file: opts.sshConfig, timeoutMs: opts.timeoutMs}
    const reader = await sshConfigReader(source)
    const names = configNamesNode(source)
    opts.log?.(`ssh: each node's configuration is read by ${reader.by}`)
    return async (target) => {
      // As the printed commands reach it (diagnosis/reach.ts): by its name when the configuration names it, else by
      // the address the API gives it, which the same configuration then applies to.
      const alias = names(target.name) ? target.name : (target.address ?? target.name)
      const route = await resolveRoute(reader, alias)
      const log = opts.log
      return new SshNodeAccess(
        await SshSession.connect(route, {
          insecureIgnoreHostKey: opts.insecureIgnoreHostKey ?? false,
          timeoutMs: opts.timeoutMs,
          log: log && ((line) => log(`${target.name} [ssh] ${line}`)),
        }),
      )
    }
  },
  snapshot: async (opts: TransportOptions): Promise<NodeConnector> => {
    const {SnapshotNodeAccess} = await import('./snapshot-transport.js')
    if (!opts.nodesDir) throw new Error('the snapshot transport needs the bundle folder')
    const nodesDir = opts.nodesDir
    return async (target) => {
      if (!NODE_NAME.test(target.name)) throw new Error(`"${target.name}" is not a node name`)
      return SnapshotNodeAccess.fromFolder(join(nodesDir, target.name))
    }
  },
  'kube-proxy': async (opts: TransportOptions): Promise<NodeConnector> => {
    const [{podsByNode}, {PodExecNodeAccess}, {KubeForbiddenError}] = await Promise.all([
      import('./pod/find-pod.js'),
      import('./pod/pod-exec-transport.js'),
      import('../../kube/errors.js'),
    ])
    if (!opts.kube) throw new Error('the kube-proxy transport needs the kubeconfig')
    const {kubeConfig, pods} = opts.kube
    const podOn = podsByNode(kubeConfig, pods, opts.timeoutMs)
    return async (target) => {
      let found
      try {
        found = await podOn(target.name)
      } catch (e) {
        if (e instanceof KubeForbiddenError)
          throw new TransportUnavailable(
            `RBAC forbids ${e.verb} on ${e.resource} in namespace "${e.namespace}" (403): needed to find kube-proxy's Pods`,
            {cause: e},
          )
        throw new TransportUnavailable(`kube-proxy's Pods could not be listed: ${(e as Error).message}`, {cause: e})
      }
      if (found.kind === 'none') throw new TransportUnavailable(found.reason)
      return new PodExecNodeAccess(kubeConfig, found.pod, opts.timeoutMs)
    }
  },
  /**
   * A short-lived privileged Pod made on each node (node/kube/debug-pod.ts), then read as kube-proxy's Pod is: the
   * same engine, another way to get the Pod. Closing the access deletes the Pod. Opt-in only: it writes to the cluster.
   */
  'debug-pod': async (opts: TransportOptions): Promise<NodeConnector> => {
    const [{kubeProxyImages}, {PodExecNodeAccess}, {KubeForbiddenError}, {DebugPods}] = await Promise.all([
      import('./pod/find-pod.js'),
      import('./pod/pod-exec-transport.js'),
      import('../../kube/errors.js'),
      import('./pod/debug-pod.js'),
    ])
    if (!opts.kube?.debug) throw new Error('the debug-pod transport needs the kubeconfig and a namespace')
    const {kubeConfig, pods, debug} = opts.kube
    const imageOn = kubeProxyImages(kubeConfig, pods, opts.timeoutMs)
    const debugPods = new DebugPods(kubeConfig, debug, opts.timeoutMs)
    return async (target) => {
      let image = debug.image
      let origin = '--debug-image'
      if (!image) {
        let found
        try {
          found = await imageOn(target.name)
        } catch (e) {
          if (e instanceof KubeForbiddenError)
            throw new TransportUnavailable(
              `RBAC forbids ${e.verb} on ${e.resource} in namespace "${e.namespace}" (403): needed to find kube-proxy's image for the debug Pods (--debug-image names one)`,
              {cause: e},
            )
          throw new TransportUnavailable(
            `kube-proxy's Pods could not be listed for their image: ${(e as Error).message}`,
            {cause: e},
          )
        }
        if ('reason' in found) throw new TransportUnavailable(found.reason)
        image = found.image
        origin = found.where
      }
      let pod
      try {
        pod = await debugPods.start(target.name, image)
      } catch (e) {
        if (e instanceof KubeForbiddenError) {
          // RBAC words its 403 "cannot VERB resource"; anything else (an admission policy) is quoted.
          const by = /cannot \S+ resource/.test(e.serverMessage) ? 'RBAC forbids' : 'the API server forbids'
          const quoted = by === 'RBAC forbids' ? '' : `: ${statusText(e.serverMessage)}`
          throw new TransportUnavailable(
            `${by} ${e.verb} on ${e.resource} in namespace "${e.namespace}" (403${quoted}): needed to create the debug Pods`,
            {cause: e},
          )
        }
        throw new TransportUnavailable((e as Error).message, {leftover: (e as {leftover?: string}).leftover, cause: e})
      }
      const made = pod
      return new PodExecNodeAccess(kubeConfig, made, opts.timeoutMs, {
        transport: 'debug-pod',
        pod: 'the debug Pod',
        image: "the debug Pod's image",
        purpose: 'read nodes through debug Pods',
        nodeRoot: true,
        origin: `image ${image}, ${origin}`,
        release: () => debugPods.remove(made, target.name),
      })
    }
  },
} satisfies Record<TransportName, TransportFactory>

/** The message of a Status body (JSON text or an object), cut to one short line. */
function statusText(body: string): string {
  let message = body
  try {
    message = (JSON.parse(body) as {message?: string}).message ?? body
  } catch {
    // not JSON: the text itself
  }
  return message.replace(/\s+/g, ' ').slice(0, 200)
}

export async function transportConnector(name: TransportName, opts: TransportOptions): Promise<NodeConnector> {
  const connect = await TRANSPORTS[name](opts)
  const log = opts.log
  if (!log) return connect
  return async (target) => {
    const startedAt = performance.now()
    try {
      const access = await connect(target)
      log(
        `${target.name} [${name} ${access.describe().address}] connected in ${((performance.now() - startedAt) / 1000).toFixed(2)}s`,
      )
      return loggedAccess(access, target.name, log)
    } catch (e) {
      log(
        `${target.name} [${name}] not connected after ${((performance.now() - startedAt) / 1000).toFixed(2)}s: ${(e as Error).message}`,
      )
      throw e
    }
  }
}

/**
 * Whether the OpenSSH config names a node: a Host pattern other than a bare `*` (or a `Match host` criterion) matches
 * its name (a `Host *` block holds defaults, not a way to the node). Includes are followed; a config file given
 * explicitly must exist.
 */
export async function sshConfigNames(sshConfig: string | undefined): Promise<(node: string) => boolean> {
  const {configNamesNode} = await import('./ssh/ssh-config-file.js')
  return configNamesNode({file: sshConfig})
}
