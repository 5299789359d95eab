import type {KubeConfig} from '@kubernetes/client-node'
import {DiagnosisError} from '../errors.js'
import type {NodeCollection} from '../node/read/collect-node.js'
import {notesOf, type NodeAccess} from '../node/transport/node-access.js'
import {mapBounded} from '../util/map-bounded.js'
import {
  autoOrder,
  transport,
  transportConnector,
  TransportUnavailable,
  type AccessOptions,
  type NodeConnector,
  type NodeTarget,
  type Via,
  type ViaTransport,
  VIA,
} from '../node/transport/transports.js'
import type {TransportName} from '../node/transport/transport-names.js'
import type {VerboseLog} from '../node/transport/logged-access.js'

export {VIA, type Via}

/** How one node was read (or why it was not), and why the other ways were not used: for the report. */
export interface NodeReadVia {
  /** The transport that read the node; null when the node was not read (API-only). */
  transport: TransportName | null
  /** Where: user@host:port, pod NAMESPACE/NAME. */
  address: string | null
  /** Why this way (or, for API-only, why no way). */
  why: string
  notUsed: Array<{transport: string; reason: string}>
  /** What this transport could not read on the node ("ipvsadm not in the kube-proxy image", …). */
  notRead: string[]
}

/** What the choice of ways needs besides the access options: the cluster's credentials and what the run says. */
export interface ChoiceContext {
  access: AccessOptions
  /** Per API call and per node step. */
  timeoutMs: number
  /** Loaded on first use (the Pod transports). */
  kubeConfig?: () => KubeConfig
  /** kubectl with the user's --kubeconfig and --context (a debug Pod's removal, printed). */
  kubectl: string[]
  /** Says, before anything is created, what the run will create in the cluster (stderr). */
  announce?: (line: string) => void
  log?: VerboseLog
}

export interface NodeReads {
  /** Each node read through a transport (read or failed); nodes left API-only are absent. */
  collected: Map<string, NodeCollection>
  readVia: Map<string, NodeReadVia>
  /** One line per RBAC refusal met (the verb and resource needed), per unchecked host key, per debug Pod left. */
  warnings: string[]
}

/** Reads one node through `connect`, the access of `transport`. */
type Collect = (name: string, connect: () => Promise<NodeAccess>, transport: TransportName) => Promise<NodeCollection>

/**
 * Picks each node's way in and reads it through `collect`, from the transport registry (node/transport/transports.ts):
 * `--via auto` tries the transports auto uses, in their order, each where it is offered for the node; a named --via
 * tries that one only; `none` reads no node. A transport whose failure is final (SSH, set up for the node by the user)
 * makes its failure the node's error; the others, when they do not exist for the node (no Pod, RBAC refuses, exec
 * refused), move on to the next way; with none left the node is API-only.
 */
