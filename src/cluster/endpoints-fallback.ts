import type {V1EndpointSlice, V1Endpoints} from '@kubernetes/client-node'

/** Turns a v1 Endpoints object into the EndpointSlice shape, for clusters without discovery.k8s.io/v1. */
export function slicesFromEndpoints(ep: V1Endpoints): V1EndpointSlice[] {
  const slices: V1EndpointSlice[] = []
  for (const [i, subset] of (ep.subsets ?? []).entries()) {
    const toEndpoint = (ready: boolean) => (a: NonNullable<typeof subset.addresses>[number]) => ({
      addresses: [a.ip],
      conditions: {ready, serving: ready, terminating: false},
      nodeName: a.nodeName,
      targetRef: a.targetRef,
    })
    slices.push({
      addressType: (subset.addresses?.[0]?.ip ?? subset.notReadyAddresses?.[0]?.ip ?? '').includes(':')
        ? 'IPv6'
        : 'IPv4',
      metadata: {
        name: `${ep.metadata?.name}-endpoints-${i}`,
        namespace: ep.metadata?.namespace,
        labels: {'kubernetes.io/service-name': ep.metadata?.name ?? ''},
      },
      endpoints: [
        ...(subset.addresses ?? []).map(toEndpoint(true)),
        ...(subset.notReadyAddresses ?? []).map(toEndpoint(false)),
      ],
      ports: (subset.ports ?? []).map((p) => ({name: p.name, port: p.port, protocol: p.protocol})),
    })
  }
  return slices
}
