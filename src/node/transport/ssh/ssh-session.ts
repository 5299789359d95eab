import {existsSync, readFileSync} from 'node:fs'
import type {Duplex} from 'node:stream'
import {StringDecoder} from 'node:string_decoder'
import ssh2 from 'ssh2'
import ssh2Constants from 'ssh2/lib/protocol/constants.js'
import type {Algorithms, ClientChannel, ExecOptions} from 'ssh2'
import {checkKnownHosts, hostKeyAlgorithms, knownHostsName, type KnownHostsResult} from './known-hosts.js'
import type {SshHostConfig} from './ssh-config.js'
import {expandProxyCommand, startProxyCommand, type ProxyCommandProcess} from './proxy-command.js'
import {hostLabel} from './ssh-route.js'
import {programOf, withSbinOnPath, type CommandLine} from '../../node-commands.js'
import {Slots} from '../../../util/slots.js'
import {capText, COMMAND_OUTPUT_CAP_BYTES} from '../../../util/output-cap.js'

export interface SshOptions {
  /** Skip host key checking (only with the explicit flag). */
  insecureIgnoreHostKey: boolean
  timeoutMs: number
  /** --verbose: each hop of the route, with how its host key was verified. */
  log?: (line: string) => void
}

class SshError extends Error {}

/**
 * A command stopped before it ended (its timeout, the output cap), with what it printed until then: a batch of reads
 * (ssh-transport.ts) gives the reads that had finished their output.
 */
export class CommandStopped extends SshError {
  /** What it printed on stdout until then, as it came (not copied into one buffer: it may be as large as the cap). */
  stdoutChunks: Buffer[] = []
  stderr = ''
}

/** A command ran past its timeout: stopped there. */
export class CommandTimedOut extends CommandStopped {
  constructor(
    program: string,
    readonly timeoutMs: number,
  ) {
    super(`"${program}" did not finish within ${timeoutMs / 1000}s`)
  }
}

export interface ExecResult {
  code: number | null
  stdout: Buffer
  stderr: string
}

/**
 * Commands one connection runs at once: under OpenSSH's default MaxSessions (10), which a node's reads, file reads and
 * the checks beside them could pass; sshd refuses a session past it ("Channel open failure: open failed").
 */
const MAX_SESSIONS = 8
/** How often a session sshd refused is asked for again (50 ms, 100 ms, … between tries: under 3 s in all). */
const SESSION_OPEN_TRIES = 10

/**
 * What a command's stderr is kept to, for the messages that quote it (appended chunk by chunk while shorter). Not a
 * batch's: it is many reads' stderr, each read's after the others' (batchCommandLine), so a cap on the whole would drop
 * the last reads' (a route lookup's "Network is unreachable" after ip6tables' warnings); the output cap bounds it.
 */
const STDERR_KEPT_CHARS = 4096

/** A command printed more than the cap on one command's output (util/output-cap.ts): the read stops there. */
export class OutputCapExceeded extends CommandStopped {
  constructor(
    program: string,
    readonly cap: number,
    decompressed = false,
  ) {
    super(
      `"${program}" printed more than ${capText(cap)}${decompressed ? ' once decompressed (Compression yes)' : ''}: stopped there (the cap on one command's output)`,
    )
  }
}

/** sshd would not open a session channel (it has as many as its MaxSessions allows, or is out of them for a moment). */
class SessionRefused extends SshError {}

/** sshd would not give the session a terminal (PermitTTY no, or no-pty on the key). */
class TerminalRefused extends SshError {}

/** How long a stopped command's channel may take to close before the doctor stops waiting for it. */
const STOP_GRACE_MS = 1000

/** One logged-in connection to one host of a route, and what its host key check said. */
interface HopConnection {
  client: ssh2.Client
  /** How the host key was verified, for --verbose. */
  verified: string
  warning?: string
}

