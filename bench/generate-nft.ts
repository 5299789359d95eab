import {kubeProxyNftRules} from '../test/fixtures/kube-proxy-nft.js'
import {benchCluster, CLUSTER_CIDR, NODE} from './generate.js'

/**
 * The `nft -f` input kube-proxy's nftables mode writes for `services` ClusterIP Services × 10 endpoints in namespace
 * "bench" (the lab's generator, test/fixtures/kube-proxy-nft.ts, on the bench's cluster: table ip kube-proxy, the
 * service-ips map with its element comments, one service chain and one chain per endpoint).
 */
export function generateNftRuleset(services: number): string {
  const cluster = benchCluster(services)
  return kubeProxyNftRules(NODE, cluster.services, cluster.pods, {}, 4, {clusterCidr: CLUSTER_CIDR})
}
