import {execFile} from 'node:child_process'
import {fileURLToPath} from 'node:url'
import {dirname, resolve} from 'node:path'
import {parseYaml, schemaErrors} from './report-schema.js'

const BIN = resolve(dirname(fileURLToPath(import.meta.url)), '../../../bin/run.js')

export interface CliResult {
  code: number
  stdout: string
  stderr: string
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json?: any
}

/**
 * Runs kproxy-doctor as a user would (a separate process), without blocking this process' event loop. Without
 * COLUMNS in `env` the output is not wrapped (as in a pipe), whatever the calling shell exported. Every JSON
 * document `svc`, `scan` or `trace` prints (JSON or YAML) is checked against schema/report.schema.json: a mismatch fails the calling test.
 */
export function runCli(
  args: string[],
  env: Record<string, string> = {},
  timeoutMs = 60_000,
  stdin?: string,
  cwd?: string,
): Promise<CliResult> {
  return new Promise((resolveResult, rejectResult) => {
    const child = execFile(
      process.execPath,
      [BIN, ...args],
      {
        encoding: 'utf8',
        timeout: timeoutMs,
        cwd,
        env: {...process.env, NO_COLOR: '1', COLUMNS: '', ...env},
        maxBuffer: 64 << 20,
      },
      (err, stdout, stderr) => {
        const code = err ? (typeof (err as {code?: unknown}).code === 'number' ? (err as {code: number}).code : -1) : 0
        let json
        const yaml = args.some((a) => a === 'yaml' || a === '-oyaml' || a === '--output=yaml')
        if (yaml || args.some((a) => a === 'json' || a === '-ojson' || a === '--output=json')) {
          try {
            json = yaml ? parseYaml(stdout) : JSON.parse(stdout)
          } catch {
            json = undefined
          }
        }
        const kind = args[0] === 'trace' || args[0] === 'svc' || args[0] === 'scan' ? args[0] : undefined
        const invalid = json !== undefined && kind ? schemaErrors(json, kind) : null
        if (invalid)
          rejectResult(
            new Error(`kproxy-doctor ${args.join(' ')}: output does not match schema/report.schema.json:\n${invalid}`),
          )
        else resolveResult({code, stdout, stderr, json})
      },
    )
    child.stdin?.end(stdin ?? '')
  })
}
