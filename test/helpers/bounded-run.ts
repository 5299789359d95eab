import {execFile} from 'node:child_process'

/** How a bounded run ended: the function's value, or why it did not give one. */
export type BoundedResult<T> =
  {ok: true; value: T} | {ok: false; why: 'out of memory' | 'timed out' | 'threw'; detail: string}

/** The child's code: imports the module, calls the export, prints its value (or its error) as JSON on stdout. */
const CHILD = `
const {url, name, args} = JSON.parse(process.argv[1])
try {
  const value = await (await import(url))[name](...args)
  process.stdout.write(JSON.stringify({value: value ?? null}))
} catch (e) {
  process.stdout.write(JSON.stringify({error: String((e && e.stack) || e)}))
}
`

/**
 * Calls the export `name` of the module at `url` in a child Node process with a heap of `heapMb` and at most
 * `timeoutMs`, so an input that makes the code under test loop or allocate without end fails the test with a reason
 * instead of hanging the run or exhausting the machine's memory. (A child, not a worker thread: a worker that runs out
 * of heap in one large allocation aborts the whole process.) The limits are deliberately generous: they tell "ends"
 * from "does not end", never fast from slow. The value travels as JSON.
 */
export function runBounded<T>(
  url: string,
  name: string,
  args: unknown[],
  limits: {heapMb: number; timeoutMs: number; nodeArgs?: string[]},
): Promise<BoundedResult<T>> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [
        `--max-old-space-size=${limits.heapMb}`,
        ...(limits.nodeArgs ?? []),
        '--input-type=module',
        '-e',
        CHILD,
        JSON.stringify({url, name, args}),
      ],
      {encoding: 'utf8', timeout: Math.ceil(limits.timeoutMs), killSignal: 'SIGKILL', maxBuffer: 256 << 20},
      (err, stdout, stderr) => {
        // What the child said last on stderr before it was stopped (a fuzz loop says which input it is on).
        const last = lastLine(stderr.replace(/\n?<--- Last few GCs --->[\s\S]*$/, ''))
        if (err && (err as {killed?: boolean}).killed)
          return resolve({ok: false, why: 'timed out', detail: `no answer in ${limits.timeoutMs} ms; last: ${last}`})
        if (/heap out of memory|Invalid array length|Invalid string length/.test(stderr + stdout))
          return resolve({
            ok: false,
            why: 'out of memory',
            detail: `${/^.*(?:heap out of memory|Invalid \w+ length).*$/m.exec(stderr + stdout)![0]}; last: ${last}`,
          })
        try {
          const m = JSON.parse(stdout) as {value?: T; error?: string}
          resolve(m.error === undefined ? {ok: true, value: m.value as T} : {ok: false, why: 'threw', detail: m.error})
        } catch {
          resolve({ok: false, why: 'threw', detail: `${err?.message ?? 'no JSON'}: ${stderr.slice(-2000)}`})
        }
      },
    )
  })
}

function lastLine(text: string): string {
  const lines = text.trimEnd().split('\n')
  return lines[lines.length - 1] ?? ''
}
