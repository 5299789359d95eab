import type {V1ConfigMap} from '@kubernetes/client-node'

const DEFAULT_CLUSTER_DOMAIN = 'cluster.local'

export interface ClusterDomain {
  domain: string
  /** Where the domain was read, or why it is assumed. */
  source: string
}

const DNS_LABELS = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$/

/**
 * The zone CoreDNS answers Services for: the first zone of the Corefile's `kubernetes` plugin that is not a reverse
 * zone (`kubernetes cluster.local in-addr.arpa ip6.arpa {`). Undefined when the Corefile has no such zone.
 */
export function zoneFromCorefile(corefile: string): string | undefined {
  for (const raw of corefile.split('\n')) {
    const words = raw.replace(/#.*$/s, '').trim().split(/\s+/)
    if (words[0] !== 'kubernetes') continue
    for (const word of words.slice(1)) {
      if (word === '{') break
      const zone = word.toLowerCase().replace(/\.$/, '')
      if (zone.endsWith('.arpa') || !DNS_LABELS.test(zone)) continue
      return zone
    }
  }
  return undefined
}

/** The cluster domain: the user's choice, else CoreDNS's configuration, else the Kubernetes default, said as assumed. */
export function chooseClusterDomain(
  override: string | undefined,
  corednsConfigMap: V1ConfigMap | undefined,
  unreadReason?: string,
): ClusterDomain {
  if (override) return {domain: override.toLowerCase().replace(/\.$/, ''), source: '--cluster-domain'}
  const corefile = corednsConfigMap?.data?.Corefile
  const zone = corefile ? zoneFromCorefile(corefile) : undefined
  if (zone)
    return {
      domain: zone,
      source: `the kubernetes zone in ConfigMap ${corednsConfigMap?.metadata?.namespace}/${corednsConfigMap?.metadata?.name}`,
    }
  const why =
    unreadReason ?? (corednsConfigMap ? 'its Corefile has no kubernetes zone' : 'no CoreDNS ConfigMap in kube-system')
  return {domain: DEFAULT_CLUSTER_DOMAIN, source: `assumed, the Kubernetes default (${why})`}
}
