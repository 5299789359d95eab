import {execFile} from 'node:child_process'
import {createHash} from 'node:crypto'
import {accessSync, constants} from 'node:fs'
import {homedir, hostname as localHostName, userInfo} from 'node:os'
import {delimiter, join, resolve} from 'node:path'
import {refusedOptions, unknownOptionProblems, type RawOptions} from './ssh-options.js'

/** The OpenSSH client settings the doctor connects to one host with (a node, or a jump host on the way). */
export interface SshHostConfig {
  /** The name the configuration was looked up by (a node's name or address, or a ProxyJump hop). */
  alias: string
  hostName: string
  port: number
  user: string
  identityFiles: string[]
  identitiesOnly: boolean
  /** The ssh-agent socket to ask for keys (IdentityAgent, else $SSH_AUTH_SOCK); undefined: no agent. */
  identityAgent?: string
  userKnownHostsFiles: string[]
  globalKnownHostsFiles?: string[]
  strictHostKeyChecking?: string
  hostKeyAlias?: string
  connectTimeoutSeconds?: number
  /** Compression yes: the dumps come back through gzip -1 where the node has it (see ssh-transport.ts). */
  compression?: boolean
  /** ProxyJump: the hops, first to last, as written (`[user@]host[:port]`). */
  proxyJump?: string[]
  /** ProxyCommand, its %-tokens not yet expanded (proxy-command.ts does, at connect time). */
  proxyCommand?: string
  /** Ciphers, MACs, KexAlgorithms, HostKeyAlgorithms as configured (ssh-session.ts offers the ones ssh2 speaks). */
  algorithms?: {cipher?: string[]; mac?: string[]; kex?: string[]; serverHostKey?: string[]}
  addressFamily?: 'inet' | 'inet6'
  bindAddress?: string
  serverAliveIntervalSeconds?: number
  serverAliveCountMax?: number
  /** Login methods the configuration allows that the doctor cannot use (named when a login is refused). */
  unusableLogins?: string[]
}

/** The SSH configuration could not be read, or asks for something the doctor cannot do: one line, naming it. */
export class SshConfigError extends Error {
  override name = 'SshConfigError'
}

/** Where the OpenSSH configuration comes from. */
export interface SshConfigSource {
  /** --ssh-config: `ssh -F FILE`; undefined: ~/.ssh/config, then /etc/ssh/ssh_config, as ssh reads them. */
  file?: string
  /** How long `ssh -G` may take (a `Match exec` runs a command). */
  timeoutMs: number
}

/** Reads one host's options the way OpenSSH does. */
export interface SshConfigReader {
  /** Said in --verbose: which reader applies the configuration. */
  readonly by: string
  options(alias: string, override?: {user?: string; port?: number}): Promise<RawOptions>
  /** OpenSSH's defaults (the options of an empty configuration), when the reader knows them. */
  baseline(): Promise<RawOptions | undefined>
}

/** Whether `program` is an executable file in a folder of $PATH. */
export function onPath(program: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue
    const candidate = join(dir, program)
    try {
      accessSync(candidate, constants.X_OK)
      return candidate
    } catch {
      // not here
    }
  }
  return undefined
}

