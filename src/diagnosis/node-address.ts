import type {V1Node} from '@kubernetes/client-node'

/** The node's InternalIP (else ExternalIP): where NodePorts are reached and the fallback SSH address. */
export function nodeAddress(node: V1Node): string | undefined {
  const addrs = node.status?.addresses ?? []
  return addrs.find((a) => a.type === 'InternalIP')?.address ?? addrs.find((a) => a.type === 'ExternalIP')?.address
}
