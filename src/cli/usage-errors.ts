import type {Command, Config} from '@oclif/core'
import {similarNames} from '../cluster/similar-names.js'

/** What of a command a usage error names: its flags, its arguments and its examples. */
type CommandSpec = Pick<Command.Class, 'flags' | 'args' | 'examples'>

/** oclif's parse errors, told apart by what they carry (their classes are oclif's internals). */
interface ParseErrorShape {
  message: string
  flags?: unknown
  args?: unknown
}

// eslint-disable-next-line no-control-regex -- oclif colours parts of its messages in a terminal
const SGR = /\x1b\[[0-9;]*m/g

/**
 * oclif's parse errors as one line a person can act on, naming the command as it is typed: an unknown flag with the
 * closest flags the command has ("did you mean"), a missing argument or required flag with what it is and an example
 * that gives it. Undefined for any other error (the caller prints its own message).
 */
export function usageMessage(
  err: ParseErrorShape,
  command: CommandSpec,
  id: string | undefined,
  config: Pick<Config, 'bin' | 'topicSeparator'>,
): string | undefined {
  const words = id ? id.split(':') : []
  const separator = config.topicSeparator === ':' ? ' ' : config.topicSeparator
  const commandWords = words.join(separator)
  const help = [config.bin, ...words].join(separator) + ' --help'
  const message = err.message.replace(SGR, '')
  if (/^Nonexistent flags?: /.test(message) && Array.isArray(err.flags))
    return (err.flags as string[]).map((typed) => unknownFlag(typed, command, help)).join('; ')
  if (/^Missing \d+ required args?/.test(message) && Array.isArray(err.args)) {
    const missing = (err.args as Array<{name: string; description?: string}>).map((a) => ({
      name: a.name.toUpperCase(),
      description: a.description,
    }))
    return `${commandWords} needs ${listed(missing)}${example(command, config.bin, () => true)}; see ${help}`
  }
  const missingFlags = [...message.matchAll(/Missing required flag ([\w-]+)/g)].map((m) => m[1])
  if (missingFlags.length > 0) {
    const flags = Object.keys(command.flags ?? {}).filter((f) => missingFlags.includes(f))
    const described = flags.map((f) => ({name: `--${f}`, description: command.flags?.[f]?.description}))
    const givesAll = (e: string) => flags.every((f) => e.includes(`--${f}`))
    return `${commandWords} needs ${listed(described)}${example(command, config.bin, givesAll)}; see ${help}`
  }
  return undefined
}

/** One thing: `NAME: what it is`; several: `A (what) and B (what)`. */
function listed(things: Array<{name: string; description?: string}>): string {
  if (things.length === 1) return things[0].description ? `${things[0].name}: ${things[0].description}` : things[0].name
  return things.map((t) => (t.description ? `${t.name} (${t.description})` : t.name)).join(' and ')
}

/** `--ouput: no such flag; did you mean --output?`, from the command's long flags (and help). */
function unknownFlag(typed: string, command: CommandSpec, help: string): string {
  const bare = typed.replace(/^-+/, '').replace(/=.*$/s, '')
  const long = [...Object.keys(command.flags ?? {}), 'help']
  const chars = Object.entries(command.flags ?? {}).flatMap(([n, f]) => (f.char ? [[f.char as string, n]] : []))
  const suggestions = typed.startsWith('--')
    ? similarNames(bare, long, 2).map((n) => `--${n}`)
    : chars.filter(([c]) => c.toLowerCase() === bare.toLowerCase()).map(([c, n]) => `-${c} (--${n})`)
  const shown = typed.replace(/=.*$/s, '')
  return suggestions.length > 0
    ? `${shown}: no such flag; did you mean ${suggestions.join(' or ')}?`
    : `${shown}: no such flag (${help} lists them)`
}

/** The command's first example that `gives` accepts, as the user would type it ("; e.g. …"), or nothing. */
function example(command: CommandSpec, bin: string, gives: (example: string) => boolean): string {
  const examples = (command.examples ?? []).map((e) => (typeof e === 'string' ? e : e.command))
  const found = examples.map((e) => e.replaceAll('<%= config.bin %>', bin)).find(gives)
  return found ? `; e.g. ${found}` : ''
}
