import {randomBytes} from 'node:crypto'
import {lateTimeout} from '../../../util/late-timeout.js'
import type {Duplex} from 'node:stream'
import {constants, createGunzip, gunzipSync} from 'node:zlib'
import {
  batchCommandLine,
  buildCommandLine,
  commandTimeoutMs,
  compressedCommandLine,
  isCompressible,
  isReadableNodeFile,
  outputCapBytes,
  programOf,
  readFileCommand,
  splitBatchOutput,
  batchStdoutMark,
  splitCompressedOutput,
  type CommandLine,
} from '../../node-commands.js'
import {isNodeCommandKey, NODE_READS, readOf, type ArgsOf, type NodeCommandKey} from '../../read/node-reads.js'
import type {FileRead, NodeAccess, RunResult, TcpOpen, TransportDescription, TransportNotes} from '../node-access.js'
import {CommandStopped, CommandTimedOut, OutputCapExceeded, type ExecResult} from './ssh-session.js'
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
   * ends the command early, with what it printed so far (the kernel trace's monitor). `wholeStderr`: its stderr comes
   * back whole (a batch's, every read's in it), not cut as one command's is for its messages.
   */
  exec(
    command: CommandLine,
    timeoutMs?: number,
    maxOutputBytes?: number,
    stop?: AbortSignal,
    wholeStderr?: boolean,
  ): Promise<ExecResult>
  forward(ip: string, port: number): Promise<Duplex>
  close(): void
}

/**
 * A compressed stream decompressed up to `cap` bytes: a gzip bomb stops there (`pastCap`), a stream cut short gives
 * what it holds, a damaged one its error beside what came before it.
 */
function gunzipUpTo(chunks: Buffer[], cap: number): Promise<{chunks: Buffer[]; pastCap: boolean; error?: Error}> {
  const gunzip = createGunzip({finishFlush: constants.Z_SYNC_FLUSH})
  const out: Buffer[] = []
  let total = 0
  return new Promise((resolve) => {
    gunzip.on('data', (chunk: Buffer) => {
      total += chunk.length
      if (total <= cap) return void out.push(chunk)
      gunzip.destroy()
      resolve({chunks: out, pastCap: true})
    })
    gunzip.on('end', () => resolve({chunks: out, pastCap: false}))
    gunzip.on('error', (error) => resolve({chunks: out, pastCap: false, error}))
    for (const chunk of chunks) gunzip.write(chunk)
    gunzip.end()
  })
}

/**
 * A stopped batch's stdout up to the end of its last read that ended (its end mark and exit status): the reads that
 * ended, found without copying the rest into one buffer.
 */
function endedPrefix(chunks: Buffer[], nonce: string): Buffer {
  const mark = batchStdoutMark(nonce)
  // A mark split between two chunks is found in the tail of the one before joined to the next (with its exit status).
  const tail = mark.length + 16
  let carry = Buffer.alloc(0)
  let offset = 0
  let end = 0
  for (const chunk of chunks) {
    const window = Buffer.concat([carry, chunk])
    const base = offset - carry.length
    for (let at = window.indexOf(mark); at >= 0; at = window.indexOf(mark, at + 1)) {
      const newline = window.indexOf(0x0a, at + mark.length)
      if (newline >= 0) end = Math.max(end, base + newline + 1)
    }
    offset += chunk.length
    carry = window.subarray(Math.max(0, window.length - tail))
  }
  const kept: Buffer[] = []
  for (let left = end, i = 0; left > 0 && i < chunks.length; left -= chunks[i].length, i++)
    kept.push(chunks[i].subarray(0, left))
  return Buffer.concat(kept)
}

/**
 * The reads asked with `id -u` in a connection's first exec (the rows flagged `askedFirst`: no sudo, no arguments): the
 * reads after them wait for their answers, so these go in the first round and the others in the next.
 */
