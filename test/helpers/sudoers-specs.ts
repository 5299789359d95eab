/**
 * deploy/sudoers/kproxy-doctor as sudo reads it, for the tests that check it against the doctor's reads: each allowed
 * command, and whether it allows a command line.
 */
import {readFileSync} from 'node:fs'
import {basename} from 'node:path'

export const SUDOERS = 'deploy/sudoers/kproxy-doctor'

/** The commands the snippet's KPD_READS allows, as "program args" (basename; "" read as no arguments). */
export function sudoersSpecs(text = readFileSync(SUDOERS, 'utf8')): string[] {
  const joined = text.replace(/\\\n/g, ' ')
  const alias = /^Cmnd_Alias\s+KPD_READS\s*=\s*(.+)$/m.exec(joined)
  if (!alias) throw new Error(`${SUDOERS} defines no Cmnd_Alias KPD_READS`)
  return alias[1].split(',').map((spec) => {
    const [program, ...args] = spec.trim().split(/\s+/)
    return [basename(program), ...args.filter((a) => a !== '""')].join(' ')
  })
}

/** Arguments that sudo (>= 1.9.10) reads as a regular expression over the whole argument list. */
export const isRegex = (args: string) => args.startsWith('^') && args.endsWith('$')

/**
 * Whether a spec allows `command` ("program args", shell quotes removed) as sudo matches it: a regular expression over
 * the joined arguments (sudoers' escapes of ':' ',' '=' '\' removed), else the words with any glob character matching
 * as fnmatch does: `*` across words too.
 */
export function sudoAllows(spec: string, command: string): boolean {
  const [program, ...args] = spec.split(' ')
  const [ran, ...ranArgs] = command.split(' ')
  if (ran !== program) return false
  const joined = args.join(' ')
  if (isRegex(joined)) return new RegExp(joined.replace(/\\([:,=\\])/g, '$1')).test(ranArgs.join(' '))
  const glob = joined
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.')
  return new RegExp(`^${glob}$`).test(ranArgs.join(' '))
}
