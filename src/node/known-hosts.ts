import {createHmac} from 'node:crypto'
import {existsSync, readFileSync} from 'node:fs'
import {globToRegExp} from './ssh-config.js'

export interface KnownHostsResult {
  status: 'match' | 'mismatch' | 'unknown'
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

/** Checks a host's raw public key blob against known_hosts files. */
export function checkKnownHosts(files: string[], name: string, keyBlob: Buffer): KnownHostsResult {
  let sawHost: string | undefined
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
      if (marker === '@revoked') continue
      sawHost = file
      if (Buffer.from(fields[2], 'base64').equals(keyBlob)) return {status: 'match', file}
    }
  }
  return sawHost ? {status: 'mismatch', file: sawHost} : {status: 'unknown'}
}
