import type {ClusterState} from '../cluster/types.js'
import {CHECKS} from '../checks/index.js'
import {toFinding, type CheckContext, type Finding, type NodeView} from '../checks/check.js'
import {expectedService} from '../model/expected.js'
import {chooseMode, looksLikeIpvs, type ProxyMode} from '../model/choose-mode.js'
import type {NodeObservation} from '../node/bundle.js'
import {tracePaths, type PathResult} from '../model/paths.js'
import {nodeAddress} from './node-address.js'

export interface Diagnosis {
  cluster: ClusterState
  context: CheckContext
  findings: Finding[]
  paths: PathResult[]
  ok: boolean
}

export interface DiagnoseOptions {
  /** Finding codes to leave out (silenced by the user). */
  ignore?: string[]
  /** --proxy-mode: trust this mode over what the node's rules say. */
  proxyMode?: ProxyMode
}

/** Model, trace, check: the one engine behind `svc`, live or from a snapshot. */
export function diagnose(cluster: ClusterState, observations: NodeObservation[], opts: DiagnoseOptions = {}): Diagnosis {
  const nodes: NodeView[] = []
  const paths: PathResult[] = []
  const unsupported: CheckContext['unsupported'] = []
  for (const obs of observations) {
    if (!obs.reachable) continue
    const k8sNode = cluster.nodes.find((n) => n.metadata?.name === obs.name)
    const choice = chooseMode(obs, cluster, k8sNode ? nodeAddress(k8sNode) : undefined, opts.proxyMode)
    if (!choice) {
      const ipvs = looksLikeIpvs(obs, cluster)
      if (ipvs) unsupported.push({node: obs.name, mode: 'ipvs', source: `${ipvs}; but no ipvsadm output was read`})
      continue
    }
    const expected = expectedService(cluster, obs.name)
    const dataplane = choice.dataplane
    const view: NodeView = {
      name: obs.name,
      mode: choice,
      address: k8sNode ? nodeAddress(k8sNode) : undefined,
      obs,
      dataplane,
      expected,
      programmed: expected.notProxied ? [] : dataplane.programmed(expected),
      infra: dataplane.infrastructure(),
    }
    nodes.push(view)
    paths.push(
      ...tracePaths({
        node: obs.name,
        address: view.address,
        k8sNode,
        dataplane,
        expected,
        network: obs.network,
        podIPsOnNode: cluster.pods.filter((p) => p.spec?.nodeName === obs.name && p.status?.podIP).map((p) => p.status!.podIP!),
      }),
    )
  }
  const context: CheckContext = {cluster, service: expectedService(cluster, ''), nodes, observations, paths, unsupported, findings: []}
  const ignore = new Set(opts.ignore ?? [])
  for (const c of CHECKS) {
    if (!ignore.has(c.meta.code)) context.findings.push(...c.run(context).map((d) => toFinding(c.meta, d)))
  }
  const findings = context.findings
  return {cluster, context, findings, paths, ok: !findings.some((f) => f.severity === 'error')}
}
