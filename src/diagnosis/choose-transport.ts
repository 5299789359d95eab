import {randomBytes} from 'node:crypto'
import type {KubeConfig} from '@kubernetes/client-node'
import {DiagnosisError} from '../errors.js'
import type {NodeCollection} from '../node/read/collect-node.js'
import type {NodeAccess} from '../node/transport/node-access.js'
import {mapBounded} from '../util/map-bounded.js'
import {
  sshConfigNames,
  transportConnector,
  transportNotes,
  TransportUnavailable,
  type NodeConnector,
} from '../node/transport/transports.js'
import type {TransportName} from '../node/transport/transport-names.js'
import type {VerboseLog} from '../node/transport/logged-access.js'
import {LEFTOVER_CLEANUP, MANAGED_BY, MANAGED_BY_LABEL, RUN_LABEL} from '../node/transport/pod/debug-pod-labels.js'
import {HOST_ROOT} from '../node/node-commands.js'

/**
 * `--via`: how nodes are read. `auto`: SSH where the SSH config names the node, else kube-proxy's Pod, else API-only.
 * `debug-pod` (a Pod the doctor creates on each node) is never picked by auto: it writes to the cluster.
 */
export const VIA = ['auto', 'ssh', 'kube-proxy', 'debug-pod', 'none'] as const
export type Via = (typeof VIA)[number]

/** How one node was read (or why it was not), and why the other ways were not used: for the report. */
export interface NodeReadVia {
  /** The transport that read the node; null when the node was not read (API-only). */
  transport: TransportName | null
  /** Where: user@host:port, pod NAMESPACE/NAME. */
  address: string | null
  /** Why this way (or, for API-only, why no way). */
  why: string
  notUsed: Array<{transport: string; reason: string}>
  /** What this transport could not read on the node ("ipvsadm not in the kube-proxy image", …). */
  notRead: string[]
}

export interface TransportChoiceOptions {
  via?: Via
  sshConfig?: string
  insecureIgnoreHostKey: boolean
  timeoutMs: number
  /** Needed for the kube-proxy transport. */
  kubeConfig?: () => KubeConfig
  kubeProxyNamespace?: string
  kubeProxySelector?: string
  /** --debug-image (default: kube-proxy's) and --debug-namespace (default kube-system), for --via debug-pod. */
  debugImage?: string
  debugNamespace?: string
  /** The user's --kubeconfig and --context, repeated in the command that deletes a debug Pod left behind. */
  kubeconfig?: string
  context?: string
  /** Says, before anything is created, what the run will create in the cluster (stderr). */
  announce?: (line: string) => void
  log?: VerboseLog
}

export interface NodeReads {
  /** Each node read through a transport (read or failed); nodes left API-only are absent. */
  collected: Map<string, NodeCollection>
  readVia: Map<string, NodeReadVia>
  /** One line per RBAC refusal met (the verb and resource needed). */
  warnings: string[]
}

/** Reads one node through `connect`, the access of `transport`. */
type Collect = (name: string, connect: () => Promise<NodeAccess>, transport: TransportName) => Promise<NodeCollection>

const DEFAULT_KUBE_PROXY_NAMESPACE = 'kube-system'
const DEFAULT_KUBE_PROXY_SELECTOR = 'k8s-app=kube-proxy'
const DEFAULT_DEBUG_NAMESPACE = 'kube-system'

/**
 * Picks each node's way in and reads it through `collect`. SSH is used where asked (or, with auto, where the SSH
 * config names the node) and its failure is the node's error; kube-proxy's Pod is used where one runs on the node
 * and RBAC allows it, and a refusal or a missing Pod moves on to the next way; with none left the node is API-only.
 */
