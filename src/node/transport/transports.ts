import {randomBytes} from 'node:crypto'
import {join} from 'node:path'
import type {KubeConfig} from '@kubernetes/client-node'
import type {NodeAccess} from './node-access.js'
import {loggedAccess, type VerboseLog} from './logged-access.js'
import type {TransportName} from './transport-names.js'
import {LEFTOVER_CLEANUP, MANAGED_BY, MANAGED_BY_LABEL, RUN_LABEL} from './pod/debug-pod-labels.js'
import {podOfAddress} from './pod/pod-address.js'
import {HOST_ROOT} from '../node-commands.js'
import {KubeForbiddenError} from '../../kube/errors.js'

/** DNS-1123 subdomain: what Kubernetes allows in a node name, and so nothing that climbs out of a folder. */
const NODE_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/

/** The node to reach: its Kubernetes name and the address the API gives it. */
export interface NodeTarget {
  name: string
  address?: string
}

/**
 * How a run reaches and reads nodes (the access flags, declared here once: cli/flags.ts fills it): which way (`--via`),
 * each way's settings, and which nodes, how many at once.
 */
export interface AccessOptions {
  via: Via
  /** ssh: OpenSSH client config (default ~/.ssh/config). */
  sshConfig?: string
  /** ssh: skip host key checking (only with the explicit flag). */
  insecureIgnoreHostKey: boolean
  /** kube-proxy, debug-pod: which Pods are kube-proxy's (default kube-system, k8s-app=kube-proxy). */
  kubeProxyNamespace?: string
  kubeProxySelector?: string
  /** debug-pod: --debug-image (default: kube-proxy's) and --debug-namespace (default kube-system). */
  debugImage?: string
  debugNamespace?: string
  /** --nodes, --all-nodes: which nodes are read (see node/read/select-nodes.ts). */
  nodes?: string[]
  allNodes?: boolean
  /** Nodes read at once. */
  concurrency: number
}

/** What a transport's connector is made from: the access options and what the run knows besides. */
export interface TransportOptions {
  access: AccessOptions
  /** Per API call and per node step. */
  timeoutMs: number
  /** The cluster's credentials (the Pod transports), loaded on first use. */
  kubeConfig?: () => KubeConfig
  /** kubectl with the user's --kubeconfig and --context, for the commands the run prints (a debug Pod's removal). */
  kubectl: string[]
  /** The nodes this run reads through the transport (said before a debug Pod is created). */
  nodes: string[]
  /** snapshot: the bundle's folder of node folders. */
  nodesDir?: string
  /** Says, before anything is created, what the run will create in the cluster (stderr). */
  announce?: (line: string) => void
  /** --verbose: every command, stream and file read on a node, with its transport and duration. */
  log?: VerboseLog
}

/** Why a way in does not exist for a node; nothing was tried on the node itself. */
export type Unavailability =
  /** The API server refused (403) a request the way needs: RBAC, or an admission policy (its message quoted). */
  | {
      kind: 'forbidden'
      by: 'RBAC' | 'the API server'
      verb: string
      resource: string
      namespace: string
      /** The API server's own words, for a refusal that is not RBAC's. */
      message?: string
      /** What the request was needed for: "find kube-proxy's Pods". */
      neededTo: string
    }
  /** No Pod to read through (none of kube-proxy's on the node, not running, no image to take). */
  | {kind: 'no-pod'; reason: string}
  /** The way needs something the run was not given. */
  | {kind: 'not-configured'; reason: string}
  /** The API call it needs failed (a timeout, an error), or the Pod did not come up. */
  | {kind: 'failed'; reason: string}

function unavailabilityText(u: Unavailability): string {
  if (u.kind !== 'forbidden') return u.reason
  return `${u.by} forbids ${u.verb} on ${u.resource} in namespace "${u.namespace}" (403${u.message ? `: ${u.message}` : ''}): needed to ${u.neededTo}`
}

/** This way in does not exist for the node (no Pod there, RBAC refuses): nothing was tried on the node itself. */
export class TransportUnavailable extends Error {
  override name = 'TransportUnavailable'
  /** What the attempt left in the cluster and could not remove (a debug Pod), with the command that removes it. */
  readonly leftover?: string

  constructor(
    readonly why: Unavailability,
    options: {leftover?: string; cause?: unknown} = {},
  ) {
    super(unavailabilityText(why), options.cause === undefined ? undefined : {cause: options.cause})
    this.leftover = options.leftover
  }
}

/** Opens one node's access; made once per run from the options (config files are read once). */
export type NodeConnector = (target: NodeTarget) => Promise<NodeAccess>

