import {Flags} from '@oclif/core'
import type {ClientFlags, LiveOptions} from '../diagnosis/live-options.js'
import {DiagnosisError} from '../errors.js'
import {VIA, type Via} from '../diagnosis/choose-transport.js'
import {PROXY_MODE_NAMES} from '../model/modes/index.js'
import {FAIL_ON_DEFAULT} from '../report/report.js'
import {stderrLine} from './stderr.js'
import {stderrLog} from './verbose-log.js'

const CLUSTER = 'CLUSTER'
const NODES = 'NODES'

/** Where the cluster is: the Kubernetes API (kubectl's spellings, so the kubectl plugin can hand them on). */
const CONTEXT = {description: 'kubeconfig context to use', helpGroup: CLUSTER}
const KUBECONFIG = {
  description: 'kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)',
  helpGroup: CLUSTER,
}
const SSH_CONFIG = {
  description: 'OpenSSH client config mapping node names to hosts (default ~/.ssh/config)',
  helpGroup: NODES,
}

const kubeFlags = {
  context: Flags.string(CONTEXT),
  kubeconfig: Flags.string(KUBECONFIG),
}

const namespaceFlag = {
  namespace: Flags.string({
    char: 'n',
    description: "namespace of the Service (default: the context's namespace, else default)",
    helpGroup: CLUSTER,
  }),
}

/** How nodes are reached over SSH. */
const sshFlags = {
  'ssh-config': Flags.string(SSH_CONFIG),
  timeout: Flags.integer({
    description: 'seconds allowed for each API call and each SSH step',
    default: 20,
    min: 1,
    helpGroup: NODES,
  }),
  'insecure-ignore-host-key': Flags.boolean({
    description: 'do not check SSH host keys against known_hosts (prints a warning)',
    default: false,
    helpGroup: NODES,
  }),
}

/** Which way nodes are read: SSH, kube-proxy's own Pod (pods/exec, pods/portforward), a debug Pod, or not at all. */
const viaFlags = {
  via: Flags.string({
    options: [...VIA],
    default: 'auto',
    description:
      "how nodes are read: auto = SSH where the SSH config names the node, else kube-proxy's Pod on it, else API-only; debug-pod (never picked by auto) creates a privileged Pod on each node and deletes it",
    helpGroup: NODES,
  }),
  'kube-proxy-namespace': Flags.string({
    description: "namespace of kube-proxy's Pods (the kube-proxy transport)",
    default: 'kube-system',
    helpGroup: NODES,
  }),
  'kube-proxy-selector': Flags.string({
    description: "label selector of kube-proxy's Pods (the kube-proxy transport)",
    default: 'k8s-app=kube-proxy',
    helpGroup: NODES,
  }),
  'debug-image': Flags.string({
    description: "image of the debug Pods (--via debug-pod; default: kube-proxy's, which the nodes already have)",
    helpGroup: NODES,
  }),
  'debug-namespace': Flags.string({
    description: 'namespace the debug Pods are created in (--via debug-pod; default kube-system)',
    helpGroup: NODES,
  }),
}

/** Which nodes are read. */
const nodeSelectionFlags = {
  nodes: Flags.string({
    description: 'read only these nodes (comma-separated)',
    helpGroup: NODES,
    exclusive: ['all-nodes'],
  }),
  'all-nodes': Flags.boolean({
    description: 'read every node, even on clusters over 50 nodes',
    default: false,
    helpGroup: NODES,
  }),
  concurrency: Flags.integer({description: 'nodes read at once', default: 8, min: 1, max: 64, helpGroup: NODES}),
}

/** Live probes from each node (svc): on by default, `--no-probe` gives the static diagnosis only. */
export const probeFlags = {
  probe: Flags.boolean({
    description:
      'open connect-and-close TCP probes from each node to the ClusterIP, NodePort and each endpoint (--no-probe: static diagnosis only)',
    default: true,
    allowNo: true,
    helpGroup: NODES,
  }),
}

/** -v/--verbose: what the run does, on stderr (the top-level `kproxy-doctor -v` stays the version). */
const verboseFlags = {
  verbose: Flags.boolean({
    char: 'v',
    description:
      'print on stderr every API request, every node command with its transport and duration, each mode decision and each ignored finding',
    default: false,
    helpGroup: 'OUTPUT',
  }),
}

/** The --verbose sink, when asked for. */
export function verboseLog(flags: {verbose?: boolean}): ((line: string) => void) | undefined {
  return flags.verbose ? stderrLog() : undefined
}

/** `--fail-on` (svc, scan): what fails the run; checked by report/report.ts parseFailOn. */
export const failOnFlag = {
  'fail-on': Flags.string({
    default: FAIL_ON_DEFAULT,
    description:
      'what fails the run, a comma list replacing the default: error (an error finding: exit 1), warning (a warning or an error: exit 1), incomplete (a required check could not run, e.g. no node read: exit 3), or none',
    helpGroup: 'DIAGNOSIS',
  }),
}

/** Flags shared by the commands that read a cluster and its nodes. */
export const clusterFlags = {
  ...namespaceFlag,
  ...kubeFlags,
  ...sshFlags,
  ...viaFlags,
  ...nodeSelectionFlags,
  ...verboseFlags,
}

/** --proxy-mode (svc, scan): the registry's modes. */
export const proxyModeFlag = (helpGroup?: string) => ({
  'proxy-mode': Flags.string({
    options: [...PROXY_MODE_NAMES],
    description: 'judge every node in this kube-proxy mode, whatever kube-proxy and the rules say',
    helpGroup,
  }),
})

