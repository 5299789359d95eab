/**
 * How the user reaches the cluster and each node from their own shell, in their own terms (the kubectl flags they
 * gave, the SSH config and address the doctor connected with, the kube-proxy Pod a node was read through): checks ask
 * it for commands instead of formatting strings, so a printed command runs exactly as printed. The values are filled in
 * by the diagnosis from the flags actually used; unit tests get `DEFAULT_REACH`.
 */
import {parseIp} from '../net/address.js'
import {transport, type ExecTransport} from '../node/transport/transports.js'
import {quoteWord, type Command} from './shell.js'

export type NodeWay =
  /**
   * `ssh` and its options (`['ssh']`, `['ssh', '-F', FILE]`), and the host: the name the user's SSH config gives the
   * node, or its address. Printed as `ssh OPTIONS -- HOST …`, and only when the host is an address or a host name.
   */
  | {via: 'ssh'; ssh: string[]; host: string}
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
export const DEFAULT_REACH: Reach = {kubectl: ['kubectl'], node: (name) => ({via: 'ssh', ssh: ['ssh'], host: name})}

/**
 * The characters Kubernetes names (DNS labels and subdomains), kernel names (chains, sets, interfaces, sysctl keys)
 * and addresses use. A name outside them comes from a hostile or broken source: the command is withheld.
 */
const PLAIN = /^[A-Za-z0-9][A-Za-z0-9._:/@%+=,-]*$/

/** A DNS name of letters, digits and inner hyphens per label (RFC 1123): what ssh can take as a host and nothing else. */
const HOST_NAME =
  /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/

/**
 * A host a printed `ssh` may name: a parsed IP address (no brackets, no zone) or a plain host name. A Node's address
 * is written by its kubelet: `-oProxyCommand=…` there would be an ssh option when pasted, and is refused here.
 */
export function isSshHost(host: string): boolean {
  if (typeof host !== 'string') return false
  if (HOST_NAME.test(host)) return true
  const ip = parseIp(host)
  return ip !== undefined && !host.startsWith('[')
}

/** A Kubernetes object name or namespace (a DNS subdomain): what a printed `kubectl exec` may name as its Pod. */
const KUBE_NAME = /^(?=.{1,253}$)[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?$/

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
  if (way.via === 'ssh') {
    if (!isSshHost(way.host)) return undefined
    // `--` ends ssh's options: the host and the remote words after it are never read as one.
    const remote = (read.sudo ? ['sudo', ...read.argv] : read.argv).map(quoteWord)
    return [[...way.ssh, '--', way.host, ...remote], ...filter]
  }
  if (way.via === 'none') return undefined
  // kubectl exec takes no `--` before the Pod (it would end the Pod's flags and start the command): the Pod and its
  // namespace are Kubernetes names, which never begin with `-`, or no command is printed.
  if (!KUBE_NAME.test(way.pod) || !KUBE_NAME.test(way.namespace)) return undefined
  // The Pod has only its image's programs (kube-proxy's: no ip, bridge, sysctl, curl, dig or ipvsadm).
  const reachRule = transport(way.via).reach
  return reachRule.by === 'exec' && reachRule.programs.includes(read.argv[0])
    ? [[...reach.kubectl, '-n', way.namespace, 'exec', way.pod, '--', ...read.argv], ...filter]
    : undefined
}
