/**
 * What a run made and must remove before the process exits, even when it is ended by a signal: Ctrl-C (SIGINT), a
 * kill (SIGTERM), a closed terminal or dropped bastion session (SIGHUP), Ctrl-\\ (SIGQUIT). Each tracked thing's
 * removal runs, all at once, then the process exits with the shell's code for the signal. A second signal exits at once.
 */

/** The signals that end a run, with the shell's exit code for each. */
const ENDING_SIGNALS = {SIGHUP: 129, SIGINT: 130, SIGQUIT: 131, SIGTERM: 143} as const
const signals = Object.keys(ENDING_SIGNALS) as Array<keyof typeof ENDING_SIGNALS>

interface Tracked {
  /** What it is, for the line said before removing ("debug Pod", "kernel trace table"). */
  kind: string
  /** Removes it; resolves to a warning line where that failed. */
  remove: () => Promise<string | undefined>
  /** What a person runs to remove what is left when the run exits without waiting. */
  leftover: string
}

const LIVE = new Map<string, Tracked>()
let cleaning = false

/** A line on stderr, if there still is one: after SIGHUP the terminal may be gone, and the removals run anyway. */
function say(line: string): void {
  try {
    process.stderr.write(`kproxy-doctor: ${line}\n`, () => undefined)
  } catch {
    // no terminal left to tell
  }
}

function plural(kind: string, n: number): string {
  return `${n} ${kind}${n === 1 ? '' : 's'}`
}

function onSignal(signal: NodeJS.Signals): void {
  const code = ENDING_SIGNALS[signal as keyof typeof ENDING_SIGNALS] ?? 143
  const tracked = [...LIVE.values()]
  if (cleaning) {
    say(
      `${signal} again: exiting without waiting; remove what is left with: ${[...new Set(tracked.map((t) => t.leftover))].join('; ')}`,
    )
    process.exit(code)
  }
  cleaning = true
  const kinds = [...new Set(tracked.map((t) => t.kind))]
  say(
    `${signal}: ${kinds.map((k) => `deleting ${plural(k, tracked.filter((t) => t.kind === k).length)}`).join(', ')} before exiting`,
  )
  void Promise.all(tracked.map((t) => t.remove().catch((e: Error) => e.message))).then((lines) => {
    for (const line of lines) if (line) say(`warning: ${line}`)
    process.exit(code)
  })
}

/** Removes `id` on an ending signal until it is untracked. */
export function trackUntilExit(id: string, tracked: Tracked): void {
  if (LIVE.size === 0) for (const s of signals) process.on(s, onSignal)
  LIVE.set(id, tracked)
}

export function untrack(id: string): void {
  LIVE.delete(id)
  if (LIVE.size === 0 && !cleaning) for (const s of signals) process.off(s, onSignal)
}
