import type {Check} from './check.js'
import {dnatWrong} from './rules/dnat-wrong.js'
import {dnsNoAnswer, dnsNoEndpoints, dnsServiceMissing} from './rules/dns.js'
import {endpointMissing} from './rules/endpoint-missing.js'
import {endpointNotReady} from './rules/endpoint-not-ready.js'
import {endpointStale} from './rules/endpoint-stale.js'
import {hairpinOff, hairpinUnmapped} from './rules/hairpin.js'
import {hookMissing} from './rules/hook-missing.js'
import {masqueradeMissing} from './rules/masquerade-missing.js'
import {noReadyEndpoints} from './rules/no-ready-endpoints.js'
import {nodeDiverges} from './rules/node-diverges.js'
import {nodePortMissing} from './rules/nodeport-missing.js'
import {nodeUnreadable} from './rules/node-unreadable.js'
import {noImplementer, twoImplementers} from './rules/implementers.js'
import {
  ciliumBackendMissing,
  ciliumBackendNotReadyActive,
  ciliumBackendStale,
  ciliumFrontendMissing,
  ciliumNodeDiverges,
} from './rules/cilium.js'
import {notProxied} from './rules/not-proxied.js'
import {pathBroken, pathUndecided} from './rules/path-verdicts.js'
import {filterDrop} from './rules/filter-drop.js'
import {probabilityWrong} from './rules/probability-wrong.js'
import {affinityMismatch} from './rules/affinity.js'
import {proxyPodDown, proxyStuck, proxySyncFailures, proxyUnhealthy} from './rules/kube-proxy-health.js'
import {modeLeftover, modeMismatch, modeMixed, modeUnsupported} from './rules/proxy-mode.js'
import {ipvsIpsetMissing, ipvsScheduler, ipvsSysctl, ipvsVipUnbound, ipvsWeightZero} from './rules/ipvs.js'
import {rejectStale} from './rules/reject-stale.js'
import {selectorNoPods} from './rules/selector-no-pods.js'
import {targetPortNotExposed, targetPortUndeclared} from './rules/target-port.js'
import {serviceRuleMissing} from './rules/service-rule-missing.js'
import {vipFails} from './rules/vip-fails.js'
import {endpointCrossNode} from './rules/endpoint-cross-node.js'
import {backendRefused} from './rules/backend-refused.js'
import {probeContradicts} from './rules/probe-contradicts.js'
import {kernelDisagrees} from './rules/kernel-disagrees.js'
import {nodeForwardingOff} from './rules/node-forwarding.js'
import {bridgeNetfilterOff} from './rules/bridge-netfilter.js'
import {routeLocalnetOff} from './rules/route-localnet.js'
import {routeMissing} from './rules/route-missing.js'
import {conntrackStale} from './rules/conntrack-stale.js'
import {conntrackFull} from './rules/conntrack-full.js'
import {policyDenies, policyDnsEgress, policyEgressDenies, policyServicePort} from './rules/network-policy.js'
import {policyDataplaneDisagrees} from './rules/policy-dataplane.js'
import {anpDenies} from './rules/anp-denies.js'
import {banpDenies} from './rules/banp-denies.js'
import {anpSamePriority} from './rules/anp-same-priority.js'
import {anpAllows} from './rules/anp-allows.js'

/** Every check, in the order findings are listed: cluster facts first, then the packet path from hook to pod. */
export const CHECKS: Check[] = [
  notProxied,
  selectorNoPods,
  noReadyEndpoints,
  targetPortNotExposed,
  targetPortUndeclared,
  endpointNotReady,
  dnsServiceMissing,
  dnsNoEndpoints,
  nodeUnreadable,
  noImplementer,
  twoImplementers,
  ciliumFrontendMissing,
  ciliumBackendMissing,
  ciliumBackendStale,
  ciliumBackendNotReadyActive,
  ciliumNodeDiverges,
  modeMixed,
  modeUnsupported,
  modeMismatch,
  modeLeftover,
  proxyPodDown,
  proxyUnhealthy,
  proxyStuck,
  proxySyncFailures,
  hookMissing,
  serviceRuleMissing,
  rejectStale,
  nodePortMissing,
  endpointMissing,
  endpointStale,
  dnatWrong,
  probabilityWrong,
  affinityMismatch,
  ipvsWeightZero,
  ipvsVipUnbound,
  ipvsIpsetMissing,
  ipvsSysctl,
  ipvsScheduler,
  masqueradeMissing,
  hairpinOff,
  hairpinUnmapped,
  pathUndecided,
  nodeDiverges,
  filterDrop,
  nodeForwardingOff,
  bridgeNetfilterOff,
  routeLocalnetOff,
  routeMissing,
  conntrackStale,
  conntrackFull,
  // NetworkPolicy, judged from the API: the endpoint's ingress (the Service-port mistake before the plain denial), the
  // client's egress, its DNS.
  policyServicePort,
  policyDenies,
  policyEgressDenies,
  policyDnsEgress,
  // AdminNetworkPolicies and the baseline, where they decide instead of the NetworkPolicies.
  anpDenies,
  banpDenies,
  anpSamePriority,
  anpAllows,
  policyDataplaneDisagrees,
  // Last: it reads the findings above.
  pathBroken,
  // A DNS question without answer is evidence on the finding that breaks the path to the DNS endpoints, if one does.
  dnsNoAnswer,
  // Live probes, in the order a connection meets their faults: the source node's dataplane, the way to the
  // endpoint's node, the backend; then what contradicts the static diagnosis.
  vipFails,
  endpointCrossNode,
  backendRefused,
  probeContradicts,
  kernelDisagrees,
]