const ASKED_FIRST = (Object.keys(NODE_READS) as NodeCommandKey[]).filter((key) => readOf(key).askedFirst)

/** A read waiting for the next batch: its line, its timeout, its output cap, and who waits for its output. */
interface Queued {
  line: CommandLine
  timeoutMs: number | undefined
  /** Its read's own cap where it is a dump (else the session's cap on one command). */
  cap: number | undefined
  compressible: boolean
  /** The reads it waits for on the node (NodeRead.lane): one after another in the batch. */
  lane: string | undefined
  settle: (r: Promise<ExecResult>) => void
}

/**
 * NodeAccess over one SSH connection: exec for allow-listed commands, direct-tcpip for streams from the node. The reads
 * asked for at the same moment (before the event loop turns) go to the node as one batch, one exec: each exec is a
 * session and a shell that sshd starts, which on a loaded node costs more than most reads (issue #28). A round of reads
 * is then one exec per node; its reads run side by side on the node (a lane's one after another), each with its own
 * output, stderr and exit status, a read that fails failing alone.
 */
export class SshNodeAccess implements NodeAccess {
  private isRoot?: Promise<boolean>
  private hasGzip?: Promise<boolean>
  private queued: Queued[] = []
  /** The reads asked in the first exec (ASKED_FIRST), until they are asked for. */
  private readonly answered = new Map<NodeCommandKey, Promise<ExecResult>>()
  readonly batchesReads = true

  constructor(private readonly session: SshChannel) {}

  /**
   * `sudo -n` is needed unless the login is root; asked once per connection, in one exec with the reads that take no
   * sudo and that the reads after them wait for: whether the node has gzip (where the session compresses, `Compression
   * yes`), and the rows flagged `askedFirst` (`iptables -V`, `ip6tables -V`: whether the rules can be read chain by
   * chain), kept for their first ask. It is a batch like any other (its timeout, its cap, the read its errors name).
   */
  private root(): Promise<boolean> {
    if (this.isRoot) return this.isRoot
    const keys: NodeCommandKey[] = [
      'uid',
      ...(this.session.host.compression ? (['hasGzip'] as const) : []),
      ...ASKED_FIRST,
    ]
    const answers = new Map(keys.map((key) => [key, this.batched(this.waiting(key, true))]))
    for (const key of ASKED_FIRST) this.answered.set(key, answers.get(key)!)
    const gzip = answers.get('hasGzip')
    if (gzip) this.hasGzip = gzip.then((r) => r.code === 0 && NODE_READS.hasGzip.parse(r.stdout.toString()))
    // Each answer is awaited by its own read, if one asks; a failure none awaits is no unhandled rejection.
    for (const answer of answers.values()) answer.catch(() => undefined)
    this.hasGzip?.catch(() => undefined)
    this.isRoot = answers.get('uid')!.then((r) => NODE_READS.uid.parse(r.stdout.toString()))
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
    const root = await this.root()
    const first = this.answered.get(key)
    if (first) this.answered.delete(key)
    return {kind: 'ran', ...(await (first ?? this.batched(this.waiting(key, root, ...args))))}
  }

  /** A read as it waits for its batch: its line (sudo where the login is not root), timeout, cap and lane. */
  private waiting<K extends NodeCommandKey>(key: K, root: boolean, ...args: ArgsOf<K>): Omit<Queued, 'settle'> {
    const line = buildCommandLine(key, root, ...args)
    const timeoutMs = this.session.stepMs === undefined ? undefined : commandTimeoutMs(key, this.session.stepMs)
    // The dumps get the dump cap, as through a Pod: kube-proxy's iptables-save at 12,000 Services is past the command
    // cap. The cap holds for what comes over the wire and, compressed, for what it decompresses to.
    const compressible = isCompressible(key)
    const cap = compressible
      ? Math.min(outputCapBytes(NODE_READS[key]), this.session.maxOutputBytes ?? Infinity)
      : undefined
    return {line, timeoutMs, cap, compressible, lane: readOf(key).lane}
  }

