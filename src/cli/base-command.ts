import {Command} from '@oclif/core'
import {errorDocument, serialize} from '../report/document.js'
import {stderrLine} from './stderr.js'
import {usageMessage} from './usage-errors.js'

/**
 * How a kproxy-doctor command fails, whatever failed (bad flags included): one line on stderr and exit 2; when the
 * user asked for `-o json` or `-o yaml`, an error document on stdout as well, so a script reading stdout sees why.
 */
export abstract class DoctorCommand extends Command {
  protected override async catch(err: Error & {code?: string}): Promise<void> {
    if (err.code === 'EEXIT') throw err
    const message = usageMessage(err, this.ctor, this.id, this.config) ?? oneLine(err.message || String(err))
    stderrLine(message)
    const format = requestedFormat(this.argv)
    if (format)
      process.stdout.write(
        serialize(errorDocument(message, {toolVersion: this.config.version, time: new Date().toISOString()}), format),
      )
    process.exitCode = 2
  }
}

/** oclif's validation errors span lines ("The following error occurred:", the errors, "See more help with --help"). */
function oneLine(message: string): string {
  const lines = message
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !/^The following errors? occurred:$/.test(l) && !/^See more help with --help$/.test(l))
  return lines.join('; ') || message.split('\n')[0]
}

/** The -o/--output value on the command line when it is json or yaml, read without the parser (which may be what failed). */
function requestedFormat(argv: string[]): 'json' | 'yaml' | undefined {
  let value: string | undefined
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (arg === '--') break
    if (arg === '-o' || arg === '--output') value = argv[++i]
    else if (arg.startsWith('--output=')) value = arg.slice('--output='.length)
    else if (/^-o./.test(arg)) value = arg.slice(arg[2] === '=' ? 3 : 2)
  }
  return value === 'json' || value === 'yaml' ? value : undefined
}
