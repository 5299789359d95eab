import {spawn, type ChildProcess} from 'node:child_process'
import type {WebSocket} from 'ws'

/**
 * The kubelet's side of pods/exec and pods/portforward over WebSocket, run against a network namespace the test
 * created: exec runs argv (never through a shell) with `ip netns exec`, port-forward bridges each port to
 * 127.0.0.1:PORT inside that namespace through socat, as the kubelet dials localhost inside the pod's sandbox.
 *
 * Channel protocol (v4/v5.channel.k8s.io): every binary frame starts with its channel number. Exec: 0 stdin,
 * 1 stdout, 2 stderr, 3 error (a Status JSON when the command ends), 4 resize; v5 adds 255 = "close channel N".
 * Port-forward (v4.channel.k8s.io): per requested port a data and an error channel, each opened by the server with
 * the port number as two little-endian bytes.
 */

export const EXEC_PROTOCOLS = ['v5.channel.k8s.io', 'v4.channel.k8s.io']
export const PORT_FORWARD_PROTOCOLS = ['v4.channel.k8s.io']

const STDIN = 0
const STDOUT = 1
const STDERR = 2
const ERROR = 3
const RESIZE = 4
const CLOSE = 255

/** Where a pod's processes run: a network namespace the test created, and the commands its image lacks. */
export interface PodSandbox {
  netns: string
  missingCommands?: string[]
  /**
   * The pod's hostPath mounts, mount path → host path. `chroot MOUNT PROGRAM…` runs `chroot HOSTPATH PROGRAM…`: the
   * lab's node has the host's root filesystem, so a debug pod's `chroot /host ip …` runs the host's own ip.
   */
  hostMounts?: Record<string, string>
}

export interface StreamTracker {
  children: Set<ChildProcess>
  sockets: Set<WebSocket>
  resizes: {width: number; height: number}[]
}

function frame(channel: number, data: Buffer | string): Buffer {
  const body = typeof data === 'string' ? Buffer.from(data) : data
  return Buffer.concat([Buffer.from([channel]), body])
}

function track(tracker: StreamTracker, ws: WebSocket, child?: ChildProcess): void {
  tracker.sockets.add(ws)
  ws.on('close', () => tracker.sockets.delete(ws))
  if (child) {
    tracker.children.add(child)
    child.on('exit', () => tracker.children.delete(child))
  }
}

function execStatus(argv: string[], code: number | null, signal: string | null, stderrTail: string): object {
  if (code === 0) return {metadata: {}, status: 'Success'}
  // `ip netns exec` cannot start a missing program: answer as the container runtime does for a binary not in the image.
  if (code !== 0 && stderrTail.startsWith(`exec of "${argv[0]}" failed: No such file or directory`))
    return commandNotFoundStatus(argv[0])
  const exitCode = code ?? 128 + (signal === 'SIGKILL' ? 9 : 15)
  return {
    metadata: {},
    status: 'Failure',
    message: `command terminated with non-zero exit code: error executing command [${argv.join(' ')}], exit code ${exitCode}`,
    reason: 'NonZeroExitCode',
    details: {causes: [{reason: 'ExitCode', message: String(exitCode)}]},
  }
}

function commandNotFoundStatus(command: string): object {
  return {
    metadata: {},
    status: 'Failure',
    message: `Internal error occurred: error executing command in container: failed to exec in container: failed to start exec: OCI runtime exec failed: exec failed: unable to start container process: exec: "${command}": executable file not found in $PATH: unknown`,
    reason: 'InternalError',
    details: {causes: [{message: `exec: "${command}": executable file not found in $PATH`}]},
    code: 500,
  }
}

