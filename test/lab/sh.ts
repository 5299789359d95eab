import {execFile, execFileSync, spawn, type ChildProcess} from 'node:child_process'

/** Runs a command (no shell), returns stdout; throws with stderr on failure. */
export function run(cmd: string, args: string[], input?: string): string {
  try {
    return execFileSync(cmd, args, {input, encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'], timeout: 30_000})
  } catch (e) {
    const err = e as {stderr?: string; message: string}
    throw new Error(`${cmd} ${args.join(' ')} failed: ${err.stderr?.trim() || err.message}`)
  }
}

export function tryRun(
  cmd: string,
  args: string[],
  input?: string,
  timeoutMs = 10_000,
): {code: number; stdout: string; stderr: string} {
  try {
    const stdout = execFileSync(cmd, args, {
      input,
      encoding: 'utf8',
      stdio: ['pipe', 'pipe', 'pipe'],
      timeout: timeoutMs,
    })
    return {code: 0, stdout, stderr: ''}
  } catch (e) {
    const err = e as {status?: number; stdout?: string; stderr?: string}
    return {code: err.status ?? -1, stdout: err.stdout ?? '', stderr: err.stderr ?? ''}
  }
}

export function inNs(ns: string, cmd: string, args: string[], input?: string): string {
  return run('ip', ['netns', 'exec', ns, cmd, ...args], input)
}

/** Starts a long-running process; the caller kills it by pid at teardown. */
export function startDaemon(cmd: string, args: string[], logTo?: string[]): ChildProcess {
  const child = spawn(cmd, args, {stdio: ['ignore', 'pipe', 'pipe'], detached: false})
  const append = (d: Buffer) => {
    if (logTo && logTo.length < 200) logTo.push(d.toString())
  }
  child.stdout?.on('data', append)
  child.stderr?.on('data', append)
  return child
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms))
}

/** Like tryRun, without blocking the event loop (needed when the peer, e.g. the test API server, lives in this process). */
export function runAsync(
  cmd: string,
  args: string[],
  timeoutMs = 30_000,
): Promise<{code: number; stdout: string; stderr: string}> {
  return new Promise((resolve) => {
    execFile(cmd, args, {encoding: 'utf8', timeout: timeoutMs}, (err, stdout, stderr) => {
      const code = err ? (typeof (err as {code?: unknown}).code === 'number' ? (err as {code: number}).code : -1) : 0
      resolve({code, stdout, stderr})
    })
  })
}