  /**
   * Compression costs the node CPU (gzip -1: about 0.3 s per 30 MB) to save wire time: worth it on a slow link, a
   * loss on a LAN, so it follows the user's OpenSSH knob for that, `Compression yes`; and only for a dump.
   */
  private async compresses(reads: readonly Queued[]): Promise<boolean> {
    return !!this.session.host.compression && reads.some((q) => q.compressible) && (await this.gzip())
  }

  /** One read alone in its exec: as itself, a dump through gzip where it compresses. */
  private async alone(q: Queued): Promise<ExecResult> {
    if (!(await this.compresses([q]))) return this.session.exec(q.line, q.timeoutMs, q.cap)
    const r = await this.session.exec(compressedCommandLine(q.line), q.timeoutMs, q.cap)
    const plain = this.gunzip(r, q.line, q.cap!)
    return plain.stdout === undefined ? plain.failed : {...splitCompressedOutput(plain.stdout), stderr: r.stderr}
  }

  /** A compressed stdout, decompressed; a stream cut short gives nothing usable and no exit status. */
  private gunzip(
    r: ExecResult,
    line: CommandLine,
    cap: number,
    cutShort = false,
  ): {stdout: Buffer; failed?: undefined} | {stdout?: undefined; failed: ExecResult} {
    try {
      // A gzip bomb stops at the cap: zlib gives up as soon as the output would pass it.
      return {
        stdout: gunzipSync(r.stdout, {
          maxOutputLength: cap,
          ...(cutShort ? {finishFlush: constants.Z_SYNC_FLUSH} : {}),
        }),
      }
    } catch (e) {
      if ((e as {code?: string}).code === 'ERR_BUFFER_TOO_LARGE')
        throw new OutputCapExceeded(programOf(line), cap, true)
      return {
        failed: {
          code: null,
          stdout: Buffer.alloc(0),
          stderr: `${r.stderr}${r.stderr ? '\n' : ''}compressed output unreadable: ${(e as Error).message}`,
        },
      }
    }
  }

  async runKernelTrace(cmd: KernelTraceCommand, timeoutMs: number, stop?: AbortSignal): Promise<RunResult> {
    return {
      kind: 'ran',
      ...(await this.session.exec(kernelTraceLine(cmd, await this.root()), timeoutMs, undefined, stop)),
    }
  }

  /** Runs a read in the next batch: the reads queued before the event loop turns run as one exec. */
  private batched(read: Omit<Queued, 'settle'>): Promise<ExecResult> {
    return new Promise<ExecResult>((resolve) => {
      this.queued.push({...read, settle: resolve})
      if (this.queued.length === 1) setImmediate(() => this.flush())
    })
  }

  /** The queued reads: alone as itself, several as one batch whose output is split back per read. */
  private flush(): void {
    // A lane's reads next to each other (the batch runs a lane's reads one after another).
    const lanes = [...new Set(this.queued.map((q) => q.lane))]
    const batch = this.queued.splice(0).sort((a, b) => lanes.indexOf(a.lane) - lanes.indexOf(b.lane))
    if (batch.length === 1) return batch[0].settle(this.alone(batch[0]))
    const outputs = this.runBatch(batch)
    batch.forEach((q, i) => q.settle(outputs.then((o) => o[i])))
  }

