import type {Duplex} from 'node:stream'
import type {ArgsOf, NodeCommandKey} from '../read/node-reads.js'
import type {KernelTraceCommand} from '../kernel-trace-commands.js'

/** An allow-listed command that ran on the node (whatever its exit code). */
interface CommandRan {
  kind: 'ran'
  code: number | null
  stdout: Buffer
  stderr: string
}

/** The transport has no output for this read (a snapshot that did not record it): nothing was learnt. */
interface NotRecorded {
  kind: 'not-recorded'
  what: string
}

export type RunResult = CommandRan | NotRecorded

/** Why a TCP stream from the node was not opened; `not-probed` means the transport itself would not try. */
interface TcpRefusal {
  kind: 'refused'
  outcome: 'refused' | 'unreachable' | 'timeout' | 'not-probed'
  reason: string
}

export type TcpOpen = {kind: 'open'; stream: Duplex} | TcpRefusal

export type FileRead = {kind: 'read'; content: Buffer} | {kind: 'missing'; reason: string} | NotRecorded

export interface TransportDescription {
  /** Registry name of the transport (see transports.ts). */
  transport: string
  /** Where it reads the node: user@host:port, a bundle folder, … */
  address: string
  /** How openTcp reaches from the node, for the report: "an SSH port forward", … */
  tcpVia: string
}

/** A request the API server refused (403): the verb and resource that were needed, and the report's line for it. */
export interface Refusal {
  verb: string
  resource: string
  namespace: string
  line: string
}

/**
 * What a transport has to say about its reads of a node: what it could not read (a program its image lacks, a file
 * its Pod does not see), the requests refused, what the run must warn about (an SSH host key accepted unchecked), what
 * it could not clean up once closed (a debug Pod not deleted: the line says how to delete it), and where its means
 * come from (the debug Pod's image).
 */
export interface TransportNotes {
  missingTools: string[]
  refusals: Refusal[]
  warnings: string[]
  leftovers: string[]
  origin?: string
}

const NO_NOTES: TransportNotes = {missingTools: [], refusals: [], warnings: [], leftovers: []}

/**
 * How the doctor reaches one node, read-only. Every command is a key of the allow-list in node-commands.ts (a free
 * string does not type-check and is refused at run time); arguments are validated inside the transport.
 */
export interface NodeAccess {
  run<K extends NodeCommandKey>(key: K, ...args: ArgsOf<K>): Promise<RunResult>
  /** A TCP connection that originates on the node. */
  openTcp(host: string, port: number, timeoutMs: number): Promise<TcpOpen>
  /** An allow-listed kernel file (/proc/sys/…, /sys/class/net/…). */
  readFile(path: string): Promise<FileRead>
  describe(): TransportDescription
  /**
   * Whether privileged reads go through `sudo -n` (an SSH login that is not root). Where they do, the reader runs one
   * first: a sudo that wants a password then fails once on the node, not once per read. Absent: no sudo.
   */
  usesSudo?(): Promise<boolean>
  /**
   * A command of the kernel trace's own allow-list (kernel-trace-commands.ts: the doctor's private nftables table and
   * `nft monitor trace`), run only under --kernel-trace or `cleanup`. Absent: the transport cannot run them. `stop`:
   * ends the command early (the monitor, once the probes' events are in), giving what it printed so far; a transport
   * that cannot stop a command leaves it to its own bound (`timeout` on the node).
   */
  runKernelTrace?(cmd: KernelTraceCommand, timeoutMs: number, stop?: AbortSignal): Promise<RunResult>
  /**
   * Whether the small reads asked for at once reach the node as one command (the SSH transport's batches, see
   * isBatchable): a gate on commands running at once then counts each batch once, not each read in it.
   */
  readonly batchesReads?: boolean
  /** Ends the access; a transport that made something on the node's behalf (the debug Pod) removes it before resolving. */
  close(): void | Promise<void>
  /** What the transport has to say about its reads so far (see TransportNotes); absent: nothing. */
  notes?(): TransportNotes
}

/** The access's notes (none where the transport keeps none). */
export function notesOf(access: NodeAccess): TransportNotes {
  return access.notes?.() ?? NO_NOTES
}

/**
 * The one way to wrap an access: everything forwarded to it (the optional usesSudo, notes and batchesReads too, where it has them)
 * but what `own` replaces. The verbose log, the read's command gate and the probes beside a read wrap this way.
 */
export function wrapAccess(access: NodeAccess, own: Partial<Omit<NodeAccess, 'usesSudo' | 'notes'>>): NodeAccess {
  const wrapped: NodeAccess = {
    run: (key, ...args) => access.run(key, ...args),
    openTcp: (host, port, timeoutMs) => access.openTcp(host, port, timeoutMs),
    readFile: (path) => access.readFile(path),
    describe: () => access.describe(),
    close: () => access.close(),
    ...own,
  }
  if (access.batchesReads) Object.assign(wrapped, {batchesReads: true})
  if (access.usesSudo) wrapped.usesSudo = () => access.usesSudo!()
  if (access.runKernelTrace)
    wrapped.runKernelTrace = (cmd, timeoutMs, stop) => access.runKernelTrace!(cmd, timeoutMs, stop)
  if (access.notes) wrapped.notes = () => access.notes!()
  return wrapped
}

/**
 * The access with other work running on it beside the read (the live probes over the read's own SSH connection):
 * closing it waits for that work first.
 */
export function closingAfter(access: NodeAccess, beside: Promise<unknown>): NodeAccess {
  // Its outcome is the caller's to read; here only that it is over (and a failure is not an unhandled rejection).
  const settled = beside.catch(() => undefined)
  return wrapAccess(access, {
    close: async () => {
      await settled
      await access.close()
    },
  })
}

/** The OpenTcp shape tcp-probe.ts and the HTTP/DNS helpers use: a refusal becomes an error carrying its reason. */
export function tcpOpener(access: NodeAccess, timeoutMs: number): (host: string, port: number) => Promise<Duplex> {
  return async (host, port) => {
    const r = await access.openTcp(host, port, timeoutMs)
    if (r.kind === 'open') return r.stream
    throw new Error(r.reason)
  }
}