export async function readNodesThrough(
  targets: Array<{name: string; address?: string}>,
  opts: TransportChoiceOptions,
  concurrency: number,
  collect: Collect,
): Promise<NodeReads> {
  const via = opts.via ?? 'auto'
  if (via !== 'debug-pod' && (opts.debugImage !== undefined || opts.debugNamespace !== undefined))
    throw new DiagnosisError(
      `--debug-image and --debug-namespace are used only with --via debug-pod (this run: --via ${via})`,
    )
  const debug = via === 'debug-pod' ? debugSettings(opts) : undefined
  const connectors = new Map<TransportName, Promise<NodeConnector>>()
  const connector = (name: TransportName) => {
    let c = connectors.get(name)
    if (!c) {
      c = transportConnector(name, {
        sshConfig: opts.sshConfig,
        insecureIgnoreHostKey: opts.insecureIgnoreHostKey,
        timeoutMs: opts.timeoutMs,
        log: opts.log,
        kube: opts.kubeConfig
          ? {
              kubeConfig: opts.kubeConfig(),
              pods: {
                namespace: opts.kubeProxyNamespace ?? DEFAULT_KUBE_PROXY_NAMESPACE,
                labelSelector: opts.kubeProxySelector ?? DEFAULT_KUBE_PROXY_SELECTOR,
              },
              debug,
            }
          : undefined,
      })
      connectors.set(name, c)
    }
    return c
  }
  let sshNames: (node: string) => boolean = () => via === 'ssh'
  if (via === 'auto') {
    try {
      sshNames = await sshConfigNames(opts.sshConfig)
    } catch (e) {
      throw new DiagnosisError((e as Error).message, {cause: e})
    }
  }
  const sshConfigName = opts.sshConfig ?? '~/.ssh/config'
  const warnings = new Set<string>()
  const collected = new Map<string, NodeCollection>()
  const readVia = new Map<string, NodeReadVia>()

  if (debug && targets.length > 0) {
    const image = debug.image ? `image ${debug.image}` : "kube-proxy's image, already on the node"
    opts.announce?.(
      `--via debug-pod: creating a privileged Pod (hostNetwork, hostPID, the node's / read-only at ${HOST_ROOT}; ${image}) in namespace "${debug.namespace}" on ${targets.map((t) => t.name).join(', ')}; each is deleted once its node is read`,
    )
    opts.announce?.(
      `the Pods are labelled ${MANAGED_BY_LABEL}=${MANAGED_BY},${RUN_LABEL}=${debug.runId}; leftovers, if any: ${LEFTOVER_CLEANUP}`,
    )
  }

  const readOne = async (target: {name: string; address?: string}) => {
    const notUsed: NodeReadVia['notUsed'] = []
    if (via === 'debug-pod') return readThroughDebugPod(target)
    if (via === 'none') {
      readVia.set(target.name, {
        transport: null,
        address: null,
        why: 'API-only (--via none)',
        notUsed: [
          {transport: 'ssh', reason: '--via none'},
          {transport: 'kube-proxy', reason: '--via none'},
        ],
        notRead: [],
      })
      return
    }
    const useSsh = via === 'ssh' || (via === 'auto' && sshNames(target.name))
    if (useSsh) {
      const connect = await sshConnectorOrFail(connector)
      let access: NodeAccess | undefined
      collected.set(target.name, await collect(target.name, async () => (access = await connect(target)), 'ssh'))
      if (access) for (const line of transportNotes(access).warnings) warnings.add(`${target.name}: ${line}`)
      const why = via === 'ssh' ? '--via ssh' : `${sshConfigName} has a Host entry for ${target.name}`
      const address = access?.describe().address ?? null
      readVia.set(target.name, {
        transport: 'ssh',
        address,
        why,
        notUsed:
          via === 'ssh'
            ? [{transport: 'kube-proxy', reason: '--via ssh'}]
            : [{transport: 'kube-proxy', reason: 'SSH is configured for this node'}],
        notRead: [],
      })
      return
    }
    if (via === 'auto') notUsed.push({transport: 'ssh', reason: `no Host entry for ${target.name} in ${sshConfigName}`})
    if (via === 'auto' || via === 'kube-proxy') {
      let access: NodeAccess | undefined
      try {
        access = await (await connector('kube-proxy'))(target)
      } catch (e) {
        if (!(e instanceof TransportUnavailable)) throw e
        if (/^RBAC forbids/.test(e.message)) warnings.add(e.message)
        notUsed.push({transport: 'kube-proxy', reason: e.message})
      }
      if (access) {
        const opened = access
        const result = await collect(target.name, async () => opened, 'kube-proxy')
        const notes = transportNotes(opened)
        for (const line of notes.forbidden) warnings.add(line)
        const execRefused = !result.observation.reachable && notes.forbidden.some((l) => /pods\/exec/.test(l))
        if (execRefused)
          notUsed.push({transport: 'kube-proxy', reason: notes.forbidden.find((l) => /pods\/exec/.test(l))!})
        else {
          collected.set(target.name, result)
          const why =
            via === 'kube-proxy'
              ? '--via kube-proxy'
              : `kube-proxy's Pod runs on ${target.name} and exec into it is allowed`
          const notRead = [...notes.missingTools, ...notes.forbidden]
          readVia.set(target.name, {transport: 'kube-proxy', address: opened.describe().address, why, notUsed, notRead})
          return
        }
      }
    }
    readVia.set(target.name, {
      transport: null,
      address: null,
      why: `API-only: ${notUsed.map((n) => `${n.transport}: ${n.reason}`).join('; ')}`,
      notUsed,
      notRead: [],
    })
  }

  /** The debug Pod is the only way tried: without it the node is API-only, and the run goes on with the other nodes. */
  const readThroughDebugPod = async (target: {name: string; address?: string}) => {
    const notUsed: NodeReadVia['notUsed'] = [
      {transport: 'ssh', reason: '--via debug-pod'},
      {transport: 'kube-proxy', reason: '--via debug-pod'},
    ]
    let access: NodeAccess
    try {
      access = await (await connector('debug-pod'))(target)
    } catch (e) {
      if (!(e instanceof TransportUnavailable)) throw e
      if (/^(RBAC|the API server) forbids/.test(e.message)) warnings.add(e.message)
      if (e.leftover) warnings.add(e.leftover)
      readVia.set(target.name, {
        transport: null,
        address: null,
        why: `API-only: debug-pod: ${e.message}`,
        notUsed: [...notUsed, {transport: 'debug-pod', reason: e.message}],
        notRead: [],
      })
      return
    }
    const opened = access
    // collect closes the access: the Pod is deleted (or said not to be) before this returns.
    const result = await collect(target.name, async () => opened, 'debug-pod')
    const notes = transportNotes(opened)
    for (const line of [...notes.forbidden, ...notes.leftovers]) warnings.add(line)
    const execRefused = !result.observation.reachable && notes.forbidden.find((l) => /pods\/exec/.test(l))
    if (execRefused) {
      readVia.set(target.name, {
        transport: null,
        address: null,
        why: `API-only: debug-pod: ${execRefused}`,
        notUsed: [...notUsed, {transport: 'debug-pod', reason: execRefused}],
        notRead: [],
      })
      return
    }
    collected.set(target.name, result)
    const why = `--via debug-pod${notes.origin ? ` (${notes.origin})` : ''}`
    readVia.set(target.name, {
      transport: 'debug-pod',
      address: opened.describe().address,
      why,
      notUsed,
      notRead: [...notes.missingTools, ...notes.forbidden],
    })
  }

  await mapBounded(targets, Math.max(1, concurrency), readOne)
  return {collected, readVia, warnings: [...warnings]}
}

async function sshConnectorOrFail(connector: (name: TransportName) => Promise<NodeConnector>): Promise<NodeConnector> {
  try {
    return await connector('ssh')
  } catch (e) {
    throw new DiagnosisError((e as Error).message, {cause: e})
  }
}

/** This run's debug Pod settings: the namespace, a fresh run id, and kubectl as the user runs it. */
function debugSettings(opts: TransportChoiceOptions) {
  return {
    namespace: opts.debugNamespace ?? DEFAULT_DEBUG_NAMESPACE,
    runId: randomBytes(3).toString('hex'),
    kubectl: [
      'kubectl',
      ...(opts.kubeconfig ? ['--kubeconfig', opts.kubeconfig] : []),
      ...(opts.context ? ['--context', opts.context] : []),
    ],
    image: opts.debugImage,
  }
}
