import type {V1Node} from '@kubernetes/client-node'
import {familyOf} from '../net/address.js'

/**
 * The node's InternalIP (else ExternalIP): where NodePorts are reached and the fallback SSH address; with a family,
 * the node's address of that family (a dual-stack node has one InternalIP per family). Only an IP address counts: the
 * kubelet writes these, and anything else (a host name, `-oProxyCommand=…`) is no address to connect to or print.
 */
export function nodeAddress(node: V1Node, family?: 4 | 6): string | undefined {
  const addrs = (node.status?.addresses ?? []).filter((a) => {
    const f = familyOf(a?.address)
    return f !== undefined && (family === undefined || f === family)
  })
  return addrs.find((a) => a.type === 'InternalIP')?.address ?? addrs.find((a) => a.type === 'ExternalIP')?.address
}
