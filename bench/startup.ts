/**
 * Start-up (issue #28): what a user waits for before any work, each figure beside a bare `node -e 0` measured in the
 * same run. `kproxy-doctor --version` and `svc` on the bundled example (as `npm run demo` runs it) through bin/run.js,
 * the installed package's command; and the same through the standalone executable when `npm run sea` has built it
 * (dist/sea). Every command runs KPD_BENCH_STARTUP_RUNS times (default 20), all of them in turns so that a change in
 * the machine's load reaches each alike; each figure is the best (least disturbed) run. Target: at most 2.0× the bare
 * baseline. bin/run.js keeps V8's code cache of what a command compiled (bin/program.js): the bench gives it a cache
 * folder of its own, empty at the start (the first run of each command writes its cache, as after an install), and
 * measures the same commands without any cache too (NODE_DISABLE_COMPILE_CACHE=1: reported, not counted).
 */
import {spawnSync} from 'node:child_process'
import {existsSync, mkdtempSync, rmSync} from 'node:fs'
import {arch, tmpdir} from 'node:os'
import {join, resolve} from 'node:path'
import {pathToFileURL} from 'node:url'

const TARGET = 2.0
const repo = resolve(import.meta.dirname, '../..')
const example = ['svc', 'web', '-n', 'shop', '--snapshot', resolve(repo, 'examples/broken-cluster')]

interface Workload {
  what: string
  command: string[]
  /** The exit code it must end with (svc: 1, the example's error finding). */
  code: number
  target: boolean
  env?: Record<string, string>
}

/** Wall time of one process, spawn to exit; throws when it did not end as expected. */
function once(w: Workload): number {
  const started = performance.now()
  const r = spawnSync(w.command[0], w.command.slice(1), {
    cwd: repo,
    encoding: 'utf8',
    env: {...process.env, NO_COLOR: '1', ...w.env},
  })
  const ms = performance.now() - started
  if (r.status !== w.code) throw new Error(`${w.what}: exit ${r.status}, expected ${w.code}: ${r.stderr.slice(-400)}`)
  return ms
}

/** Prints the start-up figures; returns whether every target was met. */
export function startupBench(write: (text: string) => void): boolean {
  const runs = Number(process.env.KPD_BENCH_STARTUP_RUNS ?? 20)
  const node = process.execPath
  const bin = resolve(repo, 'bin/run.js')
  const sea = resolve(repo, `dist/sea/kproxy-doctor-linux-${arch()}`)
  const cacheHome = mkdtempSync(join(tmpdir(), 'kpd-bench-cache-'))
  const cached = {XDG_CACHE_HOME: cacheHome, NODE_DISABLE_COMPILE_CACHE: ''}
  const uncached = {NODE_DISABLE_COMPILE_CACHE: '1'}
  const noExtraCa = {NODE_EXTRA_CA_CERTS: ''}
  const workloads: Workload[] = [
    {what: 'node -e 0 (bare)', command: [node, '-e', '0'], code: 0, target: false},
    {what: 'kproxy-doctor --version', command: [node, bin, '--version'], code: 0, target: true, env: cached},
    {what: 'kproxy-doctor svc (example)', command: [node, bin, ...example], code: 1, target: true, env: cached},
    {what: '--version, no code cache', command: [node, bin, '--version'], code: 0, target: false, env: uncached},
    {what: 'svc (example), no code cache', command: [node, bin, ...example], code: 1, target: false, env: uncached},
  ]
  // NODE_EXTRA_CA_CERTS makes every Node.js process parse that file as it starts (a system bundle of 140 certificates:
  // about 40% of a bare start's instructions on this project's machine), the bare baseline too: reported without it.
  if (process.env.NODE_EXTRA_CA_CERTS)
    workloads.push(
      {what: 'node -e 0, no NODE_EXTRA_CA_CERTS', command: [node, '-e', '0'], code: 0, target: false, env: noExtraCa},
      {
        what: 'svc (example), no NODE_EXTRA_CA_CERTS',
        command: [node, bin, ...example],
        code: 1,
        target: false,
        env: {...cached, ...noExtraCa},
      },
    )
  if (existsSync(sea))
    workloads.push(
      {what: 'executable --version', command: [sea, '--version'], code: 0, target: true},
      {what: 'executable svc (example)', command: [sea, ...example], code: 1, target: true},
    )
  const times = workloads.map(() => [] as number[])
  try {
    for (let i = 0; i < runs; i++) workloads.forEach((w, j) => times[j].push(once(w)))
  } finally {
    rmSync(cacheHome, {recursive: true, force: true})
  }
  const best = times.map((t) => Math.min(...t))
  const median = times.map((t) => [...t].sort((a, b) => a - b)[t.length >> 1])
  let met = true
  write(`start-up, best of ${runs} runs each, against a bare node -e 0 of this run (target ≤ ${TARGET.toFixed(1)}×)\n`)
  const noExtraCaBare = workloads.findIndex((w) => w.what.startsWith('node -e 0, no NODE_EXTRA_CA_CERTS'))
  workloads.forEach((w, j) => {
    const ratio = best[j] / best[w.env && 'NODE_EXTRA_CA_CERTS' in w.env ? noExtraCaBare : 0]
    const missed = w.target && ratio > TARGET
    met &&= !missed
    write(
      `  ${w.what.padEnd(38)} ${best[j].toFixed(0).padStart(5)} ms  ${ratio.toFixed(2).padStart(5)}× bare  (median ${median[j].toFixed(0)} ms)${missed ? '  TARGET MISSED' : ''}\n`,
    )
  })
  if (!existsSync(sea)) write(`  (the standalone executable is measured too once \`npm run sea\` has built ${sea})\n`)
  return met
}

// Alone: node dist/bench/startup.js (exit 1 when a target is missed).
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href)
  process.exitCode = startupBench((text) => void process.stdout.write(text)) ? 0 : 1
