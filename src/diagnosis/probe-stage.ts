import type {ClusterState} from '../cluster/types.js'
import type {NodeObservation} from '../node/observation.js'
import {mapBounded} from '../util/map-bounded.js'
import {probeOpener, probeTargets, type NodeProbes, type ProbeRun, type ProbeSettings} from '../node/probe/tcp-probe.js'
import type {NodeAccess} from '../node/transport/node-access.js'
import {readKernelEvidence, type KernelEvidence} from '../node/probe/kernel-evidence.js'
import {withKernelTrace} from '../node/probe/kernel-trace.js'
import type {TraceTuple} from '../node/kernel-trace-commands.js'
import {withRuleCounters, type CounterChain, type RuleCountersRun} from '../node/probe/rule-counters-read.js'
import {counterChains} from '../model/rules-scope.js'
import type {NodeConnector} from '../node/transport/transports.js'
import {nodeAddress} from './node-address.js'
import {planProbes, PROBE_SETTINGS, type ProbePlan} from './probe-plan.js'

/** Why probes did not run, in the words the report uses. */
export const PROBES_OFF: ProbeRun = {
  ran: false,
  reason: 'live probes are off (--no-probe): the diagnosis is static only',
}
export const PROBES_SNAPSHOT: Extract<ProbeRun, {ran: false}> = {
  ran: false,
  reason: 'live probes are not run from a snapshot (it opens no connection): the diagnosis is static only',
}

/** The probe settings of a run: the defaults, no probe waiting longer than one step. */
export function probeSettings(opts: {timeoutMs: number}): ProbeSettings {
  return {...PROBE_SETTINGS, timeoutMs: Math.min(PROBE_SETTINGS.timeoutMs, opts.timeoutMs)}
}

/** --kernel-trace: netfilter traces the probes' packets (dry run: the commands are printed only). */
export interface KernelTraceSettings {
  dryRun: boolean
  announce: (line: string) => void
}

/** One node's probes under way: the notes of its plan, and the tallies to come. */
export interface StartedProbes {
  notes: string[]
  probes: Promise<NodeProbes>
}

/**
 * Live probes: every readable node opens connect-and-close TCP connections from itself (through its transport: an SSH
 * direct-tcpip channel) to the Service's addresses and endpoints. Nothing is sent. A node whose probes already run on
 * its read's own connection (startProbes) has them in `started`; the others are connected to now.
 */
export async function probeNodes(
  cluster: ClusterState,
  observations: NodeObservation[],
  connect: NodeConnector,
  opts: {timeoutMs: number; concurrency: number},
  started: ReadonlyMap<string, StartedProbes> = new Map(),
  kernelTrace?: KernelTraceSettings,
): Promise<ProbeRun> {
  const settings = probeSettings(opts)
  const readable = observations.filter((o) => o.reachable).map((o) => o.name)
  const notes = new Set<string>()
  const nodes = await mapBounded(readable, opts.concurrency, async (name): Promise<NodeProbes> => {
    const early = started.get(name)
    if (early) {
      for (const n of early.notes) notes.add(n)
      return early.probes
    }
    const plan = planProbes(cluster, name, settings)
    for (const n of plan.notes) notes.add(n)
    const node = cluster.nodes.find((n) => n.metadata?.name === name)
    let access
    try {
      access = await connect({name, address: node && nodeAddress(node)})
    } catch (e) {
      const error = (e as Error).message.split('\n')[0]
      // No probe, nothing to trace: said in coverage where --kernel-trace was asked for.
      const untraced = kernelTrace && {
        traced: false as const,
        reason: `kernel trace not run: the node is not probed (${error})`,
      }
      return {node: name, via: 'nothing', error, tallies: [], ...(untraced ? {kernelTrace: untraced} : {})}
    }
    try {
      return await probePlan(plan, name, access, settings, counterChains(cluster), kernelTrace)
    } finally {
      await access.close()
    }
  })
  return {ran: true, settings, nodes, notes: [...notes]}
}

/** Starts one node's probes through an access already open (the read's own, while it reads: no second connection). */
export function startProbes(
  cluster: ClusterState,
  name: string,
  access: NodeAccess,
  settings: ProbeSettings,
  kernelTrace?: KernelTraceSettings,
): StartedProbes {
  const plan = planProbes(cluster, name, settings)
  return {notes: plan.notes, probes: probePlan(plan, name, access, settings, counterChains(cluster), kernelTrace)}
}

/** The longest the probes of a plan can take (every connection timing out), in whole seconds, and one more. */
function worstCaseSeconds(plan: ProbePlan, settings: ProbeSettings): number {
  const connections = plan.targets.reduce(
    (n, t) => n + (t.kind === 'endpoint' ? settings.endpointAttempts : settings.vipAttempts),
    0,
  )
  return Math.ceil((Math.ceil(connections / settings.concurrency) * settings.timeoutMs) / 1000) + 1
}

async function probePlan(
  plan: ProbePlan,
  name: string,
  access: NodeAccess,
  settings: ProbeSettings,
  chains: readonly CounterChain[],
  kernelTrace?: KernelTraceSettings,
): Promise<NodeProbes> {
  const startedAt = Date.now()
  const connect = () =>
    probeTargets(probeOpener(access, settings.timeoutMs), plan.targets, {
      attempts: settings.vipAttempts,
      timeoutMs: settings.timeoutMs,
      concurrency: settings.concurrency,
    })
  type Tallies = Awaited<ReturnType<typeof connect>>
  // The Service's own addresses only: a direct probe of an endpoint is not translated, there is no choice to confirm.
  const evidence = (tallies: Tallies) => {
    const vips = tallies.filter((t) => t.target.kind !== 'endpoint' && t.attempts > 0)
    return vips.length > 0
      ? readKernelEvidence(
          access,
          vips.map((t) => ({host: t.target.host, port: t.target.port, attempts: t.attempts})),
          startedAt,
        )
      : Promise.resolve(undefined)
  }
  // The counters of the chains on the Service's path, read right before and right after: which rules the probes moved.
  // Without a kernel trace, conntrack's entries of the probes are read beside the second read (one round of reads).
  const probesServiceAddresses = plan.targets.some((t) => t.kind !== 'endpoint')
  const beside = kernelTrace ? undefined : evidence
  const probe = (): Promise<{result: Tallies; counters?: RuleCountersRun; beside?: KernelEvidence}> =>
    probesServiceAddresses ? withRuleCounters(access, chains, connect, beside) : connect().then((result) => ({result}))
  // The Service's own addresses are traced (the endpoints' direct probes are not translated: nothing to confirm).
  const tuples = new Map<string, TraceTuple>()
  for (const t of plan.targets.filter((x) => x.kind !== 'endpoint')) {
    const key = `${t.host} ${t.port}`
    tuples.set(key, {
      address: t.host,
      port: t.port,
      connections: (tuples.get(key)?.connections ?? 0) + (t.attempts ?? settings.vipAttempts),
    })
  }
  const traced = kernelTrace
    ? await withKernelTrace(
        access,
        name,
        [...tuples.values()],
        {...kernelTrace, monitorSeconds: worstCaseSeconds(plan, settings)},
        probe,
      )
    : undefined
  const probed = traced ? traced.result : await probe()
  const {result: tallies, counters} = probed
  const kernel = beside && probesServiceAddresses ? probed.beside : await evidence(tallies)
  return {
    node: name,
    via: access.describe().tcpVia,
    tallies,
    ...(kernel ? {kernel} : {}),
    ...(counters ? {counters} : {}),
    ...(traced ? {kernelTrace: traced.trace} : {}),
  }
}
