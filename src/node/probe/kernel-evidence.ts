import type {ConntrackEntry} from '../../parse/conntrack.js'
import {joinHostPort} from '../../net/host-port.js'
import {toolMissing} from '../node-commands.js'
import {NODE_READS} from '../read/node-reads.js'
import type {NodeAccess} from '../transport/node-access.js'

/** How a probe's connections were told apart from other traffic to the same address. */
export type MatchedBy = 'source-port' | 'time-window'

/** What came back on one connection, as the kernel's conntrack entry says. */
export type KernelAnswer = 'replied' | 'reset' | 'no reply'

/** One connection the kernel tracked for a probe: where its DNAT sent it and what came back. */
export interface KernelConnection {
  /** Where the kernel sent the connection: the reply tuple's source, host:port. */
  endpoint: string
  /** Whether the kernel translated the destination (false: the reply tuple answers from the address probed). */
  dnat: boolean
  answer: KernelAnswer
  /** The TCP state (TIME_WAIT, SYN_SENT, CLOSE…). */
  state: string | null
  /** The conntrack line itself. */
  text: string
}

/**
 * The kernel's record of the probes of one Service address from one node. A later netfilter trace adds the rules each
 * probe crossed to this same record.
 */
export interface TargetKernelEvidence {
  host: string
  port: number
  matchedBy: MatchedBy
  connections: KernelConnection[]
  /** Entries that fit beyond the number of probes made: other traffic to the address in the same seconds. */
  others: number
  /** Why this address's entries could not be read (the read failed or its output did not parse). */
  error?: string
}

/** The kernel evidence of one node's probes, or why there is none ("no conntrack tool on the node", "no root"). */
export type KernelEvidence = {read: true; targets: TargetKernelEvidence[]} | {read: false; reason: string}

/** A probed Service address: how many connections it made, and their source ports where the transport reports them. */
export interface ProbedAddress {
  host: string
  port: number
  attempts: number
  sourcePorts?: number[]
}

/**
 * The longest timeout each TCP state can have: the kernel's defaults, and kube-proxy's own settings where it changes
 * them (established 24 h, close_wait 1 h). The age of an entry is its state's timeout minus the seconds it has left.
 */
const STATE_TIMEOUTS: Readonly<Record<string, readonly number[]>> = {
  SYN_SENT: [120],
  SYN_SENT2: [120],
  SYN_RECV: [60],
  ESTABLISHED: [432000, 86400],
  FIN_WAIT: [120],
  CLOSE_WAIT: [60, 3600],
  LAST_ACK: [30],
  TIME_WAIT: [120],
  CLOSE: [10],
}

/** Timeouts count whole seconds: one more second of slack on each side of the window. */
const SLACK_SECONDS = 1

/** Whether the entry's last packet can have been seen within the last `seconds` (by its state's timeout). */
function withinWindow(e: ConntrackEntry, seconds: number): boolean {
  const limits = e.state ? STATE_TIMEOUTS[e.state] : undefined
  if (!limits) return false
  return limits.some((max) => e.timeout <= max && max - e.timeout <= seconds + SLACK_SECONDS)
}

function answerOf(e: ConntrackEntry): KernelAnswer {
  if (e.flags.includes('UNREPLIED')) return 'no reply'
  if (e.state === 'CLOSE' && !e.flags.includes('ASSURED')) return 'reset'
  return 'replied'
}

function connectionOf(e: ConntrackEntry): KernelConnection {
  return {
    endpoint: joinHostPort(e.reply.src, e.reply.sport ?? 0),
    dnat: e.dnatTarget !== undefined,
    answer: answerOf(e),
    state: e.state ?? null,
    text: e.text,
  }
}

/**
 * The entries of one probed address that are the probes' own: by source port where the transport reported them, else
 * every entry whose last packet falls within the seconds since the probes began (`elapsedMs`), the youngest first.
 */
export function matchProbeEntries(
  entries: ConntrackEntry[],
  probe: ProbedAddress,
  elapsedMs: number,
): Omit<TargetKernelEvidence, 'host' | 'port'> {
  const ours = entries.filter(
    (e) => e.protocol === 'tcp' && e.original.dst === probe.host && e.original.dport === probe.port,
  )
  if (probe.sourcePorts && probe.sourcePorts.length > 0) {
    const ports = new Set(probe.sourcePorts)
    return {
      matchedBy: 'source-port',
      connections: ours.filter((e) => e.original.sport !== undefined && ports.has(e.original.sport)).map(connectionOf),
      others: 0,
    }
  }
  const seconds = Math.ceil(elapsedMs / 1000)
  const fitting = ours.filter((e) => withinWindow(e, seconds))
  return {
    matchedBy: 'time-window',
    connections: fitting.map(connectionOf),
    others: Math.max(0, fitting.length - probe.attempts),
  }
}

const firstLine = (text: string) => text.trim().split('\n')[0] || 'no message'

/**
 * Right after a node's probes: the conntrack entries of each probed Service address (one allow-listed read each), matched
 * to the probes. `startedAt` is when the probes began (ms, the doctor's clock): the window entries must fall in.
 */
export async function readKernelEvidence(
  access: NodeAccess,
  probed: ProbedAddress[],
  startedAt: number,
  now: () => number = Date.now,
): Promise<KernelEvidence> {
  const targets: TargetKernelEvidence[] = []
  // All at once: one round of reads (one command over SSH), not one per address.
  const asked = now()
  const answers = await Promise.all(
    probed.map((probe) => access.run('conntrackProbe', {address: probe.host, port: probe.port})),
  )
  for (const [i, probe] of probed.entries()) {
    const r = answers[i]
    if (r.kind === 'not-recorded') return {read: false, reason: `conntrack not read: ${r.what}`}
    if (toolMissing(r)) return {read: false, reason: `no conntrack tool on the node (${firstLine(r.stderr)})`}
    if (r.code !== 0) {
      const why = firstLine(r.stderr)
      // Every address would fail alike: no root, sudo refusing, no conntrack support in the kernel.
      if (targets.length === 0) return {read: false, reason: `conntrack -L failed: ${why}`}
      targets.push({
        host: probe.host,
        port: probe.port,
        matchedBy: 'time-window',
        connections: [],
        others: 0,
        error: why,
      })
      continue
    }
    try {
      const entries = NODE_READS.conntrackProbe.parse(r.stdout.toString('utf8'))
      targets.push({host: probe.host, port: probe.port, ...matchProbeEntries(entries, probe, asked - startedAt)})
    } catch (e) {
      targets.push({
        host: probe.host,
        port: probe.port,
        matchedBy: 'time-window',
        connections: [],
        others: 0,
        error: (e as Error).message,
      })
    }
  }
  return {read: true, targets}
}
