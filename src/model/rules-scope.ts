import type {V1Service} from '@kubernetes/client-node'
import type {ClusterState} from '../cluster/types.js'
import type {IptablesTable} from '../node/read/command-arguments.js'
import type {RulesScope} from '../node/read/scoped-rules.js'
import {endpointChainName, serviceChainNames, servicePortName, USERSPACE_MODE_CHAINS} from './chain-names.js'
import {expectedService, serviceFamilies} from './expected.js'

/**
 * The chains the dataplanes (iptables-dataplane.ts, ipvs-dataplane.ts, modes/) look up by name. A chain by chain read
 * reads them whether or not a rule jumps to them; test/unit/rules-scope.test.ts holds this list to the code's lookups.
 */
export const CHAINS_LOOKED_UP: ReadonlyArray<{table: IptablesTable; chain: string}> = [
  {table: 'nat', chain: 'KUBE-SERVICES'},
  {table: 'nat', chain: 'KUBE-NODEPORTS'},
  {table: 'nat', chain: 'KUBE-MARK-MASQ'},
  {table: 'nat', chain: 'KUBE-POSTROUTING'},
  {table: 'nat', chain: 'KUBE-NODE-PORT'},
  {table: 'filter', chain: 'KUBE-SERVICES'},
  {table: 'filter', chain: 'KUBE-EXTERNAL-SERVICES'},
  // checks/rules/proxy-mode.ts: leftovers of the userspace mode, jumped to or not.
  ...USERSPACE_MODE_CHAINS.map((chain) => ({table: 'nat' as const, chain})),
]

/**
 * What one Service's packets can carry, for reading only the chains they reach: every address it is sent to, its ports
 * and node ports, and the chains kube-proxy names after its ports (looked up by name too, jumped to or not).
 */
export function rulesScopeOf(svc: V1Service): RulesScope {
  const spec = svc.spec
  const namespace = svc.metadata?.namespace ?? 'default'
  const name = svc.metadata?.name ?? ''
  const addresses = [
    ...(spec?.clusterIPs ?? []),
    ...(spec?.clusterIP ? [spec.clusterIP] : []),
    ...(spec?.externalIPs ?? []),
    ...(spec?.loadBalancerIP ? [spec.loadBalancerIP] : []),
    ...(svc.status?.loadBalancer?.ingress ?? []).map((i) => i.ip ?? ''),
  ].filter((a) => a !== '' && a !== 'None')
  const ports = (spec?.ports ?? [])
    .flatMap((p) => [p.port, ...(p.nodePort ? [p.nodePort] : [])])
    .filter((p) => Number.isInteger(p))
  const own = (spec?.ports ?? []).flatMap((p) =>
    Object.values(serviceChainNames(servicePortName(namespace, name, p.name), p.protocol ?? 'TCP')),
  )
  return {
    addresses: [...new Set(addresses)],
    ports: [...new Set(ports)],
    chains: [...CHAINS_LOOKED_UP, ...[...new Set(own)].map((chain) => ({table: 'nat' as const, chain}))],
  }
}

/** kube-proxy's filter chains that the built-in ones (INPUT, FORWARD, OUTPUT) jump to. */
const FILTER_CHAINS_JUMPED_TO = ['KUBE-PROXY-FIREWALL', 'KUBE-NODEPORTS', 'KUBE-FORWARD', 'KUBE-FIREWALL']

/** At most this many endpoint chains predicted: a huge Service's are read as the jumps find them. */
const MAX_PREDICTED_ENDPOINT_CHAINS = 256

/**
 * The chains a chain by chain read will likely be sent to by the rules it reads (RulesScope.predicted): kube-proxy's
 * filter chains and the Service's KUBE-SEP chains, named by its endpoints as kube-proxy names them. Read in the first
 * round, they save the rounds the jumps would take (a round is an SSH command on every node).
 */
export function predictedChains(cluster: ClusterState): Array<{table: IptablesTable; chain: string}> {
  const endpointChains = new Set<string>()
  for (const {family} of serviceFamilies(cluster.service))
    for (const port of expectedService(cluster, '', family).ports)
      for (const ep of port.allEndpoints)
        endpointChains.add(endpointChainName(port.svcPortName, port.protocol, ep.address))
  return [
    ...FILTER_CHAINS_JUMPED_TO.map((chain) => ({table: 'filter' as const, chain})),
    ...[...endpointChains].slice(0, MAX_PREDICTED_ENDPOINT_CHAINS).map((chain) => ({table: 'nat' as const, chain})),
  ]
}

/** At most this many chains' counters are read around a node's probes (per family). */
const MAX_COUNTER_CHAINS = 64

/**
 * The nat chains a probe's first packet can cross on its way to the Service's addresses, per family of the Service:
 * kube-proxy's dispatch chains, the Service's own chains and its endpoints' (named as kube-proxy names them). Their rule
 * counters are read before and after the live probes; the nat table sees only a connection's first packet, so each
 * probe moves a rule once at most.
 */
export function counterChains(cluster: ClusterState): Array<{family: 4 | 6; table: 'nat'; chain: string}> {
  return serviceFamilies(cluster.service).flatMap(({family}) => {
    const chains = new Set(['KUBE-SERVICES', 'KUBE-NODEPORTS'])
    for (const port of expectedService(cluster, '', family).ports) {
      for (const chain of Object.values(serviceChainNames(port.svcPortName, port.protocol))) chains.add(chain)
      for (const ep of port.allEndpoints) chains.add(endpointChainName(port.svcPortName, port.protocol, ep.address))
    }
    return [...chains]
      .slice(0, MAX_COUNTER_CHAINS)
      .map((chain) => ({family: family === 'IPv6' ? (6 as const) : (4 as const), table: 'nat' as const, chain}))
  })
}