/** A host name, address or ProxyJump hop as ssh takes it on its command line: never an option. */
function checkAlias(alias: string): void {
  if (!/^[A-Za-z0-9_[][A-Za-z0-9_.:%[\]-]*$/.test(alias) || alias.length > 253)
    throw new SshConfigError(`"${alias}" is not a host name or address ssh can look up`)
}

/** Parses `ssh -G` output: one "key value" line per option, repeated for IdentityFile and the like. */
export function parseSshG(text: string): RawOptions {
  const out: RawOptions = new Map()
  for (const line of text.split('\n')) {
    const m = /^(\S+) ?(.*)$/.exec(line.trimEnd())
    if (!m) continue
    const key = m[1].toLowerCase()
    out.set(key, [...(out.get(key) ?? []), m[2]])
  }
  return out
}

/** OpenSSH's own reading: `ssh -G [-F FILE] [-l USER] [-p PORT] -- HOST` applies Include, Match, Host, defaults. */
export class OpenSshReader implements SshConfigReader {
  readonly by: string
  private baselineRead?: Promise<RawOptions | undefined>

  constructor(
    private readonly ssh: string,
    private readonly source: SshConfigSource,
  ) {
    this.by = `ssh -G${source.file ? ` -F ${source.file}` : ''}`
  }

  options(alias: string, override: {user?: string; port?: number} = {}): Promise<RawOptions> {
    checkAlias(alias)
    const args = [
      '-G',
      ...(this.source.file ? ['-F', this.source.file] : []),
      ...(override.user ? ['-l', override.user] : []),
      ...(override.port ? ['-p', String(override.port)] : []),
      '--',
      alias,
    ]
    return this.run(args, `reading the SSH configuration for ${alias}`)
  }

  baseline(): Promise<RawOptions | undefined> {
    this.baselineRead ??= this.run(['-G', '-F', '/dev/null', '--', 'kproxy-doctor.invalid'], 'ssh -G').catch(
      () => undefined,
    )
    return this.baselineRead
  }

  private run(args: string[], what: string): Promise<RawOptions> {
    return new Promise((resolvePromise, reject) => {
      execFile(
        this.ssh,
        args,
        {timeout: this.source.timeoutMs, maxBuffer: 1 << 20, env: process.env},
        (err, stdout, stderr) => {
          if (!err) return resolvePromise(parseSshG(stdout))
          const killed = (err as {killed?: boolean}).killed
          const said = stderr
            .split('\n')
            .map((l) => l.trim())
            .filter((l) => l && !/^Pseudo-terminal/.test(l))
          reject(
            new SshConfigError(
              killed
                ? `${what}: ssh -G did not finish within ${this.source.timeoutMs / 1000}s (a Match exec command?)`
                : `${what}: ${said.join('; ') || err.message}`,
              {cause: err},
            ),
          )
        },
      ).stdin?.end()
    })
  }
}

/** The values OpenSSH expands %-tokens in file options with (ssh_config(5) TOKENS). */
interface TokenValues {
  alias: string
  hostName: string
  port: number
  user: string
  hostKeyAlias?: string
  proxyJump?: string
}

/** Expands ~, ${VAR} and the %-tokens of ssh_config(5) in a file name option; an unknown token is an error. */
function expandPath(value: string, t: TokenValues, option: string): string {
  const local = localHostName()
  const tokens: Record<string, () => string> = {
    '%': () => '%',
    d: () => homedir(),
    h: () => t.hostName,
    r: () => t.user,
    u: () => userInfo().username,
    p: () => String(t.port),
    n: () => t.alias,
    l: () => local,
    L: () => local.split('.')[0],
    i: () => String(process.getuid?.() ?? ''),
    k: () => t.hostKeyAlias ?? t.hostName,
    j: () => t.proxyJump ?? '',
    C: () =>
      createHash('sha1')
        .update(`${local}${t.hostName}${t.port}${t.user}${t.proxyJump ?? ''}`)
        .digest('hex'),
  }
  const expanded = value
    .replace(/^~(?=\/|$)/, homedir())
    .replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name: string) => {
      const v = process.env[name]
      if (v === undefined) throw new SshConfigError(`${option} ${value}: environment variable ${name} is not set`)
      return v
    })
    .replace(/%(.)/g, (_, token: string) => {
      const f = tokens[token]
      if (!f) throw new SshConfigError(`${option} ${value}: unknown token %${token}`)
      return f()
    })
  return resolve(expanded)
}

const first = (raw: RawOptions, key: string): string | undefined => raw.get(key)?.[0]
const words = (raw: RawOptions, key: string): string[] =>
  (raw.get(key) ?? []).flatMap((v) => v.split(/\s+/)).filter(Boolean)
const yes = (value: string | undefined) => value !== undefined && ['yes', 'true'].includes(value.toLowerCase())
const seconds = (value: string | undefined) =>
  value === undefined || value === 'none' || !/^\d+$/.test(value) ? undefined : Number(value)

/**
 * The settings the doctor connects with, from one host's options; an option it cannot honour (ssh-options.ts) is an
 * error naming it. `expandFiles`: the known_hosts and agent options still hold %-tokens (`ssh -G` expands them itself).
 */
