/**
 * Printed commands a person pastes: every word is shell-quoted, so a name the node or the API controls
 * (a chain, a pod, a bridge port) can never run anything when pasted.
 */

const SAFE_WORD = /^[A-Za-z0-9_@%+=:,./-]+$/

export function quoteWord(word: string): string {
  if (word !== '' && SAFE_WORD.test(word)) return word
  return `'${word.replace(/'/g, `'\\''`)}'`
}

/** One command line: argv words quoted for the local shell. */
export function renderArgv(argv: string[]): string {
  return argv.map(quoteWord).join(' ')
}

/** `a | b | c`, each stage quoted. */
export function renderPipeline(stages: string[][]): string {
  return stages.map(renderArgv).join(' | ')
}

/**
 * A command run on a node through ssh: ssh joins the remote words and hands them to the remote shell, so each remote
 * word is quoted for that shell first, then the whole for the local one.
 */
export function sshArgv(sshPrefix: string[], remote: string[]): string[] {
  return [...sshPrefix, renderArgv(remote)]
}

/** A command a person pastes: a pipeline of argv stages (usually one). Rendered only by `renderCommand`. */
export type Command = string[][]

/** The one rendering of a printed command: each word quoted, stages joined by `|`. */
export function renderCommand(command: Command): string {
  return renderPipeline(command)
}
