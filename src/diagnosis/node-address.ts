import type {V1Node} from '@kubernetes/client-node'
import {familyOf} from '../net/address.js'

/**
 * The node's InternalIP (else ExternalIP): where NodePorts are reached and the fallback SSH address; with a family,
 * the node's address of that family (a dual-stack node has one InternalIP per family).
 */
export function nodeAddress(node: V1Node, family?: 4 | 6): string | undefined {
  const addrs = (node.status?.addresses ?? []).filter((a) => family === undefined || familyOf(a.address) === family)
  return addrs.find((a) => a.type === 'InternalIP')?.address ?? addrs.find((a) => a.type === 'ExternalIP')?.address
}
