import {DoctorCommand} from '../cli/base-command.js'
import {PRINT_EXIT_CODES} from '../cli/exit-codes.js'

export default class Version extends DoctorCommand {
  static override summary = 'Print the version (the same line as --version)'
  static override description = PRINT_EXIT_CODES
  static override examples = ['<%= config.bin %> version']

  async run(): Promise<void> {
    await this.parse(Version)
    process.stdout.write(`${this.config.userAgent}\n`)
  }
}