/** How a person reaches a node a transport read, for the commands the report prints. */
type ReachRule =
  /** `ssh` to the node as their SSH config names it (else the address the doctor connected to). */
  | {by: 'ssh'}
  /**
   * `kubectl exec` into the Pod the node was read through, found from the address the access described; only these
   * programs are there.
   */
  | {
      by: 'exec'
      pod(address: string | null): {namespace: string; name: string} | undefined
      programs: readonly string[]
    }
  /** No way the person has (the debug Pod is deleted once the node is read): the report gives prose. */
  | {by: 'none'}

/** How `--via auto` uses a transport. */
interface AutoUse {
  /** Tried in this order, lowest first. */
  rank: number
  /** Whether auto tries it for a node (loaded once per run): undefined, or why not. */
  offered?(access: AccessOptions): Promise<(node: string) => string | undefined>
  /** Why auto read the node this way, for the report. */
  picked(node: string, access: AccessOptions): string
  /** Why the ways after it were not tried, once it was used. */
  ahead: string
}

/**
 * One way to reach a node: its connector, and what the choice of ways (diagnosis/choose-transport.ts), the probes and
 * the printed commands need to know of it. Collection and checks only see NodeAccess.
 */
export interface Transport {
  connect(opts: TransportOptions): Promise<NodeConnector>
  /** `--via NAME` picks it (a snapshot is no way to a live node). */
  via: boolean
  /** How `--via auto` uses it, or why it never does. */
  auto: AutoUse | {never: string}
  /** Its access opens TCP from the node to other addresses: the live probes go through it. */
  probes: boolean
  /**
   * A failure to connect is the node's error (the user set this way up for the node), not a reason to try the next
   * way; a transport that may simply not exist for a node says so with TransportUnavailable instead.
   */
  failureIsFinal: boolean
  reach: ReachRule
  /** Options only this transport uses (by flag): given with another --via, they are an error, not ignored. */
  ownOptions?: {flags: string[]; given(access: AccessOptions): boolean}
}

const DEFAULT_KUBE_PROXY_NAMESPACE = 'kube-system'
const DEFAULT_KUBE_PROXY_SELECTOR = 'k8s-app=kube-proxy'
const DEFAULT_DEBUG_NAMESPACE = 'kube-system'

/** The programs kube-proxy's image (distroless-iptables) ships: no ip, bridge, sysctl, curl, dig or ipvsadm there. */
const IN_KUBE_PROXY_IMAGE = [
  ...['iptables', 'ip6tables'].flatMap((t) =>
    ['', '-legacy', '-nft'].flatMap((backend) => [`${t}${backend}`, `${t}${backend}-save`]),
  ),
  'nft',
  'ipset',
  'conntrack',
  'cat',
  'grep',
]

/** Which Pods are kube-proxy's, from the options. */
const kubeProxyPods = (access: AccessOptions) => ({
  namespace: access.kubeProxyNamespace ?? DEFAULT_KUBE_PROXY_NAMESPACE,
  labelSelector: access.kubeProxySelector ?? DEFAULT_KUBE_PROXY_SELECTOR,
})

function needKubeConfig(opts: TransportOptions, transport: string): KubeConfig {
  if (!opts.kubeConfig) throw new Error(`the ${transport} transport needs the kubeconfig`)
  return opts.kubeConfig()
}

/**
 * Every way to reach a node. A new transport is its name (transport-names.ts), one row here and its module; then the
 * reads it serves name it (node/read/node-reads.ts). Each row's module is loaded only when the transport is used.
 */
