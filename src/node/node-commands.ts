import {
  isNodeCommandKey,
  NODE_READS,
  readOf,
  takesArguments,
  type ArgsOf,
  type NodeCommand,
  type NodeCommandKey,
  type NodeRead,
} from './read/node-reads.js'
import {COMMAND_OUTPUT_CAP_BYTES, DUMP_OUTPUT_CAP_BYTES} from '../util/output-cap.js'

/**
 * The one place a command line for a node is built, from the registry of node reads (read/node-reads.ts): a key off
 * the allow-list, or arguments that do not validate, throw. `sudo -n` is prefixed where a read needs root and the SSH
 * login is not root, so a password prompt fails at once instead of hanging.
 */

declare const allowListed: unique symbol
/** A command line built here from an allow-list key: the only thing a transport's exec accepts. */
export type CommandLine = string & {readonly [allowListed]: true}

/** A read's words with its arguments (validated); undefined where it is not one program (a shell form only). */
function wordsOf(read: NodeRead, args: unknown): readonly string[] | undefined {
  return typeof read.argv === 'function' ? (read.argv as (a: unknown) => readonly string[])(args) : read.argv
}

/** A read's shell form with its arguments (validated), before sudo. */
function lineOf(read: NodeRead, args: unknown): string {
  if (typeof read.line === 'string') return read.line
  if (typeof read.line === 'function') return (read.line as (a: unknown) => string)(args)
  return wordsOf(read, args)!.join(' ')
}

const FIXED = (Object.keys(NODE_READS) as NodeCommandKey[]).filter(
  (key) => !takesArguments(readOf(key)),
) as NodeCommand[]

/** Every fixed command's shell line, by key (a view of the registry). */
export const NODE_COMMANDS = Object.fromEntries(FIXED.map((key) => [key, lineOf(readOf(key), undefined)])) as Readonly<
  Record<NodeCommand, string>
>

/**
 * The argv of each fixed command that is one program, for transports that exec without a shell (a Pod on the node):
 * the same words as its NODE_COMMANDS line (a view of the registry).
 */
export const COMMAND_ARGV: Readonly<Partial<Record<NodeCommand, readonly string[]>>> = Object.fromEntries(
  FIXED.flatMap((key) => {
    const argv = readOf(key).argv
    return Array.isArray(argv) ? [[key, argv]] : []
  }),
)

type QueryWithArgv = {
  [K in NodeCommandKey]: (typeof NODE_READS)[K] extends {argv: (args: never) => readonly string[]} ? K : never
}[NodeCommandKey]

/** The argv builders of the reads that take arguments and run one program (a view of the registry). */
export const QUERY_ARGV = Object.fromEntries(
  (Object.keys(NODE_READS) as NodeCommandKey[]).flatMap((key) => {
    const argv = readOf(key).argv
    return typeof argv === 'function' ? [[key, argv]] : []
  }),
) as {readonly [K in QueryWithArgv]: (...args: ArgsOf<K>) => readonly string[]}

/** The argv of a read that runs one program, for transports without a shell; throws for a read that has none. */
export function argvOf<K extends NodeCommandKey>(key: K, ...args: ArgsOf<K>): readonly string[] {
  if (!isNodeCommandKey(key)) throw new Error(`"${String(key)}" is not an allow-listed node command`)
  const argv = wordsOf(readOf(key), args[0])
  if (!argv) throw new Error(`node command ${key} has no argv form`)
  return argv
}

export function isCompressible(key: NodeCommandKey): boolean {
  return readOf(key).compressible
}

/**
 * How much longer than one step a dump may take: measured at 10,000 Services, iptables-nft-save takes about 10 s and
 * nftables mode's `nft list ruleset` about 47 s on a loaded 2-core machine (npm run bench), past the 20 s step.
 */
export const DUMP_STEPS = 4

/** How long one command may run: the step timeout, DUMP_STEPS of it for the dumps. */
export function commandTimeoutMs(key: NodeCommandKey, stepMs: number): number {
  return readOf(key).compressible ? stepMs * DUMP_STEPS : stepMs
}

/** The most one command may print, through a Pod: DUMP_OUTPUT_CAP_BYTES for the dumps, the command cap for the others. */
export function outputCapBytes(read: NodeRead | undefined): number {
  return read?.compressible ? DUMP_OUTPUT_CAP_BYTES : COMMAND_OUTPUT_CAP_BYTES
}

