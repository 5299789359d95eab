import type {KubeConfig} from '@kubernetes/client-node'
import {KubeCommandNotFoundError, KubeStreamError} from './errors.js'
import {openPodStream} from './pod-stream.js'
import {COMMAND_OUTPUT_CAP_BYTES} from '../util/output-cap.js'

export interface ExecResult {
  stdout: string
  stderr: string
  /** null: the caller's `stop` ended the call before the command's status came. */
  exitCode: number | null
}

export interface ExecOptions {
  /** The whole call (connect, run, output) is cut off after this; the socket is destroyed. */
  timeoutMs: number
  signal?: AbortSignal
  /** stdout plus stderr beyond this ends the call with an error (default COMMAND_OUTPUT_CAP_BYTES, 32 MiB). */
  maxOutputBytes?: number
  /**
   * Ends the call early with what the command printed so far and no exit status (a watch the caller is done with).
   * The stream is closed; whether the command ends with it is the runtime's (without a terminal it may run to its own
   * bound).
   */
  stop?: AbortSignal
}

const STDOUT = 1
const STDERR = 2
const ERROR = 3

interface ExecStatus {
  status?: string
  reason?: string
  message?: string
  details?: {causes?: {reason?: string; message?: string}[]}
}

/**
 * Runs argv (no shell: each element is one argument) in a pod's container through pods/exec over WebSocket and
 * returns its output and exit code. A non-zero exit is a result, not an error; refusals, a missing program, the
 * deadline and cancellation are typed errors (kube-stream-errors.ts).
 */
export async function execInPod(
  kubeConfig: KubeConfig,
  namespace: string,
  pod: string,
  container: string,
  argv: string[],
  options: ExecOptions,
): Promise<ExecResult> {
  if (argv.length === 0) throw new KubeStreamError('exec needs a command')
  const query = new URLSearchParams()
  for (const arg of argv) query.append('command', arg)
  query.set('container', container)
  query.set('stdin', 'false')
  query.set('stdout', 'true')
  query.set('stderr', 'true')
  query.set('tty', 'false')
  const maxOutput = options.maxOutputBytes ?? COMMAND_OUTPUT_CAP_BYTES
  const what = `exec of ${argv[0]} in pod ${namespace}/${pod}`
  const stdout: Buffer[] = []
  const stderr: Buffer[] = []
  let outputBytes = 0
  let outcome: ExecResult | Error | undefined
  const onFrame = (channel: number, data: Buffer) => {
    if (outcome) return
    if (channel === STDOUT || channel === STDERR) {
      outputBytes += data.length
      if (outputBytes > maxOutput) outcome = new KubeStreamError(`${what}: output exceeds ${maxOutput} bytes`)
      else (channel === STDOUT ? stdout : stderr).push(data)
    } else if (channel === ERROR) outcome = fromStatus(data, argv[0], what, stdout, stderr)
    if (outcome) settle()
  }
  let settle = () => {}
  const stream = await openPodStream(kubeConfig, {namespace, pod, subresource: 'exec', query}, options, onFrame)
  return new Promise<ExecResult>((resolve, reject) => {
    stream.failed.catch(reject)
    settle = () => {
      if (outcome instanceof Error) return stream.fail(outcome)
      stream.finish()
      stream.socket.close(1000)
      resolve(outcome!)
    }
    const closedEarly = () => {
      if (!outcome) stream.fail(new KubeStreamError(`${what}: the connection closed without the command's status`))
    }
    const stopped = () => {
      if (outcome) return
      outcome = {
        stdout: Buffer.concat(stdout).toString('utf8'),
        stderr: Buffer.concat(stderr).toString('utf8'),
        exitCode: null,
      }
      settle()
    }
    if (outcome) settle()
    else if (stream.socket.readyState === 3) closedEarly()
    else stream.socket.on('close', closedEarly)
    if (options.stop?.aborted) stopped()
    else options.stop?.addEventListener('abort', stopped, {once: true})
  })
}

function fromStatus(
  data: Buffer,
  command: string,
  what: string,
  stdout: Buffer[],
  stderr: Buffer[],
): ExecResult | Error {
  let status: ExecStatus
  try {
    status = JSON.parse(data.toString('utf8')) as ExecStatus
  } catch (e) {
    return new KubeStreamError(`${what}: unreadable status ${JSON.stringify(data.toString('utf8').slice(0, 200))}`, {
      cause: e,
    })
  }
  const exitCode = exitCodeOf(status)
  if (exitCode !== undefined)
    return {stdout: Buffer.concat(stdout).toString('utf8'), stderr: Buffer.concat(stderr).toString('utf8'), exitCode}
  const message = status.message ?? status.reason ?? 'unknown failure'
  return /executable file not found|no such file or directory/i.test(message)
    ? new KubeCommandNotFoundError(command, message)
    : new KubeStreamError(`${what} failed: ${message}`)
}

/** The exit code a Status on the error channel reports, or undefined when the command did not run. */
export function exitCodeOf(status: ExecStatus): number | undefined {
  if (status.status === 'Success') return 0
  if (status.reason !== 'NonZeroExitCode') return undefined
  const cause = status.details?.causes?.find((c) => c.reason === 'ExitCode')
  const code = Number(cause?.message)
  return Number.isInteger(code) && code >= 0 ? code : undefined
}
