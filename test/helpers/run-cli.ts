import {execFile} from 'node:child_process'
import {fileURLToPath} from 'node:url'
import {dirname, resolve} from 'node:path'

const BIN = resolve(dirname(fileURLToPath(import.meta.url)), '../../../bin/run.js')

export interface CliResult {
  code: number
  stdout: string
  stderr: string
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json?: any
}

/** Runs kproxy-doctor as a user would (a separate process), without blocking this process' event loop. */
export function runCli(args: string[], env: Record<string, string> = {}, timeoutMs = 60_000, stdin?: string): Promise<CliResult> {
  return new Promise((resolveResult) => {
    const child = execFile(process.execPath, [BIN, ...args], {encoding: 'utf8', timeout: timeoutMs, env: {...process.env, NO_COLOR: '1', ...env}, maxBuffer: 64 << 20}, (err, stdout, stderr) => {
      const code = err ? (typeof (err as {code?: unknown}).code === 'number' ? (err as {code: number}).code : -1) : 0
      let json
      if (args.includes('json')) {
        try {
          json = JSON.parse(stdout)
        } catch {
          json = undefined
        }
      }
      resolveResult({code, stdout, stderr, json})
    })
    child.stdin?.end(stdin ?? '')
  })
}
