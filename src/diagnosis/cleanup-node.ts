import {DiagnosisError} from '../errors.js'
import {removeTraceTables} from '../node/probe/kernel-trace.js'
import {errorRecording} from '../node/read/node-files.js'
import {readNodesThrough} from './choose-transport.js'
import type {LiveOptions} from './live-options.js'
import {nodeAddress} from './node-address.js'
import {kubectlOf} from './reach.js'

/** What `cleanup` did on one node: the doctor's tables it deleted, those it could not (with why). */
export interface NodeCleanup {
  node: string
  removed: string[]
  failed: string[]
}

/**
 * Deletes every nftables table of the doctor's (--kernel-trace's, kpd_trace_*) on one node, whatever its age, reaching
 * the node the way `svc` would (--via and the access flags). Nothing else is touched; the commands are announced.
 */
export async function cleanupNodeLive(
  name: string,
  opts: Pick<LiveOptions, 'cluster' | 'access' | 'output'>,
): Promise<NodeCleanup> {
  const [{LiveClusterSource, loadKubeConfig}] = await Promise.all([import('../cluster/live-source.js')])
  const {kc} = loadKubeConfig(opts.cluster)
  const nodes = await new LiveClusterSource(kc, opts.cluster.timeoutMs).listNodes()
  const node = nodes.find((n) => n.metadata?.name === name)
  if (!node) throw new DiagnosisError(`node "${name}" not found in the cluster`)
  const announce = opts.output.announce ?? (() => undefined)
  let outcome: NodeCleanup | {error: string} = {error: 'not reached'}
  const reads = await readNodesThrough(
    [{name, address: nodeAddress(node)}],
    {
      access: opts.access,
      timeoutMs: opts.cluster.timeoutMs,
      kubeConfig: () => kc,
      kubectl: kubectlOf(opts.cluster),
      announce: opts.output.announce,
      log: opts.output.log,
    },
    async (node, connect) => {
      try {
        const access = await connect()
        try {
          const r = await removeTraceTables(access, (line) => announce(`${node}: ${line}`))
          outcome = 'error' in r ? r : {node, ...r}
        } finally {
          await access.close()
        }
      } catch (e) {
        outcome = {error: (e as Error).message.split('\n')[0]}
      }
      const error = 'error' in outcome ? outcome.error : undefined
      return {
        observation: {name: node, reachable: error === undefined, ...(error ? {error} : {})},
        recording: errorRecording(error ?? ''),
      }
    },
  )
  const done = outcome as NodeCleanup | {error: string}
  if ('error' in done) {
    const why = reads.collected.has(name) ? done.error : (reads.readVia.get(name)?.why ?? done.error)
    throw new DiagnosisError(`${name}: nothing removed: ${why}`)
  }
  return done
}
