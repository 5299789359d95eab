import {Flags} from '@oclif/core'
import type {LiveOptions} from '../diagnosis/gather.js'

/** Flags shared by the commands that read a cluster and its nodes. */
export const clusterFlags = {
  namespace: Flags.string({char: 'n', description: "namespace of the Service (default: the context's namespace, else default)"}),
  context: Flags.string({description: 'kubeconfig context to use'}),
  kubeconfig: Flags.string({description: 'kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)'}),
  'ssh-config': Flags.string({description: 'OpenSSH client config mapping node names to hosts (default ~/.ssh/config)'}),
  nodes: Flags.string({description: 'read only these nodes (comma-separated)'}),
  'all-nodes': Flags.boolean({description: 'read every node, even on clusters over 50 nodes', default: false}),
  timeout: Flags.integer({description: 'seconds allowed for each API call and each SSH step', default: 20, min: 1}),
  concurrency: Flags.integer({description: 'nodes read at once', default: 8, min: 1, max: 64}),
  'insecure-ignore-host-key': Flags.boolean({description: 'do not check SSH host keys against known_hosts (prints a warning)', default: false}),
}

export function splitList(v: string | undefined): string[] | undefined {
  return v
    ? v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    : undefined
}

/** Prints a one-line error and sets exit code 2: the diagnosis could not be made. */
export function failWith(err: unknown): void {
  const message = err instanceof Error ? err.message : String(err)
  process.stderr.write(`kproxy-doctor: ${message.split('\n')[0]}\n`)
  process.exitCode = 2
}

/** The live-read options every cluster command takes from its flags. */
export function liveOptions(
  name: string,
  flags: {
    namespace?: string
    kubeconfig?: string
    context?: string
    'ssh-config'?: string
    nodes?: string
    'all-nodes': boolean
    'insecure-ignore-host-key': boolean
    timeout: number
    concurrency: number
  },
): LiveOptions {
  return {
    name,
    namespace: flags.namespace,
    kubeconfig: flags.kubeconfig,
    context: flags.context,
    sshConfig: flags['ssh-config'],
    nodes: splitList(flags.nodes),
    allNodes: flags['all-nodes'],
    insecureIgnoreHostKey: flags['insecure-ignore-host-key'],
    timeoutMs: flags.timeout * 1000,
    concurrency: flags.concurrency,
  }
}