/** The program a command line runs, for messages: past `{ ` (compressed) and `sudo -n`. */
export function programOf(line: string): string {
  return (
    line
      .replace(/^\{ /, '')
      .replace(/^sudo -n /, '')
      .split(' ')[0] ?? line
  )
}

/** What follows a compressed command's own output inside the stream: its exit status (the pipeline's is gzip's). */
const EXIT_TRAILER = '\n#kpd-exit '

/**
 * An allow-listed line whose output goes through `gzip -1` (kube-proxy's dumps shrink about 5×), its exit status
 * appended inside the compressed stream, after a newline, so the output itself comes back byte for byte.
 */
export function compressedCommandLine(line: CommandLine): CommandLine {
  return `{ ${line}; printf '${EXIT_TRAILER.replace('\n', '\\n')}%d\\n' "$?"; } | gzip -1` as CommandLine
}

/** Undoes compressedCommandLine: the output and the command's exit status (null when the stream was cut short). */
export function splitCompressedOutput(plain: Buffer): {code: number | null; stdout: Buffer} {
  const at = plain.lastIndexOf(EXIT_TRAILER)
  const m = at >= 0 ? /^(\d+)\n$/.exec(plain.subarray(at + EXIT_TRAILER.length).toString('latin1')) : null
  if (!m) return {code: null, stdout: plain}
  return {code: Number(m[1]), stdout: plain.subarray(0, at)}
}

/** What ends one read's output inside a batch: on stdout with the read's exit status, on stderr alone. */
const BATCH_MARK = '#kpd-batch-'
/** A batch's nonce: hex only (it is written unquoted into the line), long enough that no read prints it by chance. */
const BATCH_NONCE = /^[0-9a-f]{12,}$/

/**
 * One read of a batch: run as it would alone, `{ LINE; }`, its stdin /dev/null, its stdout on the lane's stdout, its
 * stderr kept in a shell variable (trailing newlines kept by the `x` after it: a command substitution drops them) for
 * the lane to print once the lanes after it are done; then its exit status after the stdout mark. A shell variable
 * cannot hold a NUL byte: the shell drops those the read printed on stderr. bash says so on its own stderr, which the
 * outer substitution holds with the read's stderr, before it, where splitBatchOutput turns it into NUL_DROPPED_NOTE
 * (dash drops them without a word).
 */
function batchPart(line: CommandLine, i: number, nonce: string): string {
  return (
    `kpd_e${i}=$( { kpd_i=$( { { ${line}; } 2>&1 1>&3 3>&- </dev/null; kpd_c=$?; printf x; exit "$kpd_c"; } ); ` +
    `kpd_c=$?; printf '%s' "$kpd_i"; exit "$kpd_c"; } 2>&1 ); printf '\\n${BATCH_MARK}${nonce} %d\\n' "$?"`
  )
}

/** bash's word that it dropped NUL bytes from a read's stderr, at the start of that read's stderr (batchPart). */
const NUL_DROPPED = /^(?:[\w./-]*\/)?-?bash: (?:line \d+: )?warning: command substitution: ignored null byte in input\n/

/** What a read's stderr says where the node's shell dropped NUL bytes from it. */
export const NUL_DROPPED_NOTE = `(the node's shell dropped NUL bytes from this read's stderr)`

/** What linesOfBatch finds each read of a batch line by: its index and its line, as batchPart writes them. */
const BATCH_PART = /kpd_e(\d+)=\$\( \{ kpd_i=\$\( \{ \{ (.*?); \} 2>&1 1>&3 3>&- <\/dev\/null; kpd_c=\$\?; printf x;/g

/**
 * Several allow-listed lines as one: one exec (one session, one shell on the node) instead of one each. The reads run
 * side by side, each lane (the reads `lanes` gives one key, in a row: those that would wait for each other, such as
 * iptables-legacy's lock) one read after another, in a pipeline of the lanes: no file is written on the node. Each lane
 * prints its reads' stdout, each ended by a mark with the batch's nonce and the read's exit status, then passes on what
 * the lanes after it printed (`cat`; the pipe holds what a lane prints until then), so the batch's stdout has the reads
 * in order; once the lanes after it have ended, it prints its reads' stderr, each ended by a mark, so the batch's stderr
 * has them last read first (splitBatchOutput turns them round): the first reads' stderr comes last, so the batch's stderr
 * must come back whole (SshSession's `wholeStderr`), never cut as one command's. `gzip`: the batch's stdout goes through
 * `gzip -1` (a dump in it, and `Compression yes`); its stderr does not.
 */
export function batchCommandLine(
  lines: readonly CommandLine[],
  nonce: string,
  gzip = false,
  lanes?: ReadonlyArray<string | undefined>,
): CommandLine {
  if (!BATCH_NONCE.test(nonce)) throw new Error('refusing to build a batch: its nonce must be hex')
  if (lines.length === 0) throw new Error('refusing to build an empty batch')
  const grouped: number[][] = []
  lines.forEach((_, i) => {
    const key = lanes?.[i]
    const last = grouped.at(-1)
    if (key !== undefined && last && lanes?.[last[0]] === key) last.push(i)
    else grouped.push([i])
  })
  const stage = (indices: number[], first: boolean) =>
    `{ ${indices.map((i) => batchPart(lines[i], i, nonce)).join('; ')}; ${first ? '' : 'cat; '}` +
    `printf '%s\\n${BATCH_MARK}${nonce}\\n'${[...indices]
      .reverse()
      .map((i) => ` "\${kpd_e${i}%x}"`)
      .join('')} >&2; } 3>&1`
  const batch = grouped
    .map((indices, k) => stage(indices, k === grouped.length - 1))
    .reverse()
    .join(' | ')
  return `{ ${batch}; }${gzip ? GZIPPED : ''}` as CommandLine
}

/** What follows a batch whose stdout is compressed. */
const GZIPPED = ' | gzip -1'

/**
 * What every line sent over SSH starts with: the sbin folders after the login's own PATH. sshd gives a user other than
 * root on Debian /usr/local/bin:/usr/bin:/bin:/usr/games (Ubuntu adds sbin through PAM), where sysctl, bridge and
 * iptables are not found; after it, so that a folder the login puts first (its own tools) keeps precedence. An empty
 * PATH gets no empty entry (which would be the current folder). sudo's part of a line is unchanged (its secure_path).
 */
const SBIN_ON_PATH = 'export PATH="${PATH:+$PATH:}/usr/local/sbin:/usr/sbin:/sbin"; '

/**
 * A line as the SSH transport sends it to the login's shell: the sbin folders on its PATH first (SBIN_ON_PATH). `alone`:
 * the line is one program that may be stopped (the kernel trace's, on a terminal): `exec`ed, so that it stays the
 * session's leader, which the terminal's hangup reaches (dash runs the last command of a list as its child).
 */
export function withSbinOnPath(line: CommandLine, alone = false): CommandLine {
  return `${SBIN_ON_PATH}${alone ? 'exec ' : ''}${line}` as CommandLine
}

/**
 * The allow-listed lines a line sent over SSH is made of (what the node runs, read by read; a batch split, its PATH
 * prefix left out): for the lab's command log.
 */
export function linesOfBatch(sent: string): string[] {
  const line = sent.startsWith(SBIN_ON_PATH) ? sent.slice(SBIN_ON_PATH.length) : sent
  if (!line.startsWith('{ { kpd_e')) return [line]
  const parts = [...line.matchAll(BATCH_PART)].map((m) => [Number(m[1]), m[2]] as const)
  if (parts.length === 0) return [line]
  return parts.sort((a, b) => a[0] - b[0]).map(([, l]) => l)
}

interface BatchedOutput {
  code: number | null
  stdout: Buffer
  stderr: string
  /** Whether the read's end mark came: false for a read cut short (the batch stopped) or that never ran. */
  ended: boolean
  /**
   * Whether its stderr came whole (its mark on stderr): false where the batch stopped before the read's lane printed
   * it, which a lane does only once the lanes after it have ended (then `stderr` is what came of it, if anything).
   */
  stderrWhole: boolean
}

/** What ends each read's stdout in a batch, before its exit status. */
export function batchStdoutMark(nonce: string): Buffer {
  return Buffer.from(`\n${BATCH_MARK}${nonce} `, 'latin1')
}

/**
 * Undoes batchCommandLine: each read's stdout, stderr and exit status, in the batch's order. A batch cut short (killed
 * at its timeout, the connection lost) gives the reads that did not finish what came of them and no exit status. The
 * nonce is new for each batch, so no recorded output carries it; a read that printed it all the same (more marks than
 * reads) makes the split throw rather than hand one read's output to another.
 */
export function splitBatchOutput(count: number, nonce: string, out: {stdout: Buffer; stderr: string}): BatchedOutput[] {
  const stdoutMark = batchStdoutMark(nonce)
  const stderrMark = `\n${BATCH_MARK}${nonce}\n`
  let marks = 0
  for (let at = out.stdout.indexOf(stdoutMark); at >= 0; at = out.stdout.indexOf(stdoutMark, at + 1)) marks++
  // The stderr of each read comes last read first: the pieces ended by a mark, then what a read cut short printed.
  const pieces = out.stderr.split(stderrMark)
  if (marks > count || pieces.length - 1 > count)
    throw new Error(`a read printed the batch's own end mark: its ${count} outputs cannot be told apart`)
  const stderrOf = (i: number) => {
    const piece = pieces[count - 1 - i] ?? ''
    const dropped = NUL_DROPPED.exec(piece)
    if (!dropped) return piece
    const rest = piece.slice(dropped[0].length)
    return `${rest}${rest === '' || rest.endsWith('\n') ? '' : '\n'}${NUL_DROPPED_NOTE}\n`
  }
  const results: BatchedOutput[] = []
  let at = 0
  for (let i = 0; i < count; i++) {
    const end = at <= out.stdout.length ? out.stdout.indexOf(stdoutMark, at) : -1
    const stderr = stderrOf(i)
    const stderrWhole = count - 1 - i < pieces.length - 1
    if (end < 0) {
      results.push({
        code: null,
        stdout: out.stdout.subarray(Math.min(at, out.stdout.length)),
        stderr,
        ended: false,
        stderrWhole,
      })
      at = out.stdout.length + 1
      continue
    }
    const lineEnd = out.stdout.indexOf(0x0a, end + stdoutMark.length)
    const code = /^\d+$/.exec(out.stdout.toString('latin1', end + stdoutMark.length, lineEnd < 0 ? undefined : lineEnd))
    results.push({
      code: code ? Number(code[0]) : null,
      stdout: out.stdout.subarray(at, end),
      stderr,
      ended: true,
      stderrWhole,
    })
    at = lineEnd < 0 ? out.stdout.length + 1 : lineEnd + 1
  }
  return results
}

export function commandLine(cmd: NodeCommand, isRoot: boolean): CommandLine {
  if (!isNodeCommandKey(cmd) || takesArguments(readOf(cmd)))
    throw new Error(`"${String(cmd)}" is not an allow-listed node command`)
  return withSudo(cmd, lineOf(readOf(cmd), undefined), isRoot)
}

function withSudo(key: NodeCommandKey, line: string, isRoot: boolean): CommandLine {
  return (readOf(key).root === 'sudo' && !isRoot ? `sudo -n ${line}` : line) as CommandLine
}

/** The one place a key (and its arguments) becomes a command line; anything off the allow-list throws. */
export function buildCommandLine<K extends NodeCommandKey>(key: K, isRoot: boolean, ...args: ArgsOf<K>): CommandLine {
  if (!isNodeCommandKey(key)) throw new Error(`"${String(key)}" is not an allow-listed node command`)
  const read = readOf(key)
  if (!takesArguments(read)) return commandLine(key as NodeCommand, isRoot)
  const a = args[0]
  if (a === undefined || typeof a !== 'object') throw new Error(`node command ${key} needs its arguments`)
  if (read.root === 'only' && !isRoot) throw new Error(`refusing to build a node command: ${key} runs as root only`)
  return withSudo(key, lineOf(read, a), isRoot)
}

/** Kernel state files a transport may read: sysctls and network device attributes, nothing else. */
const READABLE_FILE = /^\/(proc\/sys|sys\/class\/net)(\/[A-Za-z0-9_.:@-]+)+$/

export function isReadableNodeFile(path: string): boolean {
  return READABLE_FILE.test(path) && !path.split('/').some((part) => part === '.' || part === '..')
}

/** `cat` of one allow-listed kernel file; the path is validated, then quoted all the same. */
export function readFileCommand(path: string): CommandLine {
  if (!isReadableNodeFile(path))
    throw new Error(
      `refusing to read "${path}" on a node: only /proc/sys/… and /sys/class/net/… files are allow-listed`,
    )
  return `cat -- '${path}'` as CommandLine
}

/** Where the debug Pod mounts the node's root filesystem (read-only). */
export const HOST_ROOT = '/host'

/**
 * The node's own program instead of the image's: `chroot /host ARGV…` (the debug Pod's read-only mount of the node's
 * root). Only a registry read's argv goes through it (what argvOf gave).
 */
export function onNodeRoot(argv: readonly string[]): string[] {
  if (argv.length === 0 || argv[0] === 'chroot')
    throw new Error('refusing to build a chroot command for an empty or nested command')
  return ['chroot', HOST_ROOT, ...argv]
}

/** Whether a command's failure says the tool is not on the node (the shell's 127, or sudo's "command not found"). */
export function toolMissing(result: {code: number | null; stderr: string}): boolean {
  return result.code === 127 || /command not found|sudo: \S+: not found/.test(result.stderr)
}
