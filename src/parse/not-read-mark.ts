/**
 * The line a node read prints (or the tool records) in place of a command's output where the command failed:
 * `#kpd-not-read`, the exit status (`-`: none), a tab, the command's words, a tab, its stderr on one line. Written by
 * the `network` read's shell line (node/read/node-reads.ts), the Pod transports' network read, and the recording of
 * the nft ruleset and IPVS sysctls; read back so that a failed read is never taken for an empty one.
 */
const NOT_READ_MARK = /^#kpd-not-read (\d+|-)\t([^\t]*)(?:\t(.*))?$/

/** A failed command as its mark says it: its words, its exit status and its stderr (one line). */
export interface NotRead {
  command: string
  /** null: it ended with no exit status (`-` in the line). */
  code: number | null
  stderr: string
}

/** The mark that stands for a failed command's output. */
export function sectionNotReadLine(code: number | null, command: string, stderr: string): string {
  return `#kpd-not-read ${code ?? '-'}\t${command}\t${stderr.replace(/\s+/g, ' ').trim()}`
}

/** A line's mark: the command that failed, its exit status and stderr; undefined for any other line. */
export function notReadMark(line: string): NotRead | undefined {
  const m = NOT_READ_MARK.exec(line)
  return m ? {command: m[2], code: m[1] === '-' ? null : Number(m[1]), stderr: (m[3] ?? '').trim()} : undefined
}
