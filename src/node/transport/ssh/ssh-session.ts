import {existsSync, readFileSync} from 'node:fs'
import ssh2 from 'ssh2'
import type {ClientChannel} from 'ssh2'
import {checkKnownHosts, hostKeyAlgorithms, knownHostsName, type KnownHostsResult} from './known-hosts.js'
import type {SshHostConfig} from './ssh-config.js'
import {programOf, type CommandLine} from '../../node-commands.js'
import {Slots} from '../../../util/slots.js'

export interface SshOptions {
  /** Skip host key checking (only with the explicit flag). */
  insecureIgnoreHostKey: boolean
  timeoutMs: number
}

class SshError extends Error {}

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

/** sshd would not open a session channel (it has as many as its MaxSessions allows, or is out of them for a moment). */
class SessionRefused extends SshError {}

/** One SSH connection to one node, used only through the allow-listed commands in node-commands.ts. */
export class SshSession {
  private constructor(
    private readonly client: ssh2.Client,
    readonly host: SshHostConfig,
    /** One step's timeout: each command's, unless given its own (the dumps). */
    readonly stepMs: number,
    /** Said on stderr: this host's key was accepted without being checked, and why. */
    readonly hostKeyWarning?: string,
  ) {}

  static connect(host: SshHostConfig, opts: SshOptions): Promise<SshSession> {
    const client = new ssh2.Client()
    const keyName = host.hostKeyAlias ?? knownHostsName(host.hostName, host.port)
    const policy = hostKeyPolicy(host, opts)
    let hostKeyWarning: string | undefined
    let hostKeyProblem: string | undefined
    const username = host.user ?? process.env.USER ?? 'root'
    const auth: Array<Record<string, unknown>> = []
    for (const file of host.identityFiles) {
      if (existsSync(file)) auth.push({type: 'publickey', username, key: readFileSync(file)})
    }
    if (process.env.SSH_AUTH_SOCK && !host.identitiesOnly)
      auth.push({type: 'agent', username, agent: process.env.SSH_AUTH_SOCK})
    const serverHostKey = hostKeyAlgorithms(host.userKnownHostsFiles, keyName)
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        clearTimeout(connectTimer)
        client.destroy()
        reject(new SshError(`SSH to ${host.hostName}:${host.port} timed out after ${opts.timeoutMs / 1000}s`))
      }, opts.timeoutMs)
      // OpenSSH's ConnectTimeout bounds the TCP connect and the SSH banner/key exchange, not the login after it.
      const connectSeconds = host.connectTimeoutSeconds
      const connectTimer =
        connectSeconds !== undefined && connectSeconds > 0 && connectSeconds * 1000 < opts.timeoutMs
          ? setTimeout(() => {
              clearTimeout(timer)
              client.destroy()
              reject(
                new SshError(
                  `SSH to ${host.hostName}:${host.port}: no SSH handshake within ${connectSeconds}s (ConnectTimeout)`,
                ),
              )
            }, connectSeconds * 1000)
          : undefined
      client.on('handshake', () => clearTimeout(connectTimer))
      client.on('ready', () => {
        clearTimeout(timer)
        clearTimeout(connectTimer)
        resolve(new SshSession(client, host, opts.timeoutMs, hostKeyWarning))
      })
      client.on('error', (err: Error & {level?: string}) => {
        clearTimeout(timer)
        clearTimeout(connectTimer)
        if (hostKeyProblem) reject(new SshError(hostKeyProblem))
        else if (err.level === 'client-authentication')
          reject(
            new SshError(
              `SSH login as ${username}@${host.hostName}:${host.port} refused (tried ${auth.length} key(s)${auth.length === 0 ? ': no IdentityFile found' : ''})`,
            ),
          )
        else reject(new SshError(`SSH to ${host.hostName}:${host.port} failed: ${err.message}`))
      })
      if (auth.length === 0) {
        clearTimeout(timer)
        clearTimeout(connectTimer)
        reject(
          new SshError(
            `no SSH key for ${host.alias}: none of ${host.identityFiles.join(', ')} exists and no ssh-agent`,
          ),
        )
        return
      }
      client.connect({
        host: host.hostName,
        port: host.port,
        username,
        readyTimeout: opts.timeoutMs,
        keepaliveInterval: 5000,
        authHandler: auth as never,
        // Offer only the key types known_hosts holds for the host, as OpenSSH does: a node known by its RSA key must be
        // asked for that key, or ssh2's preferred ed25519 key would look like a changed key.
        ...(serverHostKey ? {algorithms: {serverHostKey: serverHostKey as never}} : {}),
        hostVerifier: (key: Buffer) => {
          const verdict = judgeHostKey(
            policy,
            checkKnownHosts(host.userKnownHostsFiles, keyName, key),
            keyName,
            host.userKnownHostsFiles,
          )
          if (verdict.accept) hostKeyWarning = verdict.warning
          else hostKeyProblem = verdict.problem
          return verdict.accept
        },
      })
    })
  }

  private readonly sessions = new Slots(MAX_SESSIONS)

  /**
   * Runs an allow-listed command line (built only by node-commands.ts from a key). At most MAX_SESSIONS run at once on
   * the connection; the others wait for one to end (their timeout starts when they run).
   */
  exec(command: CommandLine, timeoutMs = this.stepMs): Promise<ExecResult> {
    return this.sessions.run(async () => {
      // sshd frees a session's slot a little after the client sees it close: a refused open is tried again, a bounded
      // number of times, once the other sessions have had a moment to end.
      for (let attempt = 1; ; attempt++) {
        try {
          return await this.execNow(command, timeoutMs)
        } catch (e) {
          if (!(e instanceof SessionRefused) || attempt >= SESSION_OPEN_TRIES) throw e
          await new Promise((resolve) => setTimeout(resolve, 50 * attempt))
        }
      }
    })
  }

  private execNow(command: CommandLine, timeoutMs: number): Promise<ExecResult> {
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined
      this.client.exec(command, (err, stream) => {
        if (err) {
          const refused = /Channel open failure/.test(err.message)
          return reject(
            new (refused ? SessionRefused : SshError)(`cannot run "${programOf(command)}" over SSH: ${err.message}`),
          )
        }
        const out: Buffer[] = []
        let stderr = ''
        timer = setTimeout(() => {
          stream.close()
          reject(new SshError(`"${programOf(command)}" did not finish within ${timeoutMs / 1000}s`))
        }, timeoutMs)
        stream.on('data', (chunk: Buffer) => out.push(chunk))
        stream.stderr.on('data', (chunk: Buffer) => {
          if (stderr.length < 4096) stderr += chunk.toString()
        })
        stream.on('close', (code: number | null) => {
          clearTimeout(timer)
          resolve({code, stdout: Buffer.concat(out), stderr})
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
    this.client.end()
  }
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
