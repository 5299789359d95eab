import type {Hook} from '@oclif/core'
import {editDistance} from '../../cluster/similar-names.js'
import {stderrLine} from '../stderr.js'

/** An unknown command: one line naming the closest command, exit 2 (bad input), as for every other usage error. */
const hook: Hook<'command_not_found'> = async function (opts) {
  const separator = opts.config.topicSeparator
  // oclif cannot tell command words from arguments here: `svcc web` arrives as one id.
  const typedWords = opts.id.split(':')
  const commands = opts.config.commands.filter((c) => !c.hidden).map((c) => c.id.split(':'))
  let best: {command: string; typed: string; distance: number} | undefined
  for (const words of commands) {
    const typed = typedWords.slice(0, words.length).join(separator)
    const command = words.join(separator)
    const distance = editDistance(typed, command)
    if (distance <= Math.max(1, Math.floor(command.length / 3)) && (!best || distance < best.distance))
      best = {command, typed, distance}
  }
  const typed = best?.typed ?? typedWords[0]
  const suggestion = best ? ` Did you mean "${best.command}"?` : ''
  stderrLine(`"${typed}" is not a ${opts.config.bin} command.${suggestion} Run "${opts.config.bin} help" for the list.`)
  process.exitCode = 2
}

export default hook
