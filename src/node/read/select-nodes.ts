import type {V1Node} from '@kubernetes/client-node'
import {DiagnosisError} from '../../errors.js'

const ALL_NODES_LIMIT = 50
const SAMPLE_SIZE = 5

export interface NodeSelection {
  names: string[]
  /** Said in the report when not every node is read. */
  note?: string
}

/**
 * Every node up to ALL_NODES_LIMIT nodes; beyond, the nodes hosting endpoints plus the first SAMPLE_SIZE others
 * by name (a stable sample, so two runs read the same nodes). --nodes and --all-nodes override.
 */
export function selectNodes(
  nodes: V1Node[],
  endpointNodes: Set<string>,
  opts: {only?: string[]; all?: boolean},
): NodeSelection {
  const names = nodes
    .map((n) => n.metadata?.name ?? '')
    .filter(Boolean)
    .sort()
  if (opts.only && opts.only.length > 0) {
    const unknown = opts.only.filter((n) => !names.includes(n))
    if (unknown.length > 0)
      throw new DiagnosisError(
        `--nodes names unknown node(s): ${unknown.join(', ')} (cluster has ${names.slice(0, 10).join(', ')}${names.length > 10 ? ', …' : ''})`,
      )
    return {names: opts.only}
  }
  if (opts.all || names.length <= ALL_NODES_LIMIT) return {names}
  const hosting = names.filter((n) => endpointNodes.has(n))
  const others = names.filter((n) => !endpointNodes.has(n)).slice(0, SAMPLE_SIZE)
  return {
    names: [...hosting, ...others],
    note: `read ${hosting.length + others.length} of ${names.length} nodes: the ${hosting.length} hosting endpoints and ${others.length} others (use --all-nodes or --nodes)`,
  }
}
