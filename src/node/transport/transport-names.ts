/** Every way to reach a node, by its registry name (each one's factory is in transports.ts). */
export const TRANSPORT_NAMES = ['ssh', 'snapshot', 'kube-proxy', 'debug-pod'] as const

export type TransportName = (typeof TRANSPORT_NAMES)[number]

/** The transports that run the reads in a host-network Pod on the node, without a shell (pod-exec-transport.ts). */
export const POD_TRANSPORTS = ['kube-proxy', 'debug-pod'] as const satisfies readonly TransportName[]
