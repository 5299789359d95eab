import type {KubeOptions} from '../cluster/live-source.js'
import type {PolicyClients} from '../cluster/types.js'
import type {VerboseLog} from '../node/transport/logged-access.js'
import type {AccessOptions} from '../node/transport/transports.js'

/**
 * Where the cluster is: kubectl's --kubeconfig and --context, how long each call may take (--timeout: per API call
 * and per node step), and the Service's namespace.
 */
export interface ClusterOptions extends KubeOptions {
  /** -n (default: the context's namespace, else default). */
  namespace?: string
  /** --from, --from-namespace: the client NetworkPolicies are judged for. */
  client?: ClientFlags
}

/** --from POD (NAMESPACE/POD, or a Pod of the Service's namespace) and --from-namespace NS, as given. */
export interface ClientFlags {
  pod?: {namespace?: string; name: string}
  namespace?: string
}

/** What is read on each node beyond the way in (svc): how much of its rules. */
interface ReadOptions {
  /** --proxy-mode: trusted over kube-proxy's /proxyMode when deciding how much of nft to read. */
  proxyMode?: string
  /** The mode kube-proxy's ConfigMap names, where the API was read first (see CollectOptions.configuredProxyMode). */
  configuredProxyMode?: string
  /** Read only the iptables chains the Service's packets can reach (svc); off: every node's whole dump (collect). */
  scopeRules?: boolean
}

/** Live probes from each node after it is read (svc). */
interface ProbeOptions {
  run: boolean
  /** --kernel-trace (svc): netfilter traces the probes' packets; dryRun: --dry-run, the commands are printed only. */
  kernelTrace?: {dryRun: boolean}
}

/** A step of a long run, reported through `onProgress`: the cli layer decides whether and how to show it. */
export type ProgressEvent =
  | {kind: 'node-read-started'; node: string; total: number}
  | {kind: 'node-read-finished'; node: string; ms: number; ok: boolean}
  | {kind: 'service-diagnosed'; service: string; index: number; total: number}

/** What the run says while it works (stderr); never written anywhere else. */
interface OutputOptions {
  /** --verbose: every API request and node operation. */
  log?: VerboseLog
  /** What the run will create in the cluster, said before it does. */
  announce?: (line: string) => void
  /** What the run has done so far (nodes read, Services diagnosed), for a progress line. */
  onProgress?: (e: ProgressEvent) => void
}

/**
 * A live run's options, in the groups its flags come in (cli/flags.ts builds them once from the flags): where the
 * cluster is, how nodes are reached (AccessOptions, with the transports), what is read on them, whether they probe,
 * and what the run says.
 */
export interface LiveOptions {
  cluster: ClusterOptions
  access: AccessOptions
  reads: ReadOptions
  probes: ProbeOptions
  output: OutputOptions
}

/** The clients to judge NetworkPolicies for: a --from Pod without a namespace is in the Service's. */
export function policyClients(flags: ClientFlags | undefined, serviceNamespace: string): PolicyClients {
  return {
    ...(flags?.pod ? {pod: {namespace: flags.pod.namespace ?? serviceNamespace, name: flags.pod.name}} : {}),
    ...(flags?.namespace ? {namespace: flags.namespace} : {}),
  }
}