/**
 * One SSH connection to one node, used only through the allow-listed commands in node-commands.ts. The node may sit
 * behind jump hosts (ProxyJump: each hop a connection of its own, opened through the one before it) or a ProxyCommand
 * (SSH spoken over the command's stdio); closing ends them all.
 */
export class SshSession {
  private constructor(
    private readonly clients: ssh2.Client[],
    private readonly proxy: ProxyCommandProcess | undefined,
    readonly host: SshHostConfig,
    /** One step's timeout: each command's, unless given its own (the dumps). */
    readonly stepMs: number,
    /** Said on stderr: host keys accepted without being checked, and why. */
    readonly hostKeyWarning?: string,
    /** The jump hosts or ProxyCommand the connection goes through, for the transport's description. */
    readonly via?: string,
  ) {}

  private get client(): ssh2.Client {
    return this.clients[this.clients.length - 1]
  }

  /**
   * Connects to the last host of `route` through the ones before it (a single host: directly, or through its
   * ProxyCommand). Each hop is checked against its own known_hosts and logged in with its own keys.
   */
  static async connect(route: SshHostConfig | SshHostConfig[], opts: SshOptions): Promise<SshSession> {
    const hops = Array.isArray(route) ? route : [route]
    const clients: ssh2.Client[] = []
    const warnings: string[] = []
    let proxy: ProxyCommandProcess | undefined
    const target = hops[hops.length - 1]
    try {
      for (const [i, host] of hops.entries()) {
        let sock: Duplex | undefined
        let how = 'directly'
        if (i > 0) {
          sock = await forwardThrough(clients[i - 1], hops[i - 1].alias, host, opts.timeoutMs)
          how = `through ${hops[i - 1].alias}`
        } else if (host.proxyCommand) {
          const line = expandProxyCommand(host.proxyCommand, host)
          proxy = startProxyCommand(line)
          sock = proxy.sock
          how = `through ProxyCommand "${line}"`
        }
        const hop = await connectHop(host, opts, sock, i === 0 ? proxy : undefined).catch((e: Error) => {
          throw i < hops.length - 1 ? new SshError(`jump host ${host.alias}: ${e.message}`, {cause: e}) : e
        })
        clients.push(hop.client)
        if (hop.warning) warnings.push(hop.warning)
        opts.log?.(`hop ${i + 1}/${hops.length} ${host.alias}: ${hostLabel(host)} ${how}; host key ${hop.verified}`)
      }
    } catch (e) {
      for (const c of clients.reverse()) c.end()
      proxy?.end()
      throw e
    }
    const via = hops.length > 1 ? hops.slice(0, -1).map(hostLabel).join(' → ') : proxy ? 'ProxyCommand' : undefined
    return new SshSession(
      clients,
      proxy,
      target,
      opts.timeoutMs,
      warnings.length > 0 ? warnings.join('; ') : undefined,
      via,
    )
  }

  private readonly sessions = new Slots(MAX_SESSIONS)

  /**
   * Runs an allow-listed command line (built only by node-commands.ts from a key). At most MAX_SESSIONS run at once on
   * the connection; the others wait for one to end (their timeout starts when they run). Past `maxOutputBytes`
   * (stdout and stderr together; the command cap unless the read's row gives its own, as the dumps do) the command is
   * stopped and the read fails. `wholeStderr`: its stderr is kept whole (a batch's), not to STDERR_KEPT_CHARS.
   */
  exec(
    command: CommandLine,
    timeoutMs = this.stepMs,
    maxOutputBytes = COMMAND_OUTPUT_CAP_BYTES,
    stop?: AbortSignal,
    wholeStderr = false,
  ): Promise<ExecResult> {
    return this.sessions.run(async () => {
      // sshd frees a session's slot a little after the client sees it close: a refused open is tried again, a bounded
      // number of times, once the other sessions have had a moment to end.
      for (let attempt = 1; ; attempt++) {
        try {
          return await this.execNow(command, timeoutMs, maxOutputBytes, stop, wholeStderr)
        } catch (e) {
          if (!(e instanceof SessionRefused) || attempt >= SESSION_OPEN_TRIES) throw e
          await new Promise((resolve) => setTimeout(resolve, 50 * attempt))
        }
      }
    })
  }

