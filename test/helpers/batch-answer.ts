import {linesOfBatch, type CommandLine} from '../../src/node/node-commands.js'
import type {ExecResult} from '../../src/node/transport/ssh/ssh-session.js'

/**
 * How a node's shell answers a batch line (node-commands.ts batchCommandLine): each read's answer from `answer`, then
 * the batch's marks with its nonce, as the real batch prints them (stdout in the reads' order, stderr last read
 * first). A line that is not a batch is answered alone.
 */
export function answerBatch(command: CommandLine, answer: (line: string) => ExecResult): ExecResult {
  const nonce = /#kpd-batch-([0-9a-f]+) /.exec(command)?.[1]
  const lines = linesOfBatch(command)
  if (nonce === undefined || lines.length < 2) return answer(command)
  const parts = lines.map(answer)
  return {
    code: 0,
    stdout: Buffer.concat(
      parts.map((p) => Buffer.concat([p.stdout, Buffer.from(`\n#kpd-batch-${nonce} ${p.code}\n`)])),
    ),
    stderr: parts
      .map((p) => `${p.stderr}\n#kpd-batch-${nonce}\n`)
      .reverse()
      .join(''),
  }
}

/** A connection's first exec over SSH (without Compression yes): whether the login is root, and the iptables versions. */
export const FIRST_EXEC = ['id -u', 'iptables -V', 'ip6tables -V']

/** Whether a line is a connection's first exec (it asks `id -u` first). */
export const isFirstExec = (command: CommandLine): boolean => linesOfBatch(command)[0] === 'id -u'

/** A node's answer to the first exec: the login's uid, iptables-nft 1.8.9 for both families, gzip where asked. */
export function answerFirstExec(command: CommandLine, uid = '0'): ExecResult {
  const answers: Record<string, string> = {
    'id -u': `${uid}\n`,
    'command -v gzip': '/usr/bin/gzip\n',
    'iptables -V': 'iptables v1.8.9 (nf_tables)\n',
    'ip6tables -V': 'ip6tables v1.8.9 (nf_tables)\n',
  }
  return answerBatch(command, (line) => ({code: 0, stdout: Buffer.from(answers[line] ?? ''), stderr: ''}))
}
