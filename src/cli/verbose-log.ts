import {stderrLine} from './stderr.js'

/**
 * The --verbose sink: one line per event on stderr, prefixed with the time since the run started, so the slow step
 * stands out; never on stdout, where -o json and -o yaml go. Untrusted text (node output, API messages) is made
 * printable first.
 */
export function stderrLog(): (line: string) => void {
  const startedAt = performance.now()
  return (line) => stderrLine(`+${((performance.now() - startedAt) / 1000).toFixed(2)}s ${line}`)
}