  /**
   * `stop`: ends the command early; what it printed so far is the result, with no exit status. sshd honours no
   * "signal" request for a forced command, and closing a channel without a terminal leaves its command running (it
   * ends at its next write, or its own bound): so a command that may be stopped runs on a terminal, which sshd hangs
   * up when the channel closes (SIGHUP to the session's leader: `timeout` passes it on to its command, through sudo);
   * such a command is one program, exec'ed by the login's shell so that it is that leader (withSbinOnPath).
   * Where sshd grants no terminal (PermitTTY no, no-pty), it runs without one and is left to its own bound; either
   * way the doctor waits at most STOP_GRACE_MS for the channel to close once stopped.
   */
  private async execNow(
    command: CommandLine,
    timeoutMs: number,
    maxOutputBytes: number,
    stop: AbortSignal | undefined,
    wholeStderr: boolean,
  ): Promise<ExecResult> {
    if (!stop) return this.execOn(command, timeoutMs, maxOutputBytes, undefined, false, wholeStderr)
    try {
      return await this.execOn(command, timeoutMs, maxOutputBytes, stop, true, wholeStderr)
    } catch (e) {
      if (!(e instanceof TerminalRefused)) throw e
      return this.execOn(command, timeoutMs, maxOutputBytes, stop, false, wholeStderr)
    }
  }

  private execOn(
    command: CommandLine,
    timeoutMs: number,
    maxOutputBytes: number,
    stop: AbortSignal | undefined,
    terminal: boolean,
    wholeStderr: boolean,
  ): Promise<ExecResult> {
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined
      // No echo, no CR before each LF: what the command prints comes as it would through a pipe (stderr joins stdout).
      const options: ExecOptions = terminal ? {pty: {modes: {ECHO: 0, ONLCR: 0}}} : {}
      this.client.exec(withSbinOnPath(command, stop !== undefined), options, (err, stream) => {
        if (err && terminal && /pseudo-terminal/.test(err.message))
          return reject(new TerminalRefused(`"${programOf(command)}": no terminal: ${err.message}`))
        if (err) {
          const refused = /Channel open failure/.test(err.message)
          return reject(
            new (refused ? SessionRefused : SshError)(`cannot run "${programOf(command)}" over SSH: ${err.message}`),
          )
        }
        const out: Buffer[] = []
        let stderr = ''
        // A character may be cut between two packets: decoded across chunks, not chunk by chunk.
        const stderrText = new StringDecoder('utf8')
        let printed = 0
        let stopped = false
        timer = setTimeout(() => {
          stopped = true
          stream.close()
          const e = new CommandTimedOut(programOf(command), timeoutMs)
          Object.assign(e, {stdoutChunks: out, stderr})
          reject(e)
        }, timeoutMs)
        // A flooding node: past the cap the command is stopped and the read fails, whatever it would still print.
        const count = (bytes: number) => {
          if (stopped) return false
          printed += bytes
          if (printed <= maxOutputBytes) return true
          stopped = true
          clearTimeout(timer)
          stream.close()
          const e = new OutputCapExceeded(programOf(command).replace(/;$/, ''), maxOutputBytes)
          Object.assign(e, {stdoutChunks: out, stderr})
          reject(e)
          return false
        }
        stream.on('data', (chunk: Buffer) => {
          if (count(chunk.length)) out.push(chunk)
        })
        stream.stderr.on('data', (chunk: Buffer) => {
          if (count(chunk.length) && (wholeStderr || stderr.length < STDERR_KEPT_CHARS))
            stderr += stderrText.write(chunk)
        })
        const output = (code: number | null) => ({code, stdout: Buffer.concat(out), stderr: stderr + stderrText.end()})
        const ended = () => {
          if (stopped) return
          stream.close()
          // A command sshd did not end (no terminal) is left to its own bound on the node, not waited for.
          setTimeout(() => {
            if (stopped) return
            stopped = true
            clearTimeout(timer)
            resolve(output(null))
          }, STOP_GRACE_MS).unref()
        }
        if (stop?.aborted) ended()
        else stop?.addEventListener('abort', ended, {once: true})
        stream.on('close', (code: number | null) => {
          clearTimeout(timer)
          stop?.removeEventListener('abort', ended)
          if (!stopped) resolve(output(stop?.aborted ? null : code))
          stopped = true
        })
      })
    })
  }

  /** A TCP connection opened by the node's sshd to ip:port, i.e. from inside the node. */
  forward(ip: string, port: number): Promise<ClientChannel> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new SshError(`port forward to ${ip}:${port} timed out`)), this.stepMs)
      this.client.forwardOut('127.0.0.1', 0, ip, port, (err, stream) => {
        clearTimeout(timer)
        // RFC 4254 reason 1: sshd itself will not forward (AllowTcpForwarding, PermitOpen), which says nothing about ip:port.
        if (err && (err as Error & {reason?: unknown}).reason === 1)
          reject(
            new SshError(
              `the node's sshd would not open a connection to ${ip}:${port} (administratively prohibited: forwarding is off, or its connect() failed at once)`,
            ),
          )
        else if (err) reject(new SshError(`port forward from the node to ${ip}:${port} failed: ${err.message}`))
        else resolve(stream)
      })
    })
  }

  close(): void {
    for (const c of [...this.clients].reverse()) c.end()
    this.proxy?.end()
  }
}

