import {spawn, type ChildProcess} from 'node:child_process'
import {Duplex} from 'node:stream'
import {isIP} from 'node:net'
import {SshConfigError, type SshHostConfig} from './ssh-config.js'

/**
 * ProxyCommand: the command the configuration names, run through /bin/sh as OpenSSH runs it (`exec COMMAND`), with
 * SSH spoken over its stdin and stdout.
 *
 * Its %-tokens are expanded as OpenSSH does, and OpenSSH does not quote what it substitutes. The values come from the
 * configuration and from the cluster (a node's name and address), so each must be a plain host name, an IP address, a
 * user name or a port: characters the shell takes literally, unquoted or inside either kind of quotes. Anything else
 * is refused by name rather than quoted, because a quoted value inside the user's own quotes (`nc "%h" %p`) would
 * change what the command means.
 */

/** A DNS name or a node name (RFC 1123 labels, `_` allowed): never starts with `-`. */
const HOST_NAME = /^[A-Za-z0-9_]([A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?$/
const USER_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$/

function plainHost(value: string): boolean {
  return isIP(value) !== 0 ? !value.includes('%') : HOST_NAME.test(value)
}

/** The command line with %h %p %r %n %% expanded; a value that is not plain refuses the command. */
export function expandProxyCommand(template: string, host: SshHostConfig): string {
  const values: Record<string, {value: string; ok: boolean}> = {
    h: {value: host.hostName, ok: plainHost(host.hostName)},
    n: {value: host.alias, ok: plainHost(host.alias)},
    p: {value: String(host.port), ok: Number.isInteger(host.port) && host.port > 0 && host.port < 65536},
    r: {value: host.user, ok: USER_NAME.test(host.user)},
  }
  return template.replace(/%(.)/g, (_, token: string) => {
    if (token === '%') return '%'
    const v = values[token]
    if (!v) throw new SshConfigError(`ProxyCommand ${template}: unknown token %${token} (OpenSSH knows %h %n %p %r %%)`)
    if (!v.ok)
      throw new SshConfigError(
        `ProxyCommand for ${host.alias}: %${token} would be ${JSON.stringify(v.value)}, which is not a plain host name, address, user or port: not run`,
      )
    return v.value
  })
}

/** The ProxyCommand processes still running, each a process group of its own: ended when this process exits. */
const running = new Set<ChildProcess>()
let exitHookInstalled = false

function endGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return
  try {
    process.kill(-child.pid, signal)
  } catch {
    // already gone
  }
}

/** A running ProxyCommand: SSH goes over `sock`; `end()` kills it (and what it started). */
export interface ProxyCommandProcess {
  sock: Duplex
  /** The last of what it wrote on stderr (for messages). */
  stderr(): string
  /** Resolves with its exit status (or signal) when it exits. */
  exited: Promise<string>
  end(): void
}

export function startProxyCommand(line: string): ProxyCommandProcess {
  const child = spawn('/bin/sh', ['-c', `exec ${line}`], {stdio: ['pipe', 'pipe', 'pipe'], detached: true})
  running.add(child)
  if (!exitHookInstalled) {
    exitHookInstalled = true
    process.on('exit', () => {
      for (const c of running) endGroup(c, 'SIGKILL')
    })
  }
  let stderr = ''
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-2000)
  })
  const exited = new Promise<string>((resolve) => {
    child.on('error', (e) => resolve(`could not start: ${e.message}`))
    child.on('exit', (code, signal) => {
      running.delete(child)
      resolve(signal ? `ended by ${signal}` : `exited with status ${code}`)
    })
  })
  // A write after the command exited fails with EPIPE: the SSH client sees the stream end instead.
  child.stdin!.on('error', () => undefined)
  const sock = Duplex.from({readable: child.stdout!, writable: child.stdin!})
  sock.on('error', () => undefined)
  let ended = false
  return {
    sock,
    stderr: () => stderr.trim().split('\n').slice(-3).join(' | '),
    exited,
    end: () => {
      if (ended) return
      ended = true
      sock.destroy()
      endGroup(child, 'SIGTERM')
      const kill = setTimeout(() => endGroup(child, 'SIGKILL'), 1000)
      kill.unref()
      void exited.then(() => clearTimeout(kill))
    },
  }
}
