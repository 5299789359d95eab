import type {Duplex} from 'node:stream'
import type {ArgsOf, NodeCommandKey} from '../read/node-reads.js'

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
  /** Ends the access; a transport that made something on the node's behalf (the debug Pod) removes it before resolving. */
  close(): void | Promise<void>
}

/**
 * The access with other work running on it beside the read (the live probes over the read's own SSH connection):
 * closing it waits for that work first.
 */
export function closingAfter(access: NodeAccess, beside: Promise<unknown>): NodeAccess {
  // Its outcome is the caller's to read; here only that it is over (and a failure is not an unhandled rejection).
  const settled = beside.catch(() => undefined)
  const wrapped: NodeAccess = {
    run: (key, ...args) => access.run(key, ...args),
    openTcp: (host, port, timeoutMs) => access.openTcp(host, port, timeoutMs),
    readFile: (path) => access.readFile(path),
    describe: () => access.describe(),
    close: async () => {
      await settled
      await access.close()
    },
  }
  if (access.usesSudo) wrapped.usesSudo = () => access.usesSudo!()
  return wrapped
}

/** The OpenTcp shape tcp-probe.ts and the HTTP/DNS helpers use: a refusal becomes an error carrying its reason. */
export function tcpOpener(access: NodeAccess, timeoutMs: number): (host: string, port: number) => Promise<Duplex> {
  return async (host, port) => {
    const r = await access.openTcp(host, port, timeoutMs)
    if (r.kind === 'open') return r.stream
    throw new Error(r.reason)
  }
}