/** A channel from `client`'s host to the next hop (`-W host:port`), the next hop's connection runs over. */
function forwardThrough(client: ssh2.Client, jump: string, next: SshHostConfig, timeoutMs: number): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () =>
        reject(
          new SshError(
            `jump host ${jump} opened no channel to ${next.hostName}:${next.port} within ${timeoutMs / 1000}s`,
          ),
        ),
      timeoutMs,
    )
    client.forwardOut('127.0.0.1', 0, next.hostName, next.port, (err, stream) => {
      clearTimeout(timer)
      if (err)
        reject(
          new SshError(
            `jump host ${jump} could not open a connection to ${next.hostName}:${next.port}: ${err.message}${(err as Error & {reason?: unknown}).reason === 1 ? ' (administratively prohibited: its sshd forbids forwarding, or the connection failed at once)' : ''}`,
          ),
        )
      else resolve(stream)
    })
  })
}

/** ssh2's algorithms that the configuration allows, in its order; undefined: ssh2's own choice. */
function offered(configured: string[] | undefined, supported: readonly string[], option: string): string[] | undefined {
  if (!configured) return undefined
  const usable = configured.filter((a) => supported.includes(a))
  if (usable.length === 0)
    throw new SshError(`${option} ${configured.join(',')}: the doctor's SSH client supports none of them`)
  return usable
}

