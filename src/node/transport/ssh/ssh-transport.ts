import {randomBytes} from 'node:crypto'
import {lateTimeout} from '../../../util/late-timeout.js'
import type {Duplex} from 'node:stream'
import {gunzipSync} from 'node:zlib'
import {
  batchCommandLine,
  buildCommandLine,
  commandTimeoutMs,
  compressedCommandLine,
  isBatchable,
  isCompressible,
  isReadableNodeFile,
  outputCapBytes,
  programOf,
  readFileCommand,
  splitBatchOutput,
  splitCompressedOutput,
  type CommandLine,
} from '../../node-commands.js'
import {isNodeCommandKey, NODE_READS, type ArgsOf, type NodeCommandKey} from '../../read/node-reads.js'
import type {FileRead, NodeAccess, RunResult, TcpOpen, TransportDescription, TransportNotes} from '../node-access.js'
import {OutputCapExceeded, type ExecResult} from './ssh-session.js'
import {classifyOpenError} from '../../probe/tcp-probe.js'
import {kernelTraceLine, type KernelTraceCommand} from '../../kernel-trace-commands.js'

/** What the SSH transport needs of a session (SshSession; a stand-in in tests). */
export interface SshChannel {
  readonly host: {hostName: string; port: number; user?: string; compression?: boolean}
  readonly hostKeyWarning?: string
  /** The jump hosts or ProxyCommand the connection goes through. */
  readonly via?: string
  /** A lower cap on one command's output than the read's own, where the session has one (a stand-in in tests). */
  readonly maxOutputBytes?: number
  /** One step's timeout, where the session has one (a stand-in in tests may not). */
  readonly stepMs?: number
  /**
   * Runs a line; past `maxOutputBytes` of output (the command cap when not given) it is stopped and rejects. `stop`:
   * ends the command early, with what it printed so far (the kernel trace's monitor).
   */
  exec(command: CommandLine, timeoutMs?: number, maxOutputBytes?: number, stop?: AbortSignal): Promise<ExecResult>
  forward(ip: string, port: number): Promise<Duplex>
  close(): void
}

/** A read waiting for the next batch: its line, its timeout, and who waits for its output. */
interface Queued {
  line: CommandLine
  timeoutMs: number | undefined
  settle: (r: Promise<ExecResult>) => void
}

/**
 * NodeAccess over one SSH connection: exec for allow-listed commands, direct-tcpip for streams from the node. The small
 * reads asked for at the same moment (before the event loop turns) go to the node as one batch, one exec: each exec is
 * a session and a shell that sshd starts, which on a loaded node costs more than the read itself (issue #28). The dumps
 * and the reads whose row says `ownExec` keep an exec each (large or slow: they should not hold the small reads back).
 */
export class SshNodeAccess implements NodeAccess {
  private isRoot?: Promise<boolean>
  private hasGzip?: Promise<boolean>
  private queued: Queued[] = []
  readonly batchesReads = true

  constructor(private readonly session: SshChannel) {}

  /** `sudo -n` is needed unless the login is root; asked once per connection. */
  private root(): Promise<boolean> {
    this.isRoot ??= this.session
      .exec(buildCommandLine('uid', true))
      .then((r) => NODE_READS.uid.parse(r.stdout.toString()))
    return this.isRoot
  }

  /** Whether the node has gzip; asked once per connection, only when a dump is read. */
  private gzip(): Promise<boolean> {
    this.hasGzip ??= this.session
      .exec(buildCommandLine('hasGzip', true))
      .then((r) => r.code === 0 && NODE_READS.hasGzip.parse(r.stdout.toString()))
    return this.hasGzip
  }

  async usesSudo(): Promise<boolean> {
    return !(await this.root())
  }

