/**
 * How the user reaches the cluster and each node from their own shell, in their own terms (the kubectl flags they
 * gave, the SSH config and address the doctor connected with, the kube-proxy Pod a node was read through): checks ask
 * it for commands instead of formatting strings, so a printed command runs exactly as printed. The values are filled in
 * by the diagnosis from the flags actually used; unit tests get `DEFAULT_REACH`.
 */
import {transport, type ExecTransport} from '../node/transport/transports.js'
import {quoteWord, type Command} from './shell.js'

export type NodeWay =
  /** `ssh` and its arguments up to the host: `['ssh', '-F', FILE, 'node-a']`, `['ssh', '-p', '2222', 'root@10.0.0.7']`. */
  | {via: 'ssh'; ssh: string[]}
  /** Read through a Pod that stays (kube-proxy's): commands are `kubectl exec` into it, its transport's programs only. */
  | {via: ExecTransport; namespace: string; pod: string}
  /** Not reachable from the user's shell as far as the doctor knows: give prose. */
  | {via: 'none'}

export interface Reach {
  /** kubectl with the user's --kubeconfig and --context (never -n: each command names its namespace). */
  kubectl: string[]
  node(name: string): NodeWay
}

/** What a person runs on a node: the program and its arguments, whether it needs root, and a local filter. */
export interface NodeRead {
  argv: string[]
  sudo?: boolean
  /** A filter run locally on the output (`grep -- PATTERN`). */
  filter?: string[]
}

/** Without flags: kubectl's current context, `ssh NODE` with the user's SSH config. */
export const DEFAULT_REACH: Reach = {kubectl: ['kubectl'], node: (name) => ({via: 'ssh', ssh: ['ssh', name]})}

/**
 * The characters Kubernetes names (DNS labels and subdomains), kernel names (chains, sets, interfaces, sysctl keys)
 * and addresses use. A name outside them comes from a hostile or broken source: the command is withheld.
 */
const PLAIN = /^[A-Za-z0-9][A-Za-z0-9._:/@%+=,-]*$/

function plainNames(...names: Array<string | number | undefined | null>): boolean {
  return names.every((n) => n !== undefined && n !== null && PLAIN.test(String(n)))
}

/** `kubectl [--kubeconfig F] [--context C] [-n NS] ARGS…`, or undefined when a name is not plain. */
export function kubectlCommand(
  reach: Reach,
  namespace: string | null,
  args: string[],
  names: Array<string | number | undefined | null> = [],
): Command | undefined {
  if (!plainNames(...names) || (namespace !== null && !plainNames(namespace))) return undefined
  return [[...reach.kubectl, ...(namespace !== null ? ['-n', namespace] : []), ...args]]
}

/**
 * The command that runs `read` on `node` the way the user reaches it: over ssh (each remote word quoted for the remote
 * shell, sudo when it needs root), or `kubectl exec` into the Pod it was read through (root already); undefined when the node is
 * not reachable or a name is not plain.
 */
export function nodeCommand(
  reach: Reach,
  node: string,
  read: NodeRead,
  names: Array<string | number | undefined | null> = [],
): Command | undefined {
  if (!plainNames(node, ...names)) return undefined
  const way = reach.node(node)
  const filter = read.filter ? [read.filter] : []
  if (way.via === 'ssh')
    return [[...way.ssh, ...(read.sudo ? ['sudo', ...read.argv] : read.argv).map(quoteWord)], ...filter]
  if (way.via === 'none') return undefined
  // The Pod has only its image's programs (kube-proxy's: no ip, bridge, sysctl, curl, dig or ipvsadm).
  const reachRule = transport(way.via).reach
  return reachRule.by === 'exec' && reachRule.programs.includes(read.argv[0])
    ? [[...reach.kubectl, '-n', way.namespace, 'exec', way.pod, '--', ...read.argv], ...filter]
    : undefined
}
