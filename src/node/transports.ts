import {join} from 'node:path'
import type {KubeConfig} from '@kubernetes/client-node'
import type {NodeAccess} from './node-access.js'
import type {PodSelector} from './kube/find-pod.js'
import {loggedAccess, type VerboseLog} from './logged-access.js'

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
  /** kube-proxy: the cluster's credentials and which Pods are kube-proxy's. */
  kube?: {kubeConfig: KubeConfig; pods: PodSelector}
  /** --verbose: every command, stream and file read on a node, with its transport and duration. */
  log?: VerboseLog
}

/** This way in does not exist for the node (no Pod there, RBAC refuses): nothing was tried on the node itself. */
export class TransportUnavailable extends Error {
  override name = 'TransportUnavailable'
}

/**
 * What a transport could not read on a node, the refusals it met (the kube-proxy transport keeps both), and what the
 * run must warn about (ssh: a host key accepted unchecked).
 */
interface TransportNotes {
  missingTools(): string[]
  forbidden(): string[]
  warnings(): string[]
}

export function transportNotes(access: NodeAccess): {missingTools: string[]; forbidden: string[]; warnings: string[]} {
  const notes = access as Partial<TransportNotes>
  return {missingTools: notes.missingTools?.() ?? [], forbidden: notes.forbidden?.() ?? [], warnings: notes.warnings?.() ?? []}
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
    const [{loadSshConfig, resolveHost}, {SshSession}, {SshNodeAccess}] = await Promise.all([import('./ssh-config.js'), import('./ssh-session.js'), import('./ssh-transport.js')])
    const blocks = loadSshConfig(opts.sshConfig)
    return async (target) => {
      const host = resolveHost(blocks, target.name, target.address ?? target.name)
      return new SshNodeAccess(await SshSession.connect(host, {insecureIgnoreHostKey: opts.insecureIgnoreHostKey ?? false, timeoutMs: opts.timeoutMs}))
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
    const [{podsByNode}, {KubeProxyNodeAccess}, {KubeForbiddenError}] = await Promise.all([import('./kube/find-pod.js'), import('./kube-proxy-transport.js'), import('./kube/kube-stream-errors.js')])
    if (!opts.kube) throw new Error('the kube-proxy transport needs the kubeconfig')
    const {kubeConfig, pods} = opts.kube
    const podOn = podsByNode(kubeConfig, pods, opts.timeoutMs)
    return async (target) => {
      let found
      try {
        found = await podOn(target.name)
      } catch (e) {
        if (e instanceof KubeForbiddenError) throw new TransportUnavailable(`RBAC forbids ${e.verb} on ${e.resource} in namespace "${e.namespace}" (403): needed to find kube-proxy's Pods`)
        throw new TransportUnavailable(`kube-proxy's Pods could not be listed: ${(e as Error).message}`)
      }
      if (found.kind === 'none') throw new TransportUnavailable(found.reason)
      return new KubeProxyNodeAccess(kubeConfig, found.pod, opts.timeoutMs)
    }
  },
} satisfies Record<string, TransportFactory>

export type TransportName = keyof typeof TRANSPORTS

export async function transportConnector(name: TransportName, opts: TransportOptions): Promise<NodeConnector> {
  const connect = await TRANSPORTS[name](opts)
  const log = opts.log
  if (!log) return connect
  return async (target) => {
    const startedAt = performance.now()
    try {
      const access = await connect(target)
      log(`${target.name} [${name} ${access.describe().address}] connected in ${((performance.now() - startedAt) / 1000).toFixed(2)}s`)
      return loggedAccess(access, target.name, log)
    } catch (e) {
      log(`${target.name} [${name}] not connected after ${((performance.now() - startedAt) / 1000).toFixed(2)}s: ${(e as Error).message}`)
      throw e
    }
  }
}

/**
 * Whether the OpenSSH config names a node: a Host pattern other than a bare `*` matches its name (a `Host *` block
 * holds defaults, not a way to the node). A config file given explicitly must exist.
 */
export async function sshConfigNames(sshConfig: string | undefined): Promise<(node: string) => boolean> {
  const {loadSshConfig, globToRegExp} = await import('./ssh-config.js')
  const blocks = loadSshConfig(sshConfig).slice(1)
  return (node) =>
    blocks.some((b) => {
      const positive = b.patterns.filter((p) => !p.startsWith('!') && p !== '*')
      const excluded = b.patterns.some((p) => p.startsWith('!') && globToRegExp(p.slice(1)).test(node))
      return !excluded && positive.some((p) => globToRegExp(p).test(node))
    })
}