export async function readNodesThrough(
  targets: NodeTarget[],
  ctx: ChoiceContext,
  collect: Collect,
): Promise<NodeReads> {
  const via = ctx.access.via
  for (const name of VIA) {
    const own = name === 'auto' || name === 'none' ? undefined : transport(name).ownOptions
    if (name !== via && own?.given(ctx.access))
      throw new DiagnosisError(`${own.flags.join(' and ')} are used only with --via ${name} (this run: --via ${via})`)
  }
  const candidates: ViaTransport[] = via === 'auto' ? autoOrder() : via === 'none' ? [] : [via]
  const connectors = new Map<ViaTransport, Promise<NodeConnector>>()
  const connector = (name: ViaTransport) => {
    let c = connectors.get(name)
    if (!c) {
      c = transportConnector(name, {
        access: ctx.access,
        timeoutMs: ctx.timeoutMs,
        kubeConfig: ctx.kubeConfig,
        kubectl: ctx.kubectl,
        nodes: targets.map((t) => t.name),
        announce: ctx.announce,
        log: ctx.log,
      }).catch((e: unknown) => {
        throw new DiagnosisError((e as Error).message, {cause: e})
      })
      connectors.set(name, c)
    }
    return c
  }
  // A way named by --via is made ready before any node is read: what it will create is said first.
  if (via !== 'auto' && via !== 'none' && targets.length > 0) await connector(via)
  const offered = new Map<ViaTransport, (node: string) => string | undefined>()
  if (via === 'auto')
    for (const name of candidates) {
      const auto = transport(name).auto
      if ('rank' in auto && auto.offered) offered.set(name, await offeredOrFail(auto.offered, ctx.access))
    }
  /** The ways auto would have tried that --via left out, each with the reason. */
  const skipped = (via === 'auto' ? [] : autoOrder().filter((t) => t !== via)).map((t) => ({
    transport: t,
    reason: `--via ${via}`,
  }))
  const warnings = new Set<string>()
  const collected = new Map<string, NodeCollection>()
  const readVia = new Map<string, NodeReadVia>()

  const readOne = async (target: NodeTarget) => {
    /** The ways tried (or not offered) for this node, with why they did not read it. */
    const tried: NodeReadVia['notUsed'] = []
    for (const [i, name] of candidates.entries()) {
      const row = transport(name)
      const notOffered = offered.get(name)?.(target.name)
      if (notOffered) {
        tried.push({transport: name, reason: notOffered})
        continue
      }
      let access: NodeAccess | undefined
      const open = async () => (access = await (await connector(name))(target))
      if (!row.failureIsFinal) {
        try {
          await open()
        } catch (e) {
          if (!(e instanceof TransportUnavailable)) throw e
          if (e.why.kind === 'forbidden') warnings.add(e.message)
          if (e.leftover) warnings.add(e.leftover)
          tried.push({transport: name, reason: e.message})
          continue
        }
      }
      const opened = access
      // collect closes the access (a debug Pod is deleted, or said not to be, before this returns).
      const result = await collect(target.name, opened ? async () => opened : open, name)
      const notes = access ? notesOf(access) : undefined
      for (const line of notes?.warnings ?? []) warnings.add(`${target.name}: ${line}`)
      for (const line of [...(notes?.refusals.map((r) => r.line) ?? []), ...(notes?.leftovers ?? [])])
        warnings.add(line)
      const execRefused = notes?.refusals.find((r) => r.resource === 'pods/exec')
      if (!result.observation.reachable && execRefused && !row.failureIsFinal) {
        tried.push({transport: name, reason: execRefused.line})
        continue
      }
      collected.set(target.name, result)
      const auto = row.auto
      const why =
        via === 'auto' && 'rank' in auto
          ? auto.picked(target.name, ctx.access)
          : `--via ${name}${notes?.origin ? ` (${notes.origin})` : ''}`
      const ahead = 'rank' in auto ? auto.ahead : ''
      readVia.set(target.name, {
        transport: name,
        address: access?.describe().address ?? null,
        why,
        notUsed: [...skipped, ...tried, ...candidates.slice(i + 1).map((t) => ({transport: t, reason: ahead}))],
        notRead: [...(notes?.missingTools ?? []), ...(notes?.refusals.map((r) => r.line) ?? [])],
      })
      return
    }
    readVia.set(target.name, {
      transport: null,
      address: null,
      why:
        via === 'none'
          ? 'API-only (--via none)'
          : `API-only: ${tried.map((n) => `${n.transport}: ${n.reason}`).join('; ')}`,
      notUsed: [...skipped, ...tried],
      notRead: [],
    })
  }

  await mapBounded(targets, Math.max(1, ctx.access.concurrency), readOne)
  return {collected, readVia, warnings: [...warnings]}
}

async function offeredOrFail(
  offered: (access: AccessOptions) => Promise<(node: string) => string | undefined>,
  access: AccessOptions,
): Promise<(node: string) => string | undefined> {
  try {
    return await offered(access)
  } catch (e) {
    throw new DiagnosisError((e as Error).message, {cause: e})
  }
}