export function hostConfigFrom(
  alias: string,
  raw: RawOptions,
  opts: {baseline?: RawOptions; expandFiles?: boolean},
): SshHostConfig {
  const problems = [...refusedOptions(raw), ...unknownOptionProblems(raw, opts.baseline)]
  if (problems.length > 0) throw new SshConfigError(`the SSH configuration for ${alias} sets ${problems.join('; ')}`)
  const hostName = first(raw, 'hostname') ?? alias
  const port = Number(first(raw, 'port') ?? 22)
  const user = first(raw, 'user') ?? userInfo().username
  const proxyJump = first(raw, 'proxyjump')
  const tokens: TokenValues = {alias, hostName, port, user, hostKeyAlias: first(raw, 'hostkeyalias'), proxyJump}
  const file = (option: string) => (v: string) =>
    opts.expandFiles || option === 'IdentityFile'
      ? expandPath(v, tokens, option)
      : resolve(v.replace(/^~(?=\/|$)/, homedir()))
  const knownHosts = (key: string, option: string) =>
    words(raw, key)
      .filter((f) => f !== 'none' && f !== '/dev/null')
      .map(file(option))
  const agent = first(raw, 'identityagent')
  const strict = first(raw, 'stricthostkeychecking')?.toLowerCase()
  const family = first(raw, 'addressfamily')
  // Only lists the configuration sets: OpenSSH's own defaults (which `ssh -G` prints) would override ssh2's order,
  // which puts chacha20-poly1305 last where its native binding is missing (it broke a login through a jump host).
  const list = (key: string) => {
    const value = first(raw, key)
    if (!value || value === opts.baseline?.get(key)?.[0]) return undefined
    return value.split(',')
  }
  const gssapi = yes(first(raw, 'gssapiauthentication')) ? ['GSSAPIAuthentication (Kerberos)'] : []
  const hostbased = yes(first(raw, 'hostbasedauthentication')) ? ['HostbasedAuthentication'] : []
  return {
    alias,
    hostName,
    port,
    user,
    identityFiles: (raw.get('identityfile') ?? []).filter((f) => f !== 'none').map(file('IdentityFile')),
    identitiesOnly: yes(first(raw, 'identitiesonly')),
    identityAgent:
      agent === 'none'
        ? undefined
        : agent === undefined || agent === 'SSH_AUTH_SOCK'
          ? process.env.SSH_AUTH_SOCK || undefined
          : agent.startsWith('$')
            ? process.env[agent.slice(1)] || undefined
            : file('IdentityAgent')(agent),
    userKnownHostsFiles: knownHosts('userknownhostsfile', 'UserKnownHostsFile'),
    globalKnownHostsFiles: knownHosts('globalknownhostsfile', 'GlobalKnownHostsFile'),
    // `ssh -G` prints yes and no as true and false.
    strictHostKeyChecking: ({true: 'yes', false: 'no'} as Record<string, string>)[strict ?? ''] ?? strict,
    hostKeyAlias: first(raw, 'hostkeyalias'),
    connectTimeoutSeconds: seconds(first(raw, 'connecttimeout')),
    compression: yes(first(raw, 'compression')),
    proxyJump: proxyJump && proxyJump !== 'none' ? proxyJump.split(',') : undefined,
    proxyCommand:
      first(raw, 'proxycommand') && first(raw, 'proxycommand') !== 'none' ? first(raw, 'proxycommand') : undefined,
    algorithms: {
      cipher: list('ciphers'),
      mac: list('macs'),
      kex: list('kexalgorithms'),
      serverHostKey: list('hostkeyalgorithms'),
    },
    addressFamily: family === 'inet' || family === 'inet6' ? family : undefined,
    bindAddress: first(raw, 'bindaddress'),
    serverAliveIntervalSeconds: seconds(first(raw, 'serveraliveinterval')),
    serverAliveCountMax: seconds(first(raw, 'serveralivecountmax')),
    unusableLogins: [...gssapi, ...hostbased],
  }
}

/** One host's settings, read the way OpenSSH reads them (with a hop's user and port from its ProxyJump entry). */
export async function resolveSshHost(
  reader: SshConfigReader,
  alias: string,
  override: {user?: string; port?: number} = {},
): Promise<SshHostConfig> {
  const raw = await reader.options(alias, override)
  return hostConfigFrom(alias, raw, {
    baseline: await reader.baseline(),
    expandFiles: !(reader instanceof OpenSshReader),
  })
}

/** OpenSSH host patterns: only * and ? are special. */
export function globToRegExp(glob: string): RegExp {
  return new RegExp(
    '^' +
      glob
        .replace(/[.+^${}()|[\]\\]/g, '\\$&')
        .replace(/\*/g, '.*')
        .replace(/\?/g, '.') +
      '$',
  )
}