  /**
   * Several reads as one exec, each read's output, stderr and exit status split back. The exec's timeout is the longest
   * of its reads', its cap the largest. Stopped (its timeout, the cap), the reads that had ended keep their output; the
   * one under way fails as it would alone, and the ones after it fail as not run.
   */
  private async runBatch(batch: Queued[]): Promise<Array<Promise<ExecResult>>> {
    const nonce = randomBytes(8).toString('hex')
    const timeouts = batch.map((q) => q.timeoutMs)
    const timeoutMs = timeouts.includes(undefined) ? undefined : Math.max(...(timeouts as number[]))
    const caps = batch.map((q) => q.cap).filter((c): c is number => c !== undefined)
    const cap = caps.length > 0 ? Math.max(...caps) : undefined
    const gzip = await this.compresses(batch)
    const line = batchCommandLine(
      batch.map((q) => q.line),
      nonce,
      gzip,
      batch.map((q) => q.lane),
    )
    let stdoutChunks: Buffer[]
    let stderr: string
    let stopped: CommandStopped | undefined
    try {
      const r = await this.session.exec(line, timeoutMs, cap, undefined, true)
      stdoutChunks = [r.stdout]
      stderr = r.stderr
    } catch (e) {
      if (!(e instanceof CommandStopped)) return batch.map(() => Promise.reject(e as Error))
      stopped = e
      stdoutChunks = e.stdoutChunks
      stderr = e.stderr
    }
    let pastCapDecompressed = false
    if (gzip) {
      const plain = await gunzipUpTo(stdoutChunks, cap!)
      if (plain.error && !stopped) {
        const failed = {
          code: null,
          stdout: Buffer.alloc(0),
          stderr: `${stderr}${stderr ? '\n' : ''}compressed output unreadable: ${plain.error.message}`,
        }
        return batch.map(() => Promise.resolve(failed))
      }
      stdoutChunks = plain.chunks
      pastCapDecompressed = plain.pastCap
      if (pastCapDecompressed) stopped ??= new OutputCapExceeded('', cap!, true)
    }
    // Stopped: only what the reads that ended printed is copied (the rest may be as large as the cap).
    const stdout = stopped
      ? endedPrefix(stdoutChunks, nonce)
      : stdoutChunks.length === 1
        ? stdoutChunks[0]
        : Buffer.concat(stdoutChunks)
    let outputs: ReturnType<typeof splitBatchOutput>
    try {
      outputs = splitBatchOutput(batch.length, nonce, {stdout, stderr})
    } catch (e) {
      return batch.map(() => Promise.reject(e as Error))
    }
    const cut = outputs.findIndex((o) => !o.ended)
    if (!stopped || cut < 0)
      return outputs.map(({ended: _, stderrWhole: _whole, ...output}, i) => this.withinCap(output, batch[i]))
    const underWay = programOf(batch[cut].line)
    const failure =
      stopped instanceof CommandTimedOut
        ? new CommandTimedOut(underWay, stopped.timeoutMs)
        : new OutputCapExceeded(underWay, (stopped as OutputCapExceeded).cap, pastCapDecompressed)
    // A read that ended before the stop whose lane had not printed its stderr yet: its messages are not known, and it
    // says so (a failing read would otherwise read as one that said nothing).
    const unheard = (stderr: string) =>
      `${stderr}${stderr === '' || stderr.endsWith('\n') ? '' : '\n'}(its messages were not received: ${failure.message}, in the same SSH command, before they were printed)\n`
    return outputs.map(({ended: _ended, stderrWhole, ...output}, i) =>
      i < cut
        ? Promise.resolve(stderrWhole ? output : {...output, stderr: unheard(output.stderr)})
        : Promise.reject(
            i === cut
              ? failure
              : new CommandStopped(
                  `"${programOf(batch[i].line)}" not run: ${failure.message}, before it in the same SSH command`,
                ),
          ),
    )
  }

  /**
   * A read of a batch with its own cap (the command cap for a small read in a batch a dump's cap bounds): past it, it
   * fails as it would alone.
   */
  private withinCap(output: ExecResult, q: Queued): Promise<ExecResult> {
    const cap = q.cap ?? Math.min(outputCapBytes(undefined), this.session.maxOutputBytes ?? Infinity)
    return output.stdout.length + output.stderr.length <= cap
      ? Promise.resolve(output)
      : Promise.reject(new OutputCapExceeded(programOf(q.line), cap))
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
