import {existsSync, readdirSync, readFileSync, statSync} from 'node:fs'
import {homedir, userInfo} from 'node:os'
import {isAbsolute, join, sep} from 'node:path'
import SSHConfig, {LineType, type Line, type Match, type Section} from 'ssh-config'
import {
  globToRegExp,
  onPath,
  OpenSshReader,
  SshConfigError,
  type SshConfigReader,
  type SshConfigSource,
} from './ssh-config.js'
import type {RawOptions} from './ssh-options.js'

/**
 * OpenSSH configuration files read with the `ssh-config` package: where no `ssh` is installed (a container image),
 * it computes a host's options (the fallback of `ssh -G`), and it answers whether a file names a node at all. Include
 * is followed here (the package leaves it as a directive); what the package cannot evaluate (Match exec and criteria
 * it does not know, a missing included file, canonical host names) is an error naming it, never a silent miss.
 */

/** OpenSSH's limit on nested Include. */
const MAX_INCLUDE_DEPTH = 16

interface ConfigFile {
  path: string
  /** Where a relative Include points: ~/.ssh for a user's file (and -F FILE), /etc/ssh for the system's. */
  includeBase: string
}

/** The files ssh reads, in its order: -F FILE alone, else ~/.ssh/config then /etc/ssh/ssh_config (those present). */
function configFiles(source: Pick<SshConfigSource, 'file'>): ConfigFile[] {
  const userBase = join(homedir(), '.ssh')
  if (source.file) {
    if (!existsSync(source.file)) throw new SshConfigError(`SSH config ${source.file} does not exist`)
    return [{path: source.file, includeBase: userBase}]
  }
  return [
    {path: join(userBase, 'config'), includeBase: userBase},
    {path: '/etc/ssh/ssh_config', includeBase: '/etc/ssh'},
  ].filter((f) => existsSync(f.path))
}

function valuesOf(value: Section['value']): string[] {
  return typeof value === 'string' ? [value] : value.map((v) => v.val)
}

const isDirective = (line: Line): line is Section | Match | (Line & {type: LineType.DIRECTIVE; param: string}) =>
  line.type === LineType.DIRECTIVE
const isSection = (line: Line): line is Section => isDirective(line) && 'config' in line

function parseFile(path: string): SSHConfig {
  try {
    return SSHConfig.parse(readFileSync(path, 'utf8'))
  } catch (e) {
    throw new SshConfigError(`SSH config ${path}: ${(e as Error).message}`, {cause: e})
  }
}

