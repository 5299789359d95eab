import {existsSync, readFileSync} from 'node:fs'
import {homedir} from 'node:os'
import {resolve} from 'node:path'

/** The OpenSSH client settings the doctor honours for one host. */
export interface SshHostConfig {
  alias: string
  hostName: string
  port: number
  user?: string
  identityFiles: string[]
  userKnownHostsFiles: string[]
  strictHostKeyChecking?: string
  hostKeyAlias?: string
  identitiesOnly: boolean
  connectTimeoutSeconds?: number
  /** Compression yes: the dumps come back through gzip -1 where the node has it (see ssh-transport.ts). */
  compression?: boolean
}

interface Block {
  patterns: string[]
  options: Array<[string, string[]]>
}

const MULTI = new Set(['identityfile'])

/** Parses an OpenSSH client config (Host blocks; Match and Include are not followed). */
export function parseSshConfig(text: string): Block[] {
  const blocks: Block[] = [{patterns: ['*'], options: []}]
  for (const raw of text.split('\n')) {
    const line = raw.trim()
    if (line === '' || line.startsWith('#')) continue
    const m = /^(\S+?)(?:\s*=\s*|\s+)(.*)$/.exec(line)
    if (!m) continue
    const key = m[1].toLowerCase()
    const args = splitArgs(m[2])
    if (key === 'host') blocks.push({patterns: args, options: []})
    else if (key === 'match') blocks.push({patterns: ['!*'], options: []})
    else blocks[blocks.length - 1].options.push([key, args])
  }
  return blocks
}

function splitArgs(text: string): string[] {
  const out: string[] = []
  const re = /"([^"]*)"|(\S+)/g
  for (let m = re.exec(text); m; m = re.exec(text)) out.push(m[1] ?? m[2])
  return out
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

function hostMatches(patterns: string[], host: string): boolean {
  let matched = false
  for (const p of patterns) {
    if (p.startsWith('!')) {
      if (globToRegExp(p.slice(1)).test(host)) return false
    } else if (globToRegExp(p).test(host)) matched = true
  }
  return matched
}

function expandPath(p: string, host: string, user: string | undefined): string {
  const expanded = p
    .replace(/^~(?=\/|$)/, homedir())
    .replace(/%d/g, homedir())
    .replace(/%h/g, host)
    .replace(/%r/g, user ?? '')
    .replace(/%%/g, '%')
  return resolve(expanded)
}

/** What OpenSSH would use for `alias`: first value wins, IdentityFile accumulates. */
export function resolveHost(blocks: Block[], alias: string, fallbackHostName: string): SshHostConfig {
  const first = new Map<string, string[]>()
  const identity: string[] = []
  for (const b of blocks) {
    if (!hostMatches(b.patterns, alias)) continue
    for (const [key, args] of b.options) {
      if (MULTI.has(key)) identity.push(args[0])
      else if (!first.has(key)) first.set(key, args)
    }
  }
  const get = (k: string) => first.get(k)?.[0]
  const hostName = (get('hostname') ?? fallbackHostName).replace(/%h/g, alias)
  const user = get('user')
  const knownHosts = first.get('userknownhostsfile') ?? ['~/.ssh/known_hosts', '~/.ssh/known_hosts2']
  const defaults = ['~/.ssh/id_ed25519', '~/.ssh/id_ecdsa', '~/.ssh/id_rsa']
  return {
    alias,
    hostName,
    port: Number(get('port') ?? 22),
    user,
    identityFiles: (identity.length > 0 ? identity : defaults).map((f) => expandPath(f, hostName, user)),
    userKnownHostsFiles: knownHosts
      .filter((f) => f !== 'none' && f !== '/dev/null')
      .map((f) => expandPath(f, hostName, user)),
    strictHostKeyChecking: get('stricthostkeychecking')?.toLowerCase(),
    hostKeyAlias: get('hostkeyalias'),
    identitiesOnly: get('identitiesonly')?.toLowerCase() === 'yes',
    connectTimeoutSeconds: get('connecttimeout') ? Number(get('connecttimeout')) : undefined,
    compression: get('compression')?.toLowerCase() === 'yes',
  }
}

export function loadSshConfig(path: string | undefined): Block[] {
  const file = path ?? resolve(homedir(), '.ssh/config')
  if (!existsSync(file)) {
    if (path) throw new Error(`SSH config ${path} does not exist`)
    return []
  }
  return parseSshConfig(readFileSync(file, 'utf8'))
}
