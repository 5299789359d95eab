import type {ClusterState} from '../cluster/types.js'
import type {NodeObservation} from '../node/bundle.js'
import {mapBounded} from '../node/select-nodes.js'
import {probeOpener, probeTargets, type NodeProbes, type ProbeRun} from '../node/tcp-probe.js'
import type {NodeConnector} from '../node/transports.js'
import {nodeAddress} from './node-address.js'
import {planProbes, PROBE_SETTINGS} from './probe-plan.js'

/** Why probes did not run, in the words the report uses. */
export const PROBES_OFF: ProbeRun = {ran: false, reason: 'live probes are off (--no-probe): the diagnosis is static only'}
export const PROBES_SNAPSHOT: ProbeRun = {ran: false, reason: 'live probes are not run from a snapshot (it opens no connection): the diagnosis is static only'}

/**
 * Live probes, after the nodes are read: every readable node opens connect-and-close TCP connections from itself
 * (through its transport: an SSH direct-tcpip channel) to the Service's addresses and endpoints. Nothing is sent.
 */
export async function probeNodes(cluster: ClusterState, observations: NodeObservation[], connect: NodeConnector, opts: {timeoutMs: number; concurrency: number}): Promise<ProbeRun> {
  const settings = {...PROBE_SETTINGS, timeoutMs: Math.min(PROBE_SETTINGS.timeoutMs, opts.timeoutMs)}
  const readable = observations.filter((o) => o.reachable).map((o) => o.name)
  const notes = new Set<string>()
  const nodes = await mapBounded(readable, opts.concurrency, async (name): Promise<NodeProbes> => {
    const plan = planProbes(cluster, name, settings)
    for (const n of plan.notes) notes.add(n)
    const node = cluster.nodes.find((n) => n.metadata?.name === name)
    let access
    try {
      access = await connect({name, address: node && nodeAddress(node)})
    } catch (e) {
      return {node: name, via: 'nothing', error: (e as Error).message.split('\n')[0], tallies: []}
    }
    try {
      const tallies = await probeTargets(probeOpener(access, settings.timeoutMs), plan.targets, {attempts: settings.vipAttempts, timeoutMs: settings.timeoutMs, concurrency: settings.concurrency})
      return {node: name, via: access.describe().tcpVia, tallies}
    } finally {
      await access.close()
    }
  })
  return {ran: true, settings, nodes, notes: [...notes]}
}
