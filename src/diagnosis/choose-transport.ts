import type {KubeConfig} from '@kubernetes/client-node'
import {DiagnosisError} from '../errors.js'
import type {NodeCollection} from '../node/collect-node.js'
import type {NodeAccess} from '../node/node-access.js'
import {mapBounded} from '../node/select-nodes.js'
import {sshConfigNames, transportConnector, transportNotes, TransportUnavailable, type NodeConnector, type TransportName} from '../node/transports.js'
import type {VerboseLog} from '../node/logged-access.js'

/** `--via`: how nodes are read. `auto`: SSH where the SSH config names the node, else kube-proxy's Pod, else API-only. */
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
  log?: VerboseLog
}

export interface NodeReads {
  /** Each node read through a transport (read or failed); nodes left API-only are absent. */
  collected: Map<string, NodeCollection>
  readVia: Map<string, NodeReadVia>
  /** One line per RBAC refusal met (the verb and resource needed). */
  warnings: string[]
}

type Collect = (name: string, connect: () => Promise<NodeAccess>) => Promise<NodeCollection>

const DEFAULT_KUBE_PROXY_NAMESPACE = 'kube-system'
const DEFAULT_KUBE_PROXY_SELECTOR = 'k8s-app=kube-proxy'

/**
 * Picks each node's way in and reads it through `collect`. SSH is used where asked (or, with auto, where the SSH
 * config names the node) and its failure is the node's error; kube-proxy's Pod is used where one runs on the node
 * and RBAC allows it, and a refusal or a missing Pod moves on to the next way; with none left the node is API-only.
 */
export async function readNodesThrough(targets: Array<{name: string; address?: string}>, opts: TransportChoiceOptions, concurrency: number, collect: Collect): Promise<NodeReads> {
  const via = opts.via ?? 'auto'
  if (via === 'debug-pod') throw new DiagnosisError('--via debug-pod is not available in this version: use --via kube-proxy, ssh or none')
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
          ? {kubeConfig: opts.kubeConfig(), pods: {namespace: opts.kubeProxyNamespace ?? DEFAULT_KUBE_PROXY_NAMESPACE, labelSelector: opts.kubeProxySelector ?? DEFAULT_KUBE_PROXY_SELECTOR}}
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
      throw new DiagnosisError((e as Error).message)
    }
  }
  const sshConfigName = opts.sshConfig ?? '~/.ssh/config'
  const warnings = new Set<string>()
  const collected = new Map<string, NodeCollection>()
  const readVia = new Map<string, NodeReadVia>()

  const readOne = async (target: {name: string; address?: string}) => {
    const notUsed: NodeReadVia['notUsed'] = []
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
      collected.set(target.name, await collect(target.name, async () => (access = await connect(target))))
      if (access) for (const line of transportNotes(access).warnings) warnings.add(`${target.name}: ${line}`)
      const why = via === 'ssh' ? '--via ssh' : `${sshConfigName} has a Host entry for ${target.name}`
      const address = access?.describe().address ?? null
      readVia.set(target.name, {
        transport: 'ssh',
        address,
        why,
        notUsed: via === 'ssh' ? [{transport: 'kube-proxy', reason: '--via ssh'}] : [{transport: 'kube-proxy', reason: 'SSH is configured for this node'}],
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
        const result = await collect(target.name, async () => opened)
        const notes = transportNotes(opened)
        for (const line of notes.forbidden) warnings.add(line)
        const execRefused = !result.observation.reachable && notes.forbidden.some((l) => /pods\/exec/.test(l))
        if (execRefused) notUsed.push({transport: 'kube-proxy', reason: notes.forbidden.find((l) => /pods\/exec/.test(l))!})
        else {
          collected.set(target.name, result)
          const why = via === 'kube-proxy' ? '--via kube-proxy' : `kube-proxy's Pod runs on ${target.name} and exec into it is allowed`
          const notRead = [...notes.missingTools, ...notes.forbidden]
          readVia.set(target.name, {transport: 'kube-proxy', address: opened.describe().address, why, notUsed, notRead})
          return
        }
      }
    }
    readVia.set(target.name, {transport: null, address: null, why: `API-only: ${notUsed.map((n) => `${n.transport}: ${n.reason}`).join('; ')}`, notUsed, notRead: []})
  }

  await mapBounded(targets, Math.max(1, concurrency), readOne)
  return {collected, readVia, warnings: [...warnings]}
}

async function sshConnectorOrFail(connector: (name: TransportName) => Promise<NodeConnector>): Promise<NodeConnector> {
  try {
    return await connector('ssh')
  } catch (e) {
    throw new DiagnosisError((e as Error).message)
  }
}
