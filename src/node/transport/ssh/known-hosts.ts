import {createHmac} from 'node:crypto'
import {existsSync, readFileSync} from 'node:fs'
import {globToRegExp} from './ssh-config.js'

export interface KnownHostsResult {
  /** revoked: the key is listed under @revoked, which refuses it whatever other lines say. */
  status: 'match' | 'mismatch' | 'unknown' | 'revoked'
  file?: string
}

/** The name OpenSSH looks a host up by in known_hosts: "host", or "[host]:port" off port 22. */
export function knownHostsName(host: string, port: number): string {
  return port === 22 ? host : `[${host}]:${port}`
}

function patternMatches(pattern: string, name: string): boolean {
  if (pattern.startsWith('|1|')) {
    const [, , salt, hash] = pattern.split('|')
    if (!salt || !hash) return false
    return createHmac('sha1', Buffer.from(salt, 'base64')).update(name).digest('base64') === hash
  }
  return globToRegExp(pattern).test(name)
}

interface KnownKey {
  file: string
  revoked: boolean
  type: string
  blob: Buffer
}

/** The keys known_hosts lists for `name` (host keys and @revoked ones; @cert-authority lines are not host keys). */
function keysFor(files: string[], name: string): KnownKey[] {
  const out: KnownKey[] = []
  for (const file of files) {
    if (!existsSync(file)) continue
    for (const raw of readFileSync(file, 'utf8').split('\n')) {
      const line = raw.trim()
      if (line === '' || line.startsWith('#')) continue
      const fields = line.split(/\s+/)
      const marker = fields[0].startsWith('@') ? fields.shift() : undefined
      if (fields.length < 3 || marker === '@cert-authority') continue
      const patterns = fields[0].split(',')
      const negated = patterns.some((p) => p.startsWith('!') && patternMatches(p.slice(1), name))
      if (negated || !patterns.some((p) => !p.startsWith('!') && patternMatches(p, name))) continue
      out.push({file, revoked: marker === '@revoked', type: fields[1], blob: Buffer.from(fields[2], 'base64')})
    }
  }
  return out
}

/** Checks a host's raw public key blob against known_hosts files. */
export function checkKnownHosts(files: string[], name: string, keyBlob: Buffer): KnownHostsResult {
  const keys = keysFor(files, name)
  const revoked = keys.find((k) => k.revoked && k.blob.equals(keyBlob))
  if (revoked) return {status: 'revoked', file: revoked.file}
  const current = keys.filter((k) => !k.revoked)
  const match = current.find((k) => k.blob.equals(keyBlob))
  if (match) return {status: 'match', file: match.file}
  return current.length > 0 ? {status: 'mismatch', file: current[0].file} : {status: 'unknown'}
}

/** ssh2's host key algorithms for each known_hosts key type, in ssh2's own order of preference. */
const ALGORITHMS_BY_KEY_TYPE: Array<[string, string[]]> = [
  ['ssh-ed25519', ['ssh-ed25519']],
  ['ecdsa-sha2-nistp256', ['ecdsa-sha2-nistp256']],
  ['ecdsa-sha2-nistp384', ['ecdsa-sha2-nistp384']],
  ['ecdsa-sha2-nistp521', ['ecdsa-sha2-nistp521']],
  ['ssh-rsa', ['rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa']],
  ['ssh-dss', ['ssh-dss']],
]

/**
 * The host key algorithms to offer a host, from the key types known_hosts holds for it (as OpenSSH does): a server
 * that has an ed25519 and an RSA key, known only by its RSA key, must be asked for its RSA key, or its ed25519 key
 * (which ssh2 prefers) would look like a changed key. undefined when known_hosts has no key for the host.
 */
export function hostKeyAlgorithms(files: string[], name: string): string[] | undefined {
  const keys = keysFor(files, name)
  const revoked = keys.filter((k) => k.revoked)
  const types = new Set(keys.filter((k) => !revoked.some((r) => r.blob.equals(k.blob))).map((k) => k.type))
  const algorithms = ALGORITHMS_BY_KEY_TYPE.filter(([type]) => types.has(type)).flatMap(([, names]) => names)
  return algorithms.length > 0 ? algorithms : undefined
}
