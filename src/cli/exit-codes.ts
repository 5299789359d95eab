/**
 * The exit codes each command's help lists (its DESCRIPTION), the same as docs/output.md: a diagnosis (svc, scan),
 * a command that makes something (trace, collect svc), and one that only prints (version, completion).
 */
const COULD_NOT_RUN = '2  the tool could not run: bad arguments, no cluster, unreadable input'

export const DIAGNOSIS_EXIT_CODES = [
  'Exit codes (--fail-on picks what gives 1 and 3, default error,incomplete):',
  '0  all checked and clean (warnings allowed unless --fail-on warning)',
  '1  a finding at or above --fail-on (an error finding by default)',
  COULD_NOT_RUN,
  '3  incomplete: a required check could not run (a node or a family not read)',
].join('\n')

export const TRACE_EXIT_CODES = ['Exit codes:', '0  the trace was made, whatever its verdict', COULD_NOT_RUN].join('\n')

export const COLLECT_EXIT_CODES = [
  'Exit codes:',
  '0  the bundle was written (nodes not read are named, and recorded so)',
  COULD_NOT_RUN,
].join('\n')

export const PRINT_EXIT_CODES = ['Exit codes:', '0  printed', '2  bad arguments'].join('\n')

export const CLEANUP_EXIT_CODES = [
  'Exit codes:',
  "0  every table of the doctor's on the node was deleted (or there was none)",
  COULD_NOT_RUN.replace('unreadable input', 'the node not reached, a table not deleted'),
].join('\n')
