import {Args} from '@oclif/core'
import {DoctorCommand} from '../cli/base-command.js'
import {bashCompletion, zshCompletion, type CompletableCommand} from '../cli/completion-script.js'
import {PRINT_EXIT_CODES} from '../cli/exit-codes.js'

export default class Completion extends DoctorCommand {
  static override summary = 'Print a shell completion script (bash or zsh)'
  static override description =
    'Load it in the current shell with `source <(kproxy-doctor completion bash)`, or add that line to ~/.bashrc (~/.zshrc for zsh).\n\n' +
    PRINT_EXIT_CODES
  static override examples = [
    'source <(<%= config.bin %> completion bash)',
    'source <(<%= config.bin %> completion zsh)',
  ]
  static override args = {shell: Args.string({required: true, options: ['bash', 'zsh'], description: 'the shell'})}

  async run(): Promise<void> {
    const {args} = await this.parse(Completion)
    const commands: CompletableCommand[] = this.config.commands
      .filter((c) => !c.hidden)
      .map((c) => ({
        words: c.id.split(':').join(' '),
        flags: Object.entries(c.flags)
          .filter(([, f]) => !f.hidden)
          .map(([name, f]) => ({
            name,
            char: f.char,
            takesValue: f.type === 'option',
            options: f.type === 'option' ? f.options : undefined,
          })),
      }))
    const bin = this.config.pjson.oclif.bin ?? this.config.name
    process.stdout.write(args.shell === 'zsh' ? zshCompletion(bin, commands) : bashCompletion(bin, commands))
  }
}