/** Runs one exec session to its end: the command's output on channels 1/2, then its Status on channel 3, then close. */
export function runExecSession(
  ws: WebSocket,
  argv: string[],
  sandbox: PodSandbox,
  wantsStdin: boolean,
  tracker: StreamTracker,
): void {
  if (sandbox.missingCommands?.includes(argv[0])) {
    track(tracker, ws)
    ws.send(frame(ERROR, JSON.stringify(commandNotFoundStatus(argv[0]))))
    ws.close(1000)
    return
  }
  const mounted = argv[0] === 'chroot' && argv[1] !== undefined ? sandbox.hostMounts?.[argv[1]] : undefined
  const command = mounted ? ['chroot', mounted, ...argv.slice(2)] : argv
  const child = spawn('ip', ['netns', 'exec', sandbox.netns, ...command], {stdio: ['pipe', 'pipe', 'pipe']})
  track(tracker, ws, child)
  if (!wantsStdin) child.stdin.end()
  child.stdin.on('error', () => {})
  let stderrTail = ''
  child.stdout.on('data', (d: Buffer) => ws.send(frame(STDOUT, d)))
  child.stderr.on('data', (d: Buffer) => {
    stderrTail = (stderrTail + d.toString()).slice(-500)
    ws.send(frame(STDERR, d))
  })
  child.on('error', (e) => {
    ws.send(
      frame(
        ERROR,
        JSON.stringify({metadata: {}, status: 'Failure', message: e.message, reason: 'InternalError', code: 500}),
      ),
    )
    ws.close(1000)
  })
  child.on('close', (code, signal) => {
    if (ws.readyState !== 1) return
    ws.send(frame(ERROR, JSON.stringify(execStatus(argv, code, signal, stderrTail))))
    ws.close(1000)
  })
  ws.on('message', (data: Buffer) => {
    if (data.length === 0) return
    const channel = data[0]
    const body = data.subarray(1)
    if (channel === STDIN && wantsStdin) child.stdin.write(body)
    else if (channel === CLOSE && ws.protocol === 'v5.channel.k8s.io' && body[0] === STDIN) child.stdin.end()
    else if (channel === RESIZE) {
      try {
        const size = JSON.parse(body.toString()) as {Width: number; Height: number}
        tracker.resizes.push({width: size.Width, height: size.Height})
      } catch {
        // a malformed resize is ignored, as the kubelet does
      }
    }
  })
  ws.on('close', () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
}

/** What a recorded program printed and how it ended (an answer given without running anything). */
export interface RecordedExec {
  stdout: string
  stderr?: string
  exitCode?: number
}

/**
 * Answers an exec from a recording, as the kubelet would have relayed the program: its output on channels 1/2, then its
 * Status; 'missing' answers as the runtime does for a program not in the image.
 */
export function runRecordedSession(
  ws: WebSocket,
  argv: string[],
  answer: RecordedExec | 'missing',
  tracker: StreamTracker,
): void {
  track(tracker, ws)
  if (answer === 'missing') ws.send(frame(ERROR, JSON.stringify(commandNotFoundStatus(argv[0]))))
  else {
    if (answer.stdout) ws.send(frame(STDOUT, answer.stdout))
    if (answer.stderr) ws.send(frame(STDERR, answer.stderr))
    ws.send(frame(ERROR, JSON.stringify(execStatus(argv, answer.exitCode ?? 0, null, ''))))
  }
  ws.close(1000)
}

/** Accepts an exec and then says nothing: a kubelet or runtime that hangs. */
export function runHungSession(ws: WebSocket, tracker: StreamTracker): void {
  track(tracker, ws)
}

function portBytes(port: number): Buffer {
  const b = Buffer.alloc(2)
  b.writeUInt16LE(port, 0)
  return b
}

/** Forwards each port to 127.0.0.1:PORT inside the sandbox's namespace; closes when every forward has ended. */
export function runPortForwardSession(
  ws: WebSocket,
  ports: number[],
  sandbox: PodSandbox,
  podLabel: string,
  tracker: StreamTracker,
): void {
  track(tracker, ws)
  let open = ports.length
  const relays = ports.map((port, i) => {
    const data = 2 * i
    const error = data + 1
    ws.send(frame(data, portBytes(port)))
    ws.send(frame(error, portBytes(port)))
    const relay = spawn('ip', ['netns', 'exec', sandbox.netns, 'socat', 'STDIO', `TCP4:127.0.0.1:${port}`], {
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    tracker.children.add(relay)
    relay.stdin.on('error', () => {})
    let relayErr = ''
    relay.stdout.on('data', (d: Buffer) => ws.readyState === 1 && ws.send(frame(data, d)))
    relay.stderr.on('data', (d: Buffer) => (relayErr = (relayErr + d.toString()).slice(-500)))
    relay.on('close', (code) => {
      tracker.children.delete(relay)
      if (code !== 0 && ws.readyState === 1) {
        const why = /refused/i.test(relayErr) ? 'connect: connection refused' : relayErr.trim().split('\n').pop()
        ws.send(
          frame(
            error,
            `error forwarding port ${port} to pod ${podLabel}: failed to connect to localhost:${port} inside namespace "${sandbox.netns}": dial tcp4 127.0.0.1:${port}: ${why}`,
          ),
        )
      }
      if (--open === 0 && ws.readyState === 1) ws.close(1000)
    })
    return {data, relay}
  })
  ws.on('message', (msg: Buffer) => {
    const target = relays.find((r) => r.data === msg[0])
    if (target && msg.length > 1) target.relay.stdin.write(msg.subarray(1))
  })
  ws.on('close', () => {
    for (const {relay} of relays) if (relay.exitCode === null && relay.signalCode === null) relay.kill('SIGKILL')
  })
}