/** The algorithms to offer: the configuration's lists, cut to what ssh2 speaks (and host keys to known_hosts' types). */
function algorithmsFor(host: SshHostConfig, known: string[] | undefined): Algorithms {
  const {SUPPORTED_CIPHER, SUPPORTED_MAC, SUPPORTED_KEX, SUPPORTED_SERVER_HOST_KEY} = ssh2Constants
  const configured = host.algorithms ?? {}
  const serverHostKey = offered(configured.serverHostKey, SUPPORTED_SERVER_HOST_KEY, 'HostKeyAlgorithms')
  const hostKeys = known && serverHostKey ? known.filter((a) => serverHostKey.includes(a)) : (known ?? serverHostKey)
  const out: Algorithms = {}
  const cipher = offered(configured.cipher, SUPPORTED_CIPHER, 'Ciphers')
  const mac = offered(configured.mac, SUPPORTED_MAC, 'MACs')
  const kex = offered(configured.kex, SUPPORTED_KEX, 'KexAlgorithms')
  if (cipher) out.cipher = cipher as never
  if (mac) out.hmac = mac as never
  if (kex) out.kex = kex as never
  // Known_hosts' key types win over the configuration's order, as OpenSSH orders them; none in common is an error.
  if (hostKeys && hostKeys.length === 0)
    throw new SshError(
      `HostKeyAlgorithms ${configured.serverHostKey!.join(',')}: none of them is a type of the host's keys in known_hosts`,
    )
  if (hostKeys) out.serverHostKey = hostKeys as never
  return out
}

/** Logs in to one host over `sock` (a forwarded channel or a ProxyCommand's stdio), or over TCP without one. */
function connectHop(
  host: SshHostConfig,
  opts: SshOptions,
  sock: Duplex | undefined,
  proxy: ProxyCommandProcess | undefined,
): Promise<HopConnection> {
  const client = new ssh2.Client()
  const keyName = host.hostKeyAlias ?? knownHostsName(host.hostName, host.port)
  const knownFiles = [...host.userKnownHostsFiles, ...(host.globalKnownHostsFiles ?? [])]
  const policy = hostKeyPolicy(host, opts)
  let verdict: HostKeyVerdict | undefined
  let known: KnownHostsResult | undefined
  const username = host.user
  const auth: Array<Record<string, unknown>> = []
  for (const file of host.identityFiles) {
    if (existsSync(file)) auth.push({type: 'publickey', username, key: readFileSync(file)})
  }
  if (host.identityAgent && !host.identitiesOnly) auth.push({type: 'agent', username, agent: host.identityAgent})
  let algorithms: Algorithms
  try {
    algorithms = algorithmsFor(host, hostKeyAlgorithms(knownFiles, keyName))
  } catch (e) {
    return Promise.reject(e)
  }
  const where = `${host.hostName}:${host.port}`
  return new Promise((resolve, reject) => {
    let settled = false
    const fail = (e: Error) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      clearTimeout(connectTimer)
      client.destroy()
      reject(e)
    }
    const timer = setTimeout(
      () => fail(new SshError(`SSH to ${where} timed out after ${opts.timeoutMs / 1000}s`)),
      opts.timeoutMs,
    )
    // OpenSSH's ConnectTimeout bounds the TCP connect and the SSH banner/key exchange, not the login after it.
    const connectSeconds = host.connectTimeoutSeconds
    const connectTimer =
      connectSeconds !== undefined && connectSeconds > 0 && connectSeconds * 1000 < opts.timeoutMs
        ? setTimeout(
            () => fail(new SshError(`SSH to ${where}: no SSH handshake within ${connectSeconds}s (ConnectTimeout)`)),
            connectSeconds * 1000,
          )
        : undefined
    // A ProxyCommand that exits before the login is over: its status and what it said are the reason.
    void proxy?.exited.then((status) =>
      fail(
        new SshError(
          `ProxyCommand for ${host.alias} ${status} before the SSH login${proxy.stderr() ? `: ${proxy.stderr()}` : ''}`,
        ),
      ),
    )
    client.on('handshake', () => clearTimeout(connectTimer))
    client.on('ready', () => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      clearTimeout(connectTimer)
      const accepted = verdict?.accept ? verdict : undefined
      resolve({
        client,
        verified:
          known?.status === 'match'
            ? `matched ${known.file}`
            : policy === 'off'
              ? 'NOT checked (--insecure-ignore-host-key)'
              : 'accepted unchecked (StrictHostKeyChecking)',
        warning: accepted?.warning,
      })
    })
    client.on('error', (err: Error & {level?: string}) => {
      if (verdict && !verdict.accept) fail(new SshError(verdict.problem))
      else if (err.level === 'client-authentication')
        fail(
          new SshError(
            `SSH login as ${username}@${where} refused (tried ${auth.length} key(s)${auth.length === 0 ? ': no IdentityFile found' : ''})${host.unusableLogins?.length ? `; the configuration also allows ${host.unusableLogins.join(', ')}, which the doctor cannot use` : ''}`,
          ),
        )
      else fail(new SshError(`SSH to ${where} failed: ${err.message}`))
    })
    if (auth.length === 0) {
      fail(
        new SshError(`no SSH key for ${host.alias}: none of ${host.identityFiles.join(', ')} exists and no ssh-agent`),
      )
      return
    }
    const keepaliveSeconds = host.serverAliveIntervalSeconds
    client.connect({
      ...(sock ? {sock: sock as never} : {host: host.hostName, port: host.port}),
      username,
      readyTimeout: opts.timeoutMs,
      keepaliveInterval: keepaliveSeconds ? keepaliveSeconds * 1000 : 5000,
      ...(host.serverAliveCountMax !== undefined ? {keepaliveCountMax: host.serverAliveCountMax} : {}),
      ...(host.addressFamily === 'inet' ? {forceIPv4: true} : host.addressFamily === 'inet6' ? {forceIPv6: true} : {}),
      ...(host.bindAddress ? {localAddress: host.bindAddress} : {}),
      authHandler: auth as never,
      // Offer only the key types known_hosts holds for the host, as OpenSSH does: a node known by its RSA key must be
      // asked for that key, or ssh2's preferred ed25519 key would look like a changed key.
      algorithms,
      hostVerifier: (key: Buffer) => {
        known = checkKnownHosts(knownFiles, keyName, key)
        verdict = judgeHostKey(policy, known, keyName, knownFiles)
        return verdict.accept
      },
    })
  })
}