/**
 * Flags for reading one node live (`trace --node`), the way `svc` reads it: where the cluster is, and the access flags
 * (--via and each way's own). Given without --node, they are an error, not ignored.
 */
export const nodeReadFlags = {
  context: Flags.string({...CONTEXT, dependsOn: ['node']}),
  kubeconfig: Flags.string({...KUBECONFIG, dependsOn: ['node']}),
  'ssh-config': Flags.string({...SSH_CONFIG, dependsOn: ['node']}),
  timeout: sshFlags.timeout,
  'insecure-ignore-host-key': sshFlags['insecure-ignore-host-key'],
  ...viaFlags,
}

/** --from, --from-namespace (svc): the client NetworkPolicies are judged for. */
export const clientFlags = {
  from: Flags.string({
    description:
      "the client Pod (NAMESPACE/POD, or a Pod of the Service's namespace): walk its packets from its node and judge NetworkPolicies for it; default: the doctor's own sources on every node, policies judged for any Pod of the Service's namespace and the nodes for NodePort traffic",
    helpGroup: 'DIAGNOSIS',
  }),
  'from-namespace': Flags.string({
    description: 'judge NetworkPolicies for any Pod of this namespace',
    helpGroup: 'DIAGNOSIS',
  }),
}

/** A Kubernetes object name (RFC 1123 subdomain), as a namespace or Pod name must be. */
const OBJECT_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/

/** --from and --from-namespace, checked: a name that cannot be a Pod's or a namespace's is one clear error. */
export function parseClientFlags(flags: {from?: string; 'from-namespace'?: string}): ClientFlags | undefined {
  const check = (flag: string, value: string, what: string) => {
    if (!OBJECT_NAME.test(value))
      throw new DiagnosisError(
        `--${flag} ${JSON.stringify(value)}: not a ${what} name (lower-case letters, digits, '-' and '.')`,
      )
    return value
  }
  let pod: ClientFlags['pod']
  if (flags.from !== undefined) {
    const parts = flags.from.split('/')
    if (parts.length > 2) throw new DiagnosisError(`--from ${JSON.stringify(flags.from)}: write POD or NAMESPACE/POD`)
    pod =
      parts.length === 2
        ? {namespace: check('from', parts[0], 'namespace'), name: check('from', parts[1], 'Pod')}
        : {name: check('from', parts[0], 'Pod')}
  }
  const namespace = flags['from-namespace'] && check('from-namespace', flags['from-namespace'], 'namespace')
  if (!pod && !namespace) return undefined
  return {...(pod ? {pod} : {}), ...(namespace ? {namespace} : {})}
}

/** The flags a walk of a dump file would ignore (oclif skips defaulted flags when checking exclusivity). */
export const NODE_READ_ONLY_FLAGS = ['node', ...Object.keys(nodeReadFlags)]

/** The flags that only matter when the cluster is read live: an error next to `--snapshot`, which would ignore them. */
export const LIVE_ONLY_FLAGS = [
  'context',
  'kubeconfig',
  'ssh-config',
  'timeout',
  'insecure-ignore-host-key',
  'all-nodes',
  'concurrency',
  ...Object.keys(viaFlags),
]

export function splitList(v: string | undefined): string[] | undefined {
  return v
    ? v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    : undefined
}

/** The flags a live run's options are made of (a command has those it takes; the others take their defaults). */
interface LiveFlags {
  namespace?: string
  kubeconfig?: string
  context?: string
  'ssh-config'?: string
  nodes?: string
  'all-nodes'?: boolean
  'insecure-ignore-host-key': boolean
  timeout: number
  concurrency?: number
  via?: string
  'kube-proxy-namespace'?: string
  'kube-proxy-selector'?: string
  'debug-image'?: string
  'debug-namespace'?: string
  'proxy-mode'?: string
  probe?: boolean
  'all-rules'?: boolean
  'kernel-trace'?: boolean
  'dry-run'?: boolean
  from?: string
  'from-namespace'?: string
}

/**
 * A live run's options, every group built here once from the flags: where the cluster is, how nodes are reached and
 * which, what is read on them (only the chains the Service's packets reach where the command has --all-rules and it
 * is off; collect reads every rule), whether they probe (--probe, svc), what the run says.
 */
export function liveOptions(
  flags: LiveFlags,
  output: Pick<LiveOptions['output'], 'log' | 'onProgress'> = {},
): LiveOptions {
  return {
    cluster: {
      namespace: flags.namespace,
      kubeconfig: flags.kubeconfig,
      context: flags.context,
      timeoutMs: flags.timeout * 1000,
      client: parseClientFlags(flags),
    },
    access: {
      via: (flags.via ?? 'auto') as Via,
      sshConfig: flags['ssh-config'],
      insecureIgnoreHostKey: flags['insecure-ignore-host-key'],
      kubeProxyNamespace: flags['kube-proxy-namespace'],
      kubeProxySelector: flags['kube-proxy-selector'],
      debugImage: flags['debug-image'],
      debugNamespace: flags['debug-namespace'],
      nodes: splitList(flags.nodes),
      allNodes: flags['all-nodes'],
      concurrency: flags.concurrency ?? 1,
    },
    reads: {proxyMode: flags['proxy-mode'], scopeRules: flags['all-rules'] === false},
    probes: {
      run: flags.probe ?? false,
      ...(flags['kernel-trace'] ? {kernelTrace: {dryRun: flags['dry-run'] ?? false}} : {}),
    },
    output: {
      log: output.log,
      onProgress: output.onProgress,
      announce: stderrLine,
    },
  }
}
