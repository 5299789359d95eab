import type {ProgressEvent} from '../diagnosis/live-options.js'
import {printable} from '../report/printable.js'

/** Where the progress line goes: stderr, or a fake terminal in tests. */
interface ProgressStream {
  isTTY?: boolean
  columns?: number
  write(chunk: string): boolean
}

export interface Progress {
  /** Hand to the diagnosis as `onProgress`. */
  onProgress: (e: ProgressEvent) => void
  /** Clears the line (when one was drawn) and stops redrawing: call before anything else is printed. */
  done: () => void
}

/** Redraws are at most this often while Services are diagnosed (a scan judges thousands in a tight loop). */
const SERVICE_REDRAW_MS = 100
/** While a node is being read, the line is redrawn this often so the time of a slow node keeps counting. */
const TICK_MS = 500
/** A node still being read is named as the slowest only after this long. */
const STILL_READING_MS = 1000
const CLEAR = '\r\x1b[K'

/**
 * A one-line status on stderr (nodes read, Services diagnosed, the slowest node so far), redrawn in place with \r and
 * cleared at the end. Only in a terminal: not into a pipe or a file, not in CI, not with TERM=dumb, not with
 * --verbose (its lines go to stderr and would tear the line apart) and not with -q. stdout is never touched, so
 * -o json and -o junit stay one clean document.
 */
export function progressReporter(
  flags: {verbose?: boolean; quiet?: boolean},
  stream: ProgressStream = process.stderr,
  env: NodeJS.ProcessEnv = process.env,
  now: () => number = () => performance.now(),
): Progress | undefined {
  if (!stream.isTTY || flags.verbose || flags.quiet) return undefined
  if ((env.CI && env.CI !== 'false' && env.CI !== '0') || env.TERM === 'dumb') return undefined

  let nodesTotal = 0
  let nodesRead = 0
  let nodesFailed = 0
  const reading = new Map<string, number>()
  let slowest: {node: string; ms: number} | undefined
  let services: {index: number; total: number} | undefined
  let drawn = false
  let finished = false
  let lastDraw = -Infinity
  let timer: NodeJS.Timeout | undefined

  const line = (): string => {
    const parts: string[] = []
    if (nodesTotal > 0) {
      const t = now()
      // The slowest so far: a node still being read counts after a second, once longer than every finished one.
      let slow = slowest
      let stillReading = false
      for (const [node, startedAt] of reading) {
        if (t - startedAt >= STILL_READING_MS && (!slow || t - startedAt > slow.ms)) {
          slow = {node, ms: t - startedAt}
          stillReading = true
        }
      }
      let nodes = `nodes read ${nodesRead}/${nodesTotal}`
      if (nodesFailed > 0) nodes += ` (${nodesFailed} failed)`
      if (slow)
        nodes += `, slowest ${printable(slow.node)} ${(slow.ms / 1000).toFixed(1)}s${stillReading ? ' and counting' : ''}`
      parts.push(nodes)
    }
    if (services) parts.push(`Services diagnosed ${services.index}/${services.total}`)
    const text = `kproxy-doctor: ${parts.join(' · ')}`
    // A line longer than the terminal wraps, and \r then redraws only its last row.
    const width = Math.max(20, (stream.columns || 80) - 1)
    return text.length > width ? text.slice(0, width - 1) + '…' : text
  }

  const draw = () => {
    if (finished) return
    lastDraw = now()
    stream.write(CLEAR + line())
    drawn = true
  }

  const stopTimer = () => {
    if (timer) clearInterval(timer)
    timer = undefined
  }

  return {
    onProgress(e) {
      if (finished) return
      switch (e.kind) {
        case 'node-read-started': {
          nodesTotal = e.total
          reading.set(e.node, now())
          if (!timer) {
            timer = setInterval(draw, TICK_MS)
            timer.unref()
          }
          draw()
          break
        }
        case 'node-read-finished': {
          reading.delete(e.node)
          nodesRead++
          if (!e.ok) nodesFailed++
          if (!slowest || e.ms > slowest.ms) slowest = {node: e.node, ms: e.ms}
          if (reading.size === 0) stopTimer()
          draw()
          break
        }
        case 'service-diagnosed': {
          services = {index: e.index, total: e.total}
          if (e.index === 1 || e.index === e.total || now() - lastDraw >= SERVICE_REDRAW_MS) draw()
          break
        }
      }
    },
    done() {
      stopTimer()
      if (drawn && !finished) stream.write(CLEAR)
      finished = true
    },
  }
}
