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
  /** Each transport's connector (default: the registry's, transportConnector; a stand-in in tests). */
  connectorOf?: typeof transportConnector
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

/** The ways in of one run: each transport's connector and each auto way's offer, made once on first use. */
class Ways {
  private readonly connectors = new Map<ViaTransport, Promise<NodeConnector>>()
  private readonly offers = new Map<ViaTransport, Promise<(node: string) => string | undefined>>()

  constructor(
    private readonly ctx: ChoiceContext,
    private readonly nodes: string[],
  ) {}

  connector(name: ViaTransport): Promise<NodeConnector> {
    let c = this.connectors.get(name)
    if (!c) {
      c = (this.ctx.connectorOf ?? transportConnector)(name, {
        access: this.ctx.access,
        timeoutMs: this.ctx.timeoutMs,
        kubeConfig: this.ctx.kubeConfig,
        kubectl: this.ctx.kubectl,
        nodes: this.nodes,
        announce: this.ctx.announce,
        log: this.ctx.log,
      }).catch((e: unknown) => {
        throw new DiagnosisError((e as Error).message, {cause: e})
      })
      this.connectors.set(name, c)
    }
    return c
  }

  /** Whether auto tries `name` for a node (undefined: yes), for a transport auto decides per node. */
  offered(name: ViaTransport, offered: OfferedFor): Promise<(node: string) => string | undefined> {
    let o = this.offers.get(name)
    if (!o) {
      o = offeredOrFail(offered, this.ctx.access)
      this.offers.set(name, o)
    }
    return o
  }
}

type OfferedFor = (access: AccessOptions) => Promise<(node: string) => string | undefined>

/**
 * Nodes whose way in was started before their read (svc: while the API is still read): the ways of the run, and each
 * such node's access, connected (and, over SSH, `id -u` asked) by the time the read starts. An access that connected
 * is taken by its node's read (which closes it) or closed by closeEarlyOpens, whatever its first exec said.
 */
export interface EarlyOpens {
  ways: Ways
  opened: Map<string, {transport: ViaTransport; access: Promise<NodeAccess>}>
}

/**
 * Starts opening the nodes the read will open first (`concurrency` of them), where the way is already certain: the
 * first candidate way is one whose failure is the node's error (SSH), offered for the node. What goes wrong here is
 * said by the read itself, as without it: failures are kept for it, nothing is thrown. `close` them if the read never
 * comes (closeEarlyOpens).
 */
export function openEarly(targets: NodeTarget[], ctx: ChoiceContext): EarlyOpens {
  const ways = new Ways(
    ctx,
    targets.map((t) => t.name),
  )
  const opened: EarlyOpens['opened'] = new Map()
  const via = ctx.access.via
  const first = via === 'auto' ? autoOrder()[0] : via === 'none' ? undefined : via
  if (first === undefined || !transport(first).failureIsFinal || !transport(first).probes) return {ways, opened}
  const auto = transport(first).auto
  const offer = via === 'auto' && 'rank' in auto && auto.offered ? ways.offered(first, auto.offered) : undefined
  for (const target of targets.slice(0, Math.max(1, ctx.access.concurrency))) {
    const access = (async () => {
      if (offer && (await offer)(target.name)) throw new Error('not offered')
      const opened = await (await ways.connector(first))(target)
      // Asked now, not awaited: the read awaits it, and whatever it fails with is that read's error (the read then
      // closes the access as always: an access that failed here must still reach a read, or closeEarlyOpens).
      opened.usesSudo?.().catch(() => undefined)
      return opened
    })()
    access.catch(() => undefined)
    opened.set(target.name, {transport: first, access})
  }
  return {ways, opened}
}

/** Closes the accesses opened early that no read took (the run failed before its node reads). */
export async function closeEarlyOpens(early: EarlyOpens | undefined): Promise<void> {
  const left = [...(early?.opened.values() ?? [])]
  early?.opened.clear()
  await Promise.all(
    left.map(({access}) =>
      access.then(
        (a) => a.close(),
        () => undefined,
      ),
    ),
  )
}

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
  /** The ways and nodes openEarly started for these targets. */
  early?: EarlyOpens,
): Promise<NodeReads> {
  try {
    return await readThrough(targets, ctx, collect, early)
  } finally {
    await closeEarlyOpens(early)
  }
}

async function readThrough(
  targets: NodeTarget[],
  ctx: ChoiceContext,
  collect: Collect,
  early: EarlyOpens | undefined,
): Promise<NodeReads> {
  const via = ctx.access.via
  for (const name of VIA) {
    const own = name === 'auto' || name === 'none' ? undefined : transport(name).ownOptions
    if (name !== via && own?.given(ctx.access))
      throw new DiagnosisError(`${own.flags.join(' and ')} are used only with --via ${name} (this run: --via ${via})`)
  }
  const candidates: ViaTransport[] = via === 'auto' ? autoOrder() : via === 'none' ? [] : [via]
  const ways =
    early?.ways ??
    new Ways(
      ctx,
      targets.map((t) => t.name),
    )
  const connector = (name: ViaTransport) => ways.connector(name)
  // A way named by --via is made ready before any node is read: what it will create is said first.
  if (via !== 'auto' && via !== 'none' && targets.length > 0) await connector(via)
  const offered = new Map<ViaTransport, (node: string) => string | undefined>()
  if (via === 'auto')
    for (const name of candidates) {
      const auto = transport(name).auto
      if ('rank' in auto && auto.offered) offered.set(name, await ways.offered(name, auto.offered))
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
      // Opened early for this way (openEarly): taken once; what no read takes is closed at the end.
      const started = early?.opened.get(target.name)
      const mine = started?.transport === name ? started.access : undefined
      if (mine) early?.opened.delete(target.name)
      const open = async () => (access = await (mine ?? (await connector(name))(target)))
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