  async run<K extends NodeCommandKey>(key: K, ...args: ArgsOf<K>): Promise<RunResult> {
    if (!isNodeCommandKey(key)) throw new Error(`"${String(key)}" is not an allow-listed node command: not run`)
    const line = buildCommandLine(key, await this.root(), ...args)
    // Compression costs the node CPU (gzip -1: about 0.3 s per 30 MB) to save wire time: worth it on a slow link, a
    // loss on a LAN, so it follows the user's OpenSSH knob for that, `Compression yes`.
    const timeoutMs = this.session.stepMs === undefined ? undefined : commandTimeoutMs(key, this.session.stepMs)
    if (isBatchable(key)) return {kind: 'ran', ...(await this.batched(line, timeoutMs))}
    // The dumps get the dump cap, as through a Pod: kube-proxy's iptables-save at 12,000 Services is past the command
    // cap. The cap holds for what comes over the wire and, compressed, for what it decompresses to.
    const cap = Math.min(outputCapBytes(NODE_READS[key]), this.session.maxOutputBytes ?? Infinity)
    if (!this.session.host.compression || !isCompressible(key) || !(await this.gzip()))
      return {kind: 'ran', ...(await this.session.exec(line, timeoutMs, cap))}
    const r = await this.session.exec(compressedCommandLine(line), timeoutMs, cap)
    let plain: Buffer
    try {
      // A gzip bomb stops at the cap: zlib gives up as soon as the output would pass it.
      plain = gunzipSync(r.stdout, {maxOutputLength: cap})
    } catch (e) {
      if ((e as {code?: string}).code === 'ERR_BUFFER_TOO_LARGE')
        throw new OutputCapExceeded(programOf(line), cap, true)
      // A stream cut short (the command or gzip killed): nothing usable came, and there is no exit status.
      return {
        kind: 'ran',
        code: null,
        stdout: Buffer.alloc(0),
        stderr: `${r.stderr}${r.stderr ? '\n' : ''}compressed output unreadable: ${(e as Error).message}`,
      }
    }
    return {kind: 'ran', ...splitCompressedOutput(plain), stderr: r.stderr}
  }

  async runKernelTrace(cmd: KernelTraceCommand, timeoutMs: number, stop?: AbortSignal): Promise<RunResult> {
    return {
      kind: 'ran',
      ...(await this.session.exec(kernelTraceLine(cmd, await this.root()), timeoutMs, undefined, stop)),
    }
  }

  /** Runs a line in the next batch: the lines queued before the event loop turns run as one exec. */
  private batched(line: CommandLine, timeoutMs: number | undefined): Promise<ExecResult> {
    return new Promise<ExecResult>((resolve) => {
      this.queued.push({line, timeoutMs, settle: resolve})
      if (this.queued.length === 1) setImmediate(() => this.flush())
    })
  }

  /** The queued lines: alone as itself, several as one batch whose output is split back per line. */
  private flush(): void {
    const batch = this.queued.splice(0)
    if (batch.length === 1) return batch[0].settle(this.session.exec(batch[0].line, batch[0].timeoutMs))
    const nonce = randomBytes(8).toString('hex')
    const timeouts = batch.map((q) => q.timeoutMs)
    const ran = this.session.exec(
      batchCommandLine(
        batch.map((q) => q.line),
        nonce,
      ),
      timeouts.includes(undefined) ? undefined : Math.max(...(timeouts as number[])),
    )
    const outputs = ran.then((r) => splitBatchOutput(batch.length, nonce, r))
    batch.forEach((q, i) => q.settle(outputs.then((o) => o[i])))
  }

  async openTcp(host: string, port: number, timeoutMs: number): Promise<TcpOpen> {
    const pending = this.session.forward(host, port)
    const timeout = lateTimeout(timeoutMs)
    try {
      const r = await Promise.race([pending, timeout.expired])
      if (r !== 'timeout') return {kind: 'open', stream: r}
      pending.then(
        (s) => s.destroy(),
        () => undefined,
      )
      return {
        kind: 'refused',
        outcome: 'timeout',
        reason: `port forward to ${host}:${port} timed out after ${timeoutMs / 1000}s`,
      }
    } catch (e) {
      const reason = (e as Error).message
      return {kind: 'refused', outcome: classifyOpenError(e as Error), reason}
    } finally {
      timeout.cancel()
    }
  }

  async readFile(path: string): Promise<FileRead> {
    if (!isReadableNodeFile(path)) throw new Error(`refusing to read "${path}" on a node: not an allow-listed file`)
    const r = await this.session.exec(readFileCommand(path))
    return r.code === 0
      ? {kind: 'read', content: r.stdout}
      : {kind: 'missing', reason: r.stderr.trim().split('\n')[0] || `cat exited ${r.code}`}
  }

  /** What the run must say on stderr about this connection (a host key accepted unchecked). */
  notes(): TransportNotes {
    return {
      missingTools: [],
      refusals: [],
      warnings: this.session.hostKeyWarning ? [this.session.hostKeyWarning] : [],
      leftovers: [],
    }
  }

  describe(): TransportDescription {
    const h = this.session.host
    return {
      transport: 'ssh',
      address: `${h.user ? `${h.user}@` : ''}${h.hostName}:${h.port}${this.session.via ? ` via ${this.session.via}` : ''}`,
      tcpVia: 'an SSH port forward',
    }
  }

  close(): void {
    this.session.close()
  }
}
