import {join} from 'node:path'
import type {NodeAccess} from './node-access.js'

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
} satisfies Record<string, TransportFactory>

export type TransportName = keyof typeof TRANSPORTS

export function transportConnector(name: TransportName, opts: TransportOptions): Promise<NodeConnector> {
  return TRANSPORTS[name](opts)
}
