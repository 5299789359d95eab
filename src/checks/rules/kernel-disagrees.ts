import type {Check, CheckContext, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import type {Entry, PathResult} from '../../model/paths.js'
import type {KernelConnection, MatchedBy, TargetKernelEvidence} from '../../node/probe/kernel-evidence.js'
import type {ServiceProbeTarget} from '../../node/probe/tcp-probe.js'
import {addressOf, probesRan, staticPathFor, type Tally} from './probe-evidence.js'
import type {KernelTraceRun} from '../../node/probe/kernel-trace.js'
import {compareTrace, type KernelRule} from './kernel-trace-walk.js'
import {probesThroughRules, targetCounters, type TargetCounters} from './kernel-counters.js'
import {familyOf} from '../../net/address.js'

/** What the kernel did with the probes of one Service address from one node, set against the walk of the same path. */
export interface KernelVerdict {
  node: string
  target: ServiceProbeTarget
  /** The walked path whose packet is the probe's (node→ClusterIP, outside→NodePort). */
  entry: Entry
  matchedBy: MatchedBy | null
  connections: KernelConnection[]
  /** Entries beyond the probes' own count: other traffic in the same seconds (evidence, not proof). */
  others: number
  /** Probes that left no entry: a connection whose only answer is a reset is removed from the table at once. */
  unrecorded: number
  /** --kernel-trace: the rules netfilter's trace says the probe's first packet matched (empty: no trace). */
  rules: KernelRule[]
  /** null: nothing to compare (no entry found, the read failed, the path not walked). */
  agreesWithWalk: boolean | null
  /** What each side saw, in a sentence. */
  detail: string
  /** Replayed from a bundle: when `collect --probe` recorded it (ISO 8601); absent for this run's own probes. */
  recordedAt?: string
  /** The rules of the walk the probes' packets moved, by the chains' counters (absent: the counters were not read). */
  counters?: TargetCounters
}

/** "10.244.1.5:8080 ×3 (replied), 10.244.2.11:8080 ×5 (no reply)": the kernel's choices, grouped. */
function describeConnections(connections: KernelConnection[]): string {
  const groups = new Map<string, number>()
  for (const c of connections) {
    const key = `${c.dnat ? c.endpoint : `${c.endpoint} untranslated`}\u0000${c.answer}`
    groups.set(key, (groups.get(key) ?? 0) + 1)
  }
  return [...groups]
    .map(([key, n]) => {
      const [where, answer] = key.split('\u0000')
      return `${where}${n > 1 ? ` ×${n}` : ''} (${answer})`
    })
    .join(', ')
}

/**
 * The endpoints the walk DNATs the path's new connections to, host:port, whatever happens to them after: the kernel
 * records its DNAT choice in conntrack before a filter chain drops the packet.
 */
function walkedEndpoints(p: PathResult): string[] {
  return [...new Set(p.trace.outcomes.flatMap((o) => (o.destination ? [o.destination] : [])))]
}

/** Of those, the endpoints every walked connection to which is dropped or rejected after its DNAT. */
function droppedAfterDnat(p: PathResult): string[] {
  const dropped = new Map<string, boolean>()
  for (const o of p.trace.outcomes)
    if (o.destination)
      dropped.set(
        o.destination,
        (dropped.get(o.destination) ?? true) && (o.verdict === 'DROP' || o.verdict === 'REJECT'),
      )
  return [...dropped].filter(([, d]) => d).map(([endpoint]) => endpoint)
}

/**
 * The conntrack verdict, and where --kernel-trace traced the probes, netfilter's own rule-by-rule way set against the
 * walk too: either side disagreeing is a disagreement, and the detail says what each saw.
 */
function judge(
  node: string,
  t: Tally,
  ev: TargetKernelEvidence,
  path: PathResult | undefined,
  trace: KernelTraceRun | undefined,
): KernelVerdict {
  const v = judgeConntrack(node, t, ev, path)
  if (!trace?.traced) return v
  const packets = trace.packets.filter((p) => p.daddr === ev.host && p.dport === ev.port)
  const c = compareTrace(packets, trace.table, path)
  const agreesWithWalk =
    v.agreesWithWalk === false || c.agrees === false ? false : (v.agreesWithWalk ?? c.agrees) === null ? null : true
  return {...v, rules: c.rules, agreesWithWalk, detail: `${v.detail}; ${c.detail}`}
}

function judgeConntrack(node: string, t: Tally, ev: TargetKernelEvidence, path: PathResult | undefined): KernelVerdict {
  const entry: Entry = path?.entry ?? (t.target.kind === 'NodePort' ? 'outside→NodePort' : 'node→ClusterIP')
  const unrecorded = ev.error ? 0 : Math.max(0, t.attempts - (ev.connections.length - ev.others))
  const base = {
    node,
    target: t.target,
    entry,
    matchedBy: ev.matchedBy,
    connections: ev.connections,
    others: ev.others,
    unrecorded,
    rules: [],
  }
  const busy =
    (ev.others > 0
      ? ` (${ev.connections.length} entries for ${t.attempts} probes: other traffic to the address is among them)`
      : '') +
    (unrecorded > 0 && ev.connections.length > 0
      ? `; ${unrecorded} of ${t.attempts} probes left no entry${t.refused > 0 ? ` (${t.refused} refused: the kernel removes an entry whose only answer is a reset, and with it its choice)` : ''}`
      : '')
  if (ev.error) return {...base, agreesWithWalk: null, detail: `conntrack entries not read: ${ev.error}`}
  if (ev.connections.length === 0)
    return {
      ...base,
      agreesWithWalk: null,
      detail: `no conntrack entry of the probes found (matched by ${ev.matchedBy})${t.refused > 0 ? `: ${t.refused} of ${t.attempts} were refused, and the kernel removes an entry whose only answer is a reset` : ''}`,
    }
  const chose = `the kernel sent ${describeConnections(ev.connections)}${busy}`
  if (!path) return {...base, agreesWithWalk: null, detail: `${chose}; the path was not walked`}
  const walked = walkedEndpoints(path)
  const translated = ev.connections.filter((c) => c.dnat)
  // Beyond the probes' own count, entries may be other clients' (allowed where the node's own packets are not): replies
  // from an endpoint count against the walk only when they outnumber the entries that may not be the probes'.
  const repliedFrom = (endpoints: string[]) =>
    endpoints.filter((e) => translated.filter((c) => c.answer === 'replied' && c.endpoint === e).length > ev.others)
  const walkSays =
    walked.length === 0
      ? `the walk says no new connection is DNATed (${path.breaksAt ? `breaks at ${path.breaksAt}: ` : ''}${path.detail})`
      : `the walk DNATs to ${walked.join(', ')}`
  if (walked.length === 0) {
    const replied = repliedFrom([...new Set(translated.map((c) => c.endpoint))])
    if (replied.length > 0) return {...base, agreesWithWalk: false, detail: `${walkSays}, but ${chose}`}
    return {...base, agreesWithWalk: true, detail: `${chose}; ${walkSays}`}
  }
  const outside = [...new Set(translated.filter((c) => !walked.includes(c.endpoint)).map((c) => c.endpoint))]
  if (outside.length > 0)
    return {
      ...base,
      agreesWithWalk: false,
      detail: `${walkSays}, but ${chose}: ${outside.join(', ')} ${outside.length > 1 ? 'are' : 'is'} not among them`,
    }
  // A NodePort probe is the node's own connection to its own address: it leaves through OUTPUT and never crosses the
  // FORWARD hook where the outside→NodePort walk may drop it after DNAT, so only the DNAT choice is comparable.
  const crossesWalkedHooks = t.target.kind !== 'NodePort'
  const droppedYetReplied = crossesWalkedHooks ? repliedFrom(droppedAfterDnat(path)) : []
  if (droppedYetReplied.length > 0)
    return {
      ...base,
      agreesWithWalk: false,
      detail: `the walk says new connections to ${droppedYetReplied.join(', ')} are dropped after their DNAT, but ${chose}`,
    }
  const untranslated = ev.connections.filter((c) => !c.dnat)
  // The walk's own untranslated share (a SEP chain without its DNAT, a drop before it) is no disagreement.
  const walkLeavesSome = path.trace.outcomes.some((o) => o.verdict !== 'DNAT' && o.probability > 0)
  if (untranslated.length > 0 && !walkLeavesSome)
    return {
      ...base,
      agreesWithWalk: false,
      detail: `${walkSays}, but the kernel did not translate ${untranslated.length} of the connections (${chose})`,
    }
  // An endpoint whose second half the walk says breaks on its node, yet the kernel saw its replies.
  const brokenHalves = path.remote.filter((h) => h.followed && h.ok === false).map((h) => h.endpoint)
  const answeredAnyway = repliedFrom([...new Set(brokenHalves)])
  if (answeredAnyway.length > 0)
    return {
      ...base,
      agreesWithWalk: false,
      detail: `the walk says the path to ${answeredAnyway.join(', ')} breaks on its node, but ${chose}`,
    }
  return {...base, agreesWithWalk: true, detail: `${chose}; ${walkSays}`}
}

/**
 * Every probed Service address with kernel evidence, set against the walk: the report's "Kernel evidence" and the
 * finding below read the same verdicts. A connection with no reply to an endpoint the walk chose too agrees: the
 * model is right, the backend is what the probe checks judge.
 */
export function kernelVerdicts(ctx: CheckContext): KernelVerdict[] {
  const run = probesRan(ctx)
  // A bundle's recorded probes give their kernel evidence only: the probe checks judge this run's own probes.
  const recorded = ctx.probes.ran ? undefined : ctx.probes.recorded
  const nodes = run?.nodes ?? recorded?.nodes ?? []
  const out: KernelVerdict[] = []
  for (const n of nodes) {
    if (!n.kernel?.read) continue
    const vips = n.tallies
      .filter((x) => x.target.kind !== 'endpoint')
      .map((x) => ({tally: x, path: staticPathFor(ctx, n.node, x.target)}))
    const through = probesThroughRules(vips.map((x) => ({attempts: x.tally.attempts, path: x.path})))
    for (const ev of n.kernel.targets) {
      const probed = vips.find((x) => x.tally.target.host === ev.host && x.tally.target.port === ev.port)
      if (!probed) continue
      const v = judge(n.node, probed.tally, ev, probed.path, n.kernelTrace)
      const counters = targetCounters(n.counters, probed.path, familyOf(ev.host) ?? 4, through)
      out.push({
        ...v,
        ...(counters ? {counters} : {}),
        ...(recorded?.recordedAt ? {recordedAt: recorded.recordedAt} : {}),
      })
    }
  }
  return out
}

/**
 * The kernel's conntrack entries of the live probes contradict the walk: the model (the rules as read, or the tracer)
 * is wrong on this path. Quiet where KPD-PROBE-CONTRADICTS already says the walk's "no connection works" is wrong for
 * the same address: one fault, one finding.
 */
export const kernelDisagrees: Check = {
  meta: codeEntry('KPD-KERNEL-DISAGREES'),
  run(ctx) {
    const out: FindingDraft[] = []
    for (const v of kernelVerdicts(ctx)) {
      if (v.agreesWithWalk !== false) continue
      const address = addressOf(v.target)
      if (
        ctx.findings.some((f) => f.code === 'KPD-PROBE-CONTRADICTS' && f.node === v.node && f.message.includes(address))
      )
        continue
      out.push({
        node: v.node,
        message: `${v.node}: ${v.target.kind} ${address} (${v.target.servicePort}, ${v.entry}): ${v.detail}${v.recordedAt ? ` (recorded at collection time, ${v.recordedAt})` : ''}`,
        text: `Run the diagnosis again: kube-proxy may have rewritten the rules since they were read. If it persists, compare the node's rules with the walk (kproxy-doctor svc … --explain) and the kernel's entries (conntrack -L -p tcp --orig-dst ${v.target.host} --orig-port-dst ${v.target.port}), and report the rule the tracer misreads.`,
        evidence: v.connections.map((c) => c.text),
      })
    }
    return out
  },
}