/** The files an Include pattern names (~ and relative names as OpenSSH resolves them; * ? [ ] in any part). */
function includedFiles(pattern: string, base: string, strict: boolean): string[] {
  const path = pattern.replace(/^~(?=\/|$)/, homedir())
  const full = isAbsolute(path) ? path : join(base, path)
  if (!/[*?[]/.test(full)) {
    if (!existsSync(full) && !strict) return []
    if (!existsSync(full))
      throw new SshConfigError(
        `Include ${pattern}: ${full} does not exist (OpenSSH would skip it; the fallback reader will not guess)`,
      )
    return [full]
  }
  let found: string[] = [sep]
  for (const part of full.split(sep).filter(Boolean)) {
    const re = /[*?[]/.test(part) ? globToRegExp(part) : undefined
    found = found.flatMap((dir) => {
      if (!re) return [join(dir, part)]
      try {
        return readdirSync(dir)
          .filter((name) => re.test(name) && !name.startsWith('.'))
          .sort()
          .map((name) => join(dir, name))
      } catch {
        return []
      }
    })
  }
  return found.filter((f) => existsSync(f) && statSync(f).isFile())
}

/**
 * A file's lines with every Include replaced by the lines it names. An Include inside a Host or Match block applies
 * only while that block matches: its plain options stay in the block; its own Host or Match blocks would apply only
 * when both match, which the package cannot say, so that is refused unless the enclosing block is `Host *`.
 */
function expandIncludes(config: SSHConfig, file: ConfigFile, depth: number, strict: boolean): Line[] {
  if (depth > MAX_INCLUDE_DEPTH)
    throw new SshConfigError(`${file.path}: Include nested deeper than ${MAX_INCLUDE_DEPTH}`)
  const out: Line[] = []
  const include = (line: Line & {value: Section['value']}) =>
    valuesOf(line.value).flatMap((pattern) =>
      includedFiles(pattern, file.includeBase, strict).flatMap((path) =>
        expandIncludes(parseFile(path), {path, includeBase: file.includeBase}, depth + 1, strict),
      ),
    )
  for (const line of config) {
    if (!isDirective(line)) continue
    if (!isSection(line)) {
      if (/^include$/i.test(line.param)) out.push(...include(line))
      else out.push(line)
      continue
    }
    // A block's lines up to each Include, the included lines, and the block again for the lines after it.
    let current: Line[] = []
    const flush = () => out.push({...line, config: Object.assign(new SSHConfig(), current)} as Section)
    for (const inner of line.config) {
      if (!isDirective(inner) || !/^include$/i.test(inner.param)) {
        current.push(inner)
        continue
      }
      const included = include(inner as Line & {value: Section['value']})
      const firstSection = included.findIndex(isSection)
      current.push(...(firstSection < 0 ? included : included.slice(0, firstSection)))
      if (firstSection < 0) continue
      const everywhere = /^host$/i.test(line.param) && valuesOf(line.value).join(' ') === '*'
      if (!everywhere && strict)
        throw new SshConfigError(
          `${file.path}: an Include inside "${line.param} ${valuesOf(line.value).join(' ')}" names a file with Host or Match blocks: only OpenSSH's ssh can evaluate that (install an ssh client)`,
        )
      flush()
      out.push(...included.slice(firstSection))
      current = []
    }
    flush()
  }
  return out
}

/**
 * Every line of the configuration ssh would read, Includes followed. `strict`: what the package cannot evaluate is an
 * error (computing a host's options); else it is read as far as it goes (which nodes a configuration names).
 */
function readConfig(source: Pick<SshConfigSource, 'file'>, strict: boolean): SSHConfig {
  const all = new SSHConfig()
  for (const file of configFiles(source)) all.push(...expandIncludes(parseFile(file.path), file, 0, strict))
  return all
}

/** The Match criteria the package evaluates as OpenSSH does. */
const EVALUATED_CRITERIA = new Set(['all', 'host', 'originalhost', 'user', 'localuser', 'final'])

function checkMatchBlocks(config: SSHConfig): void {
  for (const line of config) {
    if (!isSection(line) || !('criteria' in line)) continue
    for (const criterion of Object.keys((line as Match).criteria)) {
      if (EVALUATED_CRITERIA.has(criterion.toLowerCase())) continue
      throw new SshConfigError(
        `the SSH configuration has "Match ${valuesOf(line.value).join(' ')}": without OpenSSH's ssh installed, "${criterion}" cannot be evaluated`,
      )
    }
  }
}

const REPEATED = new Set(['identityfile', 'certificatefile', 'localforward', 'remoteforward', 'dynamicforward'])

/**
 * A host's options computed by the package, with OpenSSH's defaults for what the doctor reads, in the shape `ssh -G`
 * gives (ssh-config.ts then judges them the same way).
 */
export class FallbackReader implements SshConfigReader {
  readonly by: string
  private readonly config: SSHConfig

  constructor(source: SshConfigSource) {
    this.config = readConfig(source, true)
    checkMatchBlocks(this.config)
    this.by = `the ssh_config reader of the ssh-config package (no ssh installed)${source.file ? `, ${source.file}` : ''}`
  }

  async options(alias: string, override: {user?: string; port?: number} = {}): Promise<RawOptions> {
    const computed = this.config.compute(
      {Host: alias, ...(override.user ? {User: override.user} : {})},
      {ignoreCase: true, matchExec: false},
    )
    const raw: RawOptions = new Map()
    for (const [key, value] of Object.entries(computed)) {
      if (key === 'host') continue
      raw.set(key, Array.isArray(value) ? (REPEATED.has(key) ? value : [value.join(' ')]) : [value])
    }
    // ProxyJump and ProxyCommand exclude each other: the first one obtained wins, as in OpenSSH.
    const keys = [...raw.keys()]
    if (raw.has('proxyjump') && raw.has('proxycommand'))
      raw.delete(keys.indexOf('proxyjump') < keys.indexOf('proxycommand') ? 'proxycommand' : 'proxyjump')
    const canonical = raw.get('canonicalizehostname')?.[0]?.toLowerCase()
    if (canonical === 'yes' || canonical === 'always')
      throw new SshConfigError(
        `the SSH configuration for ${alias} sets CanonicalizeHostname ${canonical}: only OpenSSH's ssh can canonicalise host names (install an ssh client)`,
      )
    const set = (key: string, value: string[]) => {
      if (!raw.has(key)) raw.set(key, value)
    }
    if (override.port) raw.set('port', [String(override.port)])
    const hostName = raw.get('hostname')?.[0]
    raw.set('hostname', [hostName ? hostName.replace(/%(.)/g, (_, t: string) => (t === 'h' ? alias : t)) : alias])
    set('port', ['22'])
    set('user', [userInfo().username])
    set(
      'identityfile',
      ['id_rsa', 'id_ecdsa', 'id_ecdsa_sk', 'id_ed25519', 'id_ed25519_sk', 'id_xmss', 'id_dsa'].map(
        (f) => `~/.ssh/${f}`,
      ),
    )
    set('userknownhostsfile', ['~/.ssh/known_hosts ~/.ssh/known_hosts2'])
    set('globalknownhostsfile', ['/etc/ssh/ssh_known_hosts /etc/ssh/ssh_known_hosts2'])
    return raw
  }

  async baseline(): Promise<RawOptions | undefined> {
    return undefined
  }
}

/**
 * Whether the configuration names a node: a Host pattern other than a bare `*`, or a `Match host`/`originalhost`
 * criterion, matches its name (a `Host *` block holds defaults, not a way to the node). Includes are followed; a
 * configuration file given explicitly must exist.
 */
export function configNamesNode(source: Pick<SshConfigSource, 'file'>): (node: string) => boolean {
  const sections = readConfig(source, false).filter(isSection)
  const patterns = sections.flatMap((s): string[][] => {
    if (/^host$/i.test(s.param)) return [valuesOf(s.value)]
    const criteria = (s as Match).criteria ?? {}
    return Object.entries(criteria)
      .filter(([k]) => /^(host|originalhost)$/i.test(k))
      .map(([, v]) => (typeof v === 'string' ? v : v.map((x) => x.val).join(',')).split(','))
  })
  return (node) =>
    patterns.some((list) => {
      const positive = list.filter((p) => !p.startsWith('!') && p !== '*')
      const excluded = list.some((p) => p.startsWith('!') && globToRegExp(p.slice(1)).test(node))
      return !excluded && positive.some((p) => globToRegExp(p).test(node))
    })
}

/** The reader for this machine: OpenSSH's `ssh -G` where `ssh` is installed, else the fallback parser. */
export async function sshConfigReader(source: SshConfigSource): Promise<SshConfigReader> {
  if (source.file && !existsSync(source.file)) throw new SshConfigError(`SSH config ${source.file} does not exist`)
  const ssh = onPath('ssh')
  return ssh ? new OpenSshReader(ssh, source) : new FallbackReader(source)
}