export const TRANSPORTS = {
  ssh: {
    async connect(opts) {
      const [{sshConfigReader, configNamesNode}, {resolveRoute}, {SshSession}, {SshNodeAccess}] = await Promise.all([
        import('./ssh/ssh-config-file.js'),
        import('./ssh/ssh-route.js'),
        import('./ssh/ssh-session.js'),
        import('./ssh/ssh-transport.js'),
      ])
      const source = {file: opts.access.sshConfig, timeoutMs: opts.timeoutMs}
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
            insecureIgnoreHostKey: opts.access.insecureIgnoreHostKey,
            timeoutMs: opts.timeoutMs,
            log: log && ((line) => log(`${target.name} [ssh] ${line}`)),
          }),
        )
      }
    },
    via: true,
    auto: {
      rank: 1,
      async offered(access) {
        const named = await sshConfigNames(access.sshConfig)
        return (node) => (named(node) ? undefined : `no Host entry for ${node} in ${sshConfigName(access)}`)
      },
      picked: (node, access) => `${sshConfigName(access)} has a Host entry for ${node}`,
      ahead: 'SSH is configured for this node',
    },
    probes: true,
    failureIsFinal: true,
    reach: {by: 'ssh'},
  },
  snapshot: {
    async connect(opts) {
      const {SnapshotNodeAccess} = await import('./snapshot-transport.js')
      if (!opts.nodesDir) throw new Error('the snapshot transport needs the bundle folder')
      const nodesDir = opts.nodesDir
      return async (target) => {
        if (!NODE_NAME.test(target.name)) throw new Error(`"${target.name}" is not a node name`)
        return SnapshotNodeAccess.fromFolder(join(nodesDir, target.name))
      }
    },
    via: false,
    auto: {never: 'a snapshot is no way to a live node'},
    probes: false,
    failureIsFinal: true,
    reach: {by: 'none'},
  },
  'kube-proxy': {
    async connect(opts) {
      const [{podsByNode}, {PodExecNodeAccess}] = await Promise.all([
        import('./pod/find-pod.js'),
        import('./pod/pod-exec-transport.js'),
      ])
      const kubeConfig = needKubeConfig(opts, 'kube-proxy')
      const podOn = podsByNode(kubeConfig, kubeProxyPods(opts.access), opts.timeoutMs)
      return async (target) => {
        const found = await amongKubeProxyPods(
          () => podOn(target.name),
          "find kube-proxy's Pods",
          "kube-proxy's Pods could not be listed",
        )
        if (found.kind === 'none') throw new TransportUnavailable({kind: 'no-pod', reason: found.reason})
        return new PodExecNodeAccess(kubeConfig, found.pod, opts.timeoutMs)
      }
    },
    via: true,
    auto: {
      rank: 2,
      picked: (node) => `kube-proxy's Pod runs on ${node} and exec into it is allowed`,
      ahead: "kube-proxy's Pod read the node",
    },
    // A port-forward reaches only the node's loopback, not the Service's or the endpoints' addresses.
    probes: false,
    failureIsFinal: false,
    reach: {by: 'exec', pod: podOfAddress, programs: IN_KUBE_PROXY_IMAGE},
  },
  /**
   * A short-lived Pod with the capabilities its reads need made on each node (pod/debug-pod.ts), then read as kube-proxy's Pod is: the same
   * engine, another way to get the Pod. Closing the access deletes the Pod. Opt-in only: it writes to the cluster.
   */
  'debug-pod': {
    async connect(opts) {
      const [{kubeProxyImage}, {PodExecNodeAccess}, {DebugPods, DEBUG_POD_CAPABILITIES, DEBUG_POD_RESOURCES}] =
        await Promise.all([
          import('./pod/find-pod.js'),
          import('./pod/pod-exec-transport.js'),
          import('./pod/debug-pod.js'),
        ])
      const kubeConfig = needKubeConfig(opts, 'debug-pod')
      const debug = {
        namespace: opts.access.debugNamespace ?? DEFAULT_DEBUG_NAMESPACE,
        runId: randomBytes(3).toString('hex'),
        kubectl: opts.kubectl,
      }
      // The image is settled, and said, before anything is created: --debug-image, or kube-proxy's DaemonSet's image
      // pinned by digest. Without either, no debug Pod is made (each node says why).
      let chosen: {image: string; origin: string} | TransportUnavailable
      if (opts.access.debugImage) chosen = {image: opts.access.debugImage, origin: '--debug-image'}
      else if (opts.nodes.length === 0) chosen = new TransportUnavailable({kind: 'no-pod', reason: 'no node to read'})
      else
        try {
          const found = await amongKubeProxyPods(
            kubeProxyImage(kubeConfig, kubeProxyPods(opts.access), opts.timeoutMs),
            "find kube-proxy's image for the debug Pods (--debug-image names one)",
            "kube-proxy's DaemonSet could not be read for its image",
          )
          chosen =
            'reason' in found
              ? new TransportUnavailable({kind: 'no-pod', reason: found.reason})
              : {image: found.image, origin: found.where}
        } catch (e) {
          if (!(e instanceof TransportUnavailable)) throw e
          chosen = e
        }
      if (opts.nodes.length > 0 && !(chosen instanceof TransportUnavailable)) {
        opts.announce?.(
          `--via debug-pod: creating a Pod (hostNetwork; capabilities ${DEBUG_POD_CAPABILITIES.join(', ')}, not privileged; the node's / read-only at ${HOST_ROOT}; at most ${DEBUG_POD_RESOURCES.limits.cpu} CPU and ${DEBUG_POD_RESOURCES.limits.memory} memory; image ${chosen.image}, ${chosen.origin}) in namespace "${debug.namespace}" on ${opts.nodes.join(', ')}; each is deleted once its node is read`,
        )
        opts.announce?.(
          `the Pods are labelled ${MANAGED_BY_LABEL}=${MANAGED_BY},${RUN_LABEL}=${debug.runId}; leftovers, if any: ${LEFTOVER_CLEANUP}`,
        )
      }
      const debugPods = new DebugPods(kubeConfig, debug, opts.timeoutMs)
      return async (target) => {
        if (chosen instanceof TransportUnavailable) throw chosen
        const {image, origin} = chosen
        let pod
        try {
          pod = await debugPods.start(target.name, image)
        } catch (e) {
          if (e instanceof KubeForbiddenError) {
            // RBAC words its 403 "cannot VERB resource"; anything else (an admission policy) is quoted.
            const rbac = /cannot \S+ resource/.test(e.serverMessage)
            throw new TransportUnavailable(
              {
                kind: 'forbidden',
                by: rbac ? 'RBAC' : 'the API server',
                ...refused(e),
                message: rbac ? undefined : statusText(e.serverMessage),
                neededTo: 'create the debug Pods',
              },
              {cause: e},
            )
          }
          throw new TransportUnavailable(
            {kind: 'failed', reason: (e as Error).message},
            {leftover: (e as {leftover?: string}).leftover, cause: e},
          )
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
    via: true,
    auto: {never: 'it creates a Pod in the cluster: only --via debug-pod does'},
    // The Pod is deleted once the node is read, before the probes.
    probes: false,
    failureIsFinal: false,
    reach: {by: 'none'},
    ownOptions: {
      flags: ['--debug-image', '--debug-namespace'],
      given: (access) => access.debugImage !== undefined || access.debugNamespace !== undefined,
    },
  },
} as const satisfies Record<TransportName, Transport>

/** The transports whose Pod stays after the read: a person reaches the node by `kubectl exec` into it. */
export type ExecTransport = {
  [K in TransportName]: (typeof TRANSPORTS)[K]['reach'] extends {by: 'exec'} ? K : never
}[TransportName]

/** The transports `--via` can name, in the registry's order. */
export type ViaTransport = {[K in TransportName]: (typeof TRANSPORTS)[K]['via'] extends true ? K : never}[TransportName]

/**
 * `--via`: how nodes are read. `auto`: the transports auto uses, in their order (the first that exists for the node);
 * `none`: API-only; a transport's name: that way only.
 */
export const VIA = [
  'auto',
  ...(Object.keys(TRANSPORTS) as TransportName[]).filter((t): t is ViaTransport => TRANSPORTS[t].via),
  'none',
] as const satisfies readonly string[]
export type Via = 'auto' | 'none' | ViaTransport

/** The transports `--via auto` tries, in order. */
export function autoOrder(): ViaTransport[] {
  const rank = (t: TransportName) => {
    const auto: Transport['auto'] = TRANSPORTS[t].auto
    return 'rank' in auto ? auto.rank : Infinity
  }
  return VIA.filter((v): v is ViaTransport => v !== 'auto' && v !== 'none' && rank(v) !== Infinity).sort(
    (a, b) => rank(a) - rank(b),
  )
}

/** A transport's row. */
export const transport = (name: TransportName): Transport => TRANSPORTS[name]

/** Looks among kube-proxy's Pods (`lookup`): a 403, or any failure, makes the transport unavailable for the node. */
async function amongKubeProxyPods<T>(lookup: () => Promise<T>, neededTo: string, failed: string): Promise<T> {
  try {
    return await lookup()
  } catch (e) {
    if (e instanceof KubeForbiddenError)
      throw new TransportUnavailable({kind: 'forbidden', by: 'RBAC', ...refused(e), neededTo}, {cause: e})
    throw new TransportUnavailable({kind: 'failed', reason: `${failed}: ${(e as Error).message}`}, {cause: e})
  }
}

/** The verb, resource and namespace of a 403. */
const refused = (e: {verb: string; resource: string; namespace: string}) => ({
  verb: e.verb,
  resource: e.resource,
  namespace: e.namespace,
})

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

/** The connector of a transport; with --verbose, every access it opens says what it does. */
export async function transportConnector(name: TransportName, opts: TransportOptions): Promise<NodeConnector> {
  const connect = await transport(name).connect(opts)
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

/** The SSH config's name in the report (the default when none was given). */
const sshConfigName = (access: Pick<AccessOptions, 'sshConfig'>) => access.sshConfig ?? '~/.ssh/config'

/**
 * Whether the OpenSSH config names a node: a Host pattern other than a bare `*` (or a `Match host` criterion) matches
 * its name (a `Host *` block holds defaults, not a way to the node). Includes are followed; a config file given
 * explicitly must exist.
 */
export async function sshConfigNames(sshConfig: string | undefined): Promise<(node: string) => boolean> {
  const {configNamesNode} = await import('./ssh/ssh-config-file.js')
  return configNamesNode({file: sshConfig})
}
