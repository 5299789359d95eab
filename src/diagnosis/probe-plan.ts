import type {ClusterState} from '../cluster/types.js'
import {expectedService, serviceFamilies} from '../model/expected.js'
import {familyOf} from '../net/address.js'
import type {NodeProbes, ProbeRun, ProbeSettings, ServiceProbeTarget} from '../node/probe/tcp-probe.js'
import {nodeAddress} from './node-address.js'
import {compareNames} from '../model/name-order.js'

/**
 * How hard each node probes. A Service address gets 8 connections: each lands on an endpoint kube-proxy picks at
 * random, so with 3 endpoints one bad one shows in 1 - (2/3)^8 = 96% of runs; each endpoint gets 3 direct connections
 * (they all reach the same Pod, so 3 tell a dead backend from a lost SYN). A connection that has not opened within
 * 1.5 s counts as timed out (a SYN retransmit takes 1 s). At most 8 connections are in flight per node.
 */
export const PROBE_SETTINGS: ProbeSettings = {vipAttempts: 8, endpointAttempts: 3, timeoutMs: 1500, concurrency: 8}

/** Endpoints probed directly per service port and node; beyond, the first ones by address (the report says so). */
const MAX_ENDPOINTS_PER_PORT = 32

export interface ProbePlan {
  targets: ServiceProbeTarget[]
  notes: string[]
}

/**
 * What one node probes for the Service, in every family it has (a dual-stack Service's IPv6 addresses too): for each
 * TCP port its ClusterIP:port, its NodePort on the node's own address of that family, and each ready endpoint's
 * IP:port directly. UDP and SCTP ports are not probed (a connect proves nothing there).
 */
export function planProbes(
  cluster: ClusterState,
  nodeName: string,
  settings: ProbeSettings = PROBE_SETTINGS,
): ProbePlan {
  const families = serviceFamilies(cluster.service).map((f) => f.family)
  const targets: ServiceProbeTarget[] = []
  const notes: string[] = []
  const node = cluster.nodes.find((n) => n.metadata?.name === nodeName)
  for (const family of families.length > 0 ? families : [undefined]) {
    const svc = expectedService(cluster, nodeName, family)
    if (svc.notProxied || !svc.clusterIP) continue
    const address = node ? nodeAddress(node, familyOf(svc.clusterIP)) : undefined
    const label = families.length > 1 ? ` (${family})` : ''
    for (const port of svc.ports) {
      if (port.protocol !== 'tcp') continue
      const servicePort = port.portName || String(port.port)
      targets.push({
        kind: 'ClusterIP',
        host: svc.clusterIP,
        port: port.port,
        attempts: settings.vipAttempts,
        servicePort,
      })
      if (port.nodePort && address)
        targets.push({
          kind: 'NodePort',
          host: address,
          port: port.nodePort,
          attempts: settings.vipAttempts,
          servicePort,
        })
      const ready = port.allEndpoints.filter((e) => e.ready).sort((a, b) => compareNames(a.address, b.address))
      if (ready.length > MAX_ENDPOINTS_PER_PORT)
        notes.push(
          `port ${servicePort}${label}: ${MAX_ENDPOINTS_PER_PORT} of its ${ready.length} ready endpoints were probed directly (the first by address)`,
        )
      for (const e of ready.slice(0, MAX_ENDPOINTS_PER_PORT))
        targets.push({
          kind: 'endpoint',
          host: e.ip,
          port: e.port,
          attempts: settings.endpointAttempts,
          servicePort,
          pod: e.podName,
          podNode: e.nodeName,
        })
    }
  }
  return {targets, notes}
}

/** The part of a probe run that concerns one address family's targets (a dual-stack Service is judged per family). */
export function probesOfFamily(run: ProbeRun, family: 4 | 6): ProbeRun {
  const ofFamily = (nodes: NodeProbes[]) =>
    nodes.map((n) => ({...n, tallies: n.tallies.filter((t) => familyOf(t.target.host) === family)}))
  if (!run.ran) return run.recorded ? {...run, recorded: {...run.recorded, nodes: ofFamily(run.recorded.nodes)}} : run
  return {...run, nodes: ofFamily(run.nodes)}
}