/**
 * How strictly a host key is checked. `off`: --insecure-ignore-host-key (said once per run by the caller).
 * `accept-unknown`: StrictHostKeyChecking no/off/accept-new in the SSH config: a key known_hosts does not list is
 * accepted with a warning; a changed key is still refused (OpenSSH would connect with a warning; a doctor that reads
 * a node's rules has no reason to). `strict`: everything else. A @revoked key is refused whatever the policy.
 */
type HostKeyPolicy = 'off' | 'accept-unknown' | 'strict'

function hostKeyPolicy(host: SshHostConfig, opts: SshOptions): HostKeyPolicy {
  if (opts.insecureIgnoreHostKey) return 'off'
  return ['no', 'off', 'accept-new'].includes(host.strictHostKeyChecking ?? '') ? 'accept-unknown' : 'strict'
}

type HostKeyVerdict = {accept: true; warning?: string} | {accept: false; problem: string}

function judgeHostKey(
  policy: HostKeyPolicy,
  known: KnownHostsResult,
  keyName: string,
  files: string[],
): HostKeyVerdict {
  if (known.status === 'revoked')
    return {accept: false, problem: `host key of ${keyName} is marked @revoked in ${known.file}: refusing to connect`}
  if (known.status === 'match') return {accept: true}
  if (policy === 'off') return {accept: true}
  if (known.status === 'mismatch')
    return {
      accept: false,
      problem: `host key of ${keyName} does not match ${known.file}: refusing to connect (possible man-in-the-middle)`,
    }
  if (policy === 'accept-unknown')
    return {
      accept: true,
      warning: `host key of ${keyName} is not in known_hosts and was accepted unchecked (StrictHostKeyChecking in the SSH config): a man-in-the-middle would go unnoticed`,
    }
  return {
    accept: false,
    problem: `host key of ${keyName} is not in known_hosts (${files.join(', ') || 'none'}): add it (ssh-keyscan) or pass --insecure-ignore-host-key`,
  }
}
