import type {NodeObservation} from '../node/observation.js'
import type {Dataplane, ModeVocabulary, ProgrammedPort} from './dataplane.js'
import type {ExpectedService} from './expected.js'
import {IPVS_VOCABULARY, ipvsPrograms} from './ipvs-dataplane.js'

/** kube-router's words for the steps of the path it programs (its service proxy: IPVS behind kube-dummy-if). */
const KUBE_ROUTER_VOCABULARY: ModeVocabulary = {
  ...IPVS_VOCABULARY,
  mode: 'kube-router (IPVS)',
  steps: {
    ...IPVS_VOCABULARY.steps,
    entry: "the Service addresses on kube-router's kube-dummy-if (delivered locally to IPVS)",
    'service-match': 'kube-router IPVS',
    'nodeport-match': 'kube-router IPVS',
    'external-policy': "kube-router's virtual servers of the externalIPs and LoadBalancer IPs",
    masquerade: "kube-router's masquerade rules",
  },
}

/** The annotation that asks kube-router for direct server return: fwmark virtual services for the external addresses. */
const DSR_ANNOTATION = 'kube-router.io/service.dsr'
/** The annotation that keeps kube-router from serving the LoadBalancer IPs. */
const SKIP_LB_ANNOTATION = 'kube-router.io/service.skiplbips'

/**
 * A node whose Services kube-router's service proxy serves, its IPVS state read: what the IPVS engine finds there for
 * the Service (the same virtual and real servers kube-proxy's IPVS mode is judged by), and what was left unjudged.
 */
export interface KubeRouterNodeView {
  name: string
  by: 'kube-router'
  expected: ExpectedService
  programmed: ProgrammedPort[]
  dataplane: Pick<Dataplane, 'vocab' | 'show'>
  /** The Service's addresses whose virtual servers were not judged here, and why (fwmark services of DSR). */
  unjudged: string[]
}

/**
 * kube-router on `obs`'s node for the Service: its ClusterIP, NodePort (on the node's address), externalIP and
 * LoadBalancer virtual servers and their real servers, read by the IPVS engine. With DSR the external addresses are
 * fwmark services (`FWM <mark>`, tied to the address by a mangle rule): not judged, and said so.
 */
export function kubeRouterNodeView(
  service: ExpectedService,
  annotations: Record<string, string>,
  obs: NodeObservation,
  nodeAddress: string | undefined,
  family: 4 | 6,
): KubeRouterNodeView {
  const ipvs = ipvsPrograms(obs.ipvs!, nodeAddress, obs.name, family)
  const dsr = annotations[DSR_ANNOTATION] !== undefined
  const skipLb = annotations[SKIP_LB_ANNOTATION] !== undefined
  const external = dsr ? [...service.externalIPs, ...(skipLb ? [] : service.loadBalancerIPs)] : []
  const expected: ExpectedService = {
    ...service,
    externalIPs: dsr ? [] : service.externalIPs,
    loadBalancerIPs: dsr || skipLb ? [] : service.loadBalancerIPs,
  }
  return {
    name: obs.name,
    by: 'kube-router',
    expected,
    programmed: ipvs.programmed(expected),
    dataplane: {vocab: KUBE_ROUTER_VOCABULARY, show: ipvs.show},
    unjudged: external.map(
      (ip) =>
        `${ip}: a fwmark virtual service (${DSR_ANNOTATION}), tied to the address by kube-router's mangle rules, which the doctor does not read`,
    ),
  }
}
