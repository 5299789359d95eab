/**
 * Where a Pod transport reads a node, as the report names it: `pod NAMESPACE/NAME`. Written by the transport's
 * describe(); read back for the commands a person runs through the same Pod. Kept apart from the transport so that
 * reading it loads no API client.
 */
export function podAddress(pod: {namespace: string; name: string}): string {
  return `pod ${pod.namespace}/${pod.name}`
}

/** The Pod of an address podAddress wrote; undefined for any other address. */
export function podOfAddress(address: string | null): {namespace: string; name: string} | undefined {
  const m = /^pod ([^/\s]+)\/(\S+)$/.exec(address ?? '')
  return m ? {namespace: m[1], name: m[2]} : undefined
}
