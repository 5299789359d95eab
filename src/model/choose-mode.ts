import type {ClusterState} from '../cluster/types.js'
import type {Dataplane} from './dataplane.js'
import {iptablesDataplane} from './iptables-dataplane.js'
import {nftDataplane} from './nft-dataplane.js'
import {ipvsDataplane} from './ipvs-dataplane.js'
import type {NodeObservation} from '../node/bundle.js'

export type ProxyMode = 'iptables' | 'nftables' | 'ipvs'

export interface ModeChoice {
  mode: ProxyMode
  /** What decided it, for the report. */
  source: string
  dataplane: Dataplane
  /** Rules of the other mode found on the node too (leftovers), described. */
  leftovers: string[]
}

function configured(cluster: ClusterState): 'iptables' | 'nftables' | undefined {
  const m = cluster.proxyConfig.mode
  return m === 'nftables' ? 'nftables' : m === 'iptables' || m === '' ? 'iptables' : undefined
}

/** IPVS mode, by kube-proxy's word, its configuration, or its iptables glue (KUBE-NODE-PORT, KUBE-CLUSTER-IP set). */
export function looksLikeIpvs(obs: NodeObservation, cluster: ClusterState): string | undefined {
  if (obs.kubeProxy?.proxyMode === 'ipvs') return "kube-proxy's /proxyMode on the node"
  if (obs.kubeProxy?.proxyMode) return undefined
  const d = obs.iptables
  if (d?.hasChain('nat', 'KUBE-NODE-PORT') || d?.rules('nat', 'KUBE-SERVICES').some((r) => r.text.includes('KUBE-CLUSTER-IP'))) return 'the rules on the node (KUBE-CLUSTER-IP ipset match)'
  if (cluster.proxyConfig.mode === 'ipvs' && !d?.hasChain('nat', 'KUBE-SERVICES') && !obs.nft?.table('ip kube-proxy')) return cluster.proxyConfig.source
  return undefined
}

/**
 * Which of kube-proxy's modes a node runs: the mode whose rules are on the node; when both or neither are, the
 * configured one (kube-proxy's ConfigMap; iptables when unset). `override` (--proxy-mode) wins.
 */
export function chooseMode(obs: NodeObservation, cluster: ClusterState, nodeAddress: string | undefined, override?: ProxyMode): ModeChoice | undefined {
  const ipvsSource = override === 'ipvs' ? '--proxy-mode' : override ? undefined : looksLikeIpvs(obs, cluster)
  if (ipvsSource) {
    if (!obs.ipvs || !obs.iptables) return undefined
    const leftovers: string[] = []
    if (obs.iptables.chainNames('nat').some((c) => c.startsWith('KUBE-SVC-'))) leftovers.push('KUBE-SVC-* chains from iptables mode')
    if (obs.nft?.table('ip kube-proxy')) leftovers.push('nftables table ip kube-proxy from nftables mode')
    return {mode: 'ipvs', source: ipvsSource, dataplane: ipvsDataplane(obs.iptables, obs.ipvs, nodeAddress, obs.name), leftovers}
  }
  const family = (cluster.service.spec?.clusterIP ?? '').includes(':') ? 'ip6' : 'ip'
  const hasIptables = !!obs.iptables?.hasChain('nat', 'KUBE-SERVICES')
  const hasNft = !!obs.nft?.table(`${family} kube-proxy`)?.chains.get('services')
  const wanted = configured(cluster)
  let mode: 'iptables' | 'nftables'
  let source: string
  const reported = obs.kubeProxy?.proxyMode
  if (override) [mode, source] = [override as 'iptables' | 'nftables', '--proxy-mode']
  else if (reported === 'iptables' || reported === 'nftables') [mode, source] = [reported, "kube-proxy's /proxyMode on the node"]
  else if (hasIptables !== hasNft) [mode, source] = [hasNft ? 'nftables' : 'iptables', 'the rules on the node']
  else [mode, source] = [wanted ?? 'iptables', wanted ? cluster.proxyConfig.source : 'default (iptables)']
  if (mode === 'nftables' && !obs.nft) return undefined
  if (mode === 'iptables' && !obs.iptables) return undefined
  const leftovers: string[] = []
  if (mode === 'nftables' && hasIptables) leftovers.push('iptables chains nat KUBE-SERVICES (and its KUBE-SVC/KUBE-SEP chains) from iptables mode')
  if (mode === 'iptables' && hasNft) leftovers.push(`nftables table ${family} kube-proxy from nftables mode`)
  const dataplane = mode === 'nftables' ? nftDataplane(obs.nft!, family) : iptablesDataplane(obs.iptables!)
  return {mode, source, dataplane, leftovers}
}
