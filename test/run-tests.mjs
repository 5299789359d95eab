// Runs the compiled tests (dist/test, built by `npm run build`) with node's test runner, each file in its own process:
//   node test/run-tests.mjs            the unit tests, then the e2e lab (npm test, after the build and lint)
//   node test/run-tests.mjs unit       the unit tests (npm run test:unit), two files at a time
//   node test/run-tests.mjs e2e        the e2e lab (npm run test:e2e, as root), two files at a time, then RUNS_ALONE
//   node test/run-tests.mjs [unit|e2e] WORD   only the files whose path contains WORD
// Lab files side by side share nothing but what each makes under a random name (network namespaces, /tmp folders,
// ports picked by the kernel); set-up that every lab repeats and may share (host keys, the test API server's
// certificate) is made once in this run's folder (KPD_TEST_RUN_DIR, test/lab/run-once.ts), removed at the end.
// KPD_E2E_CONCURRENCY sets how many lab files run at once (1: one at a time). Closes with one line for the whole
// run: "N passed, N failed".
import {spawnSync} from 'node:child_process'
import {existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

/**
 * Lab files that run with no other beside them, after the others: their assertions time real traffic or processes
 * against fixed bounds, which CPU contention from a second lab can break (found by running the whole e2e suite side by
 * side, see the commit that adds a file here).
 */
const RUNS_ALONE = []

const PARTS = {unit: 'dist/test/unit', e2e: 'dist/test/e2e'}

function find(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name)
    return statSync(p).isDirectory() ? find(p) : p.endsWith('.test.js') ? [p] : []
  })
}

const [first, second] = process.argv.slice(2)
const parts = first in PARTS ? [first] : ['unit', 'e2e']
const filter = first in PARTS ? second : first
const filesOf = (part) =>
  find(PARTS[part])
    .filter((f) => !filter || f.includes(filter))
    .sort()

const e2eConcurrency = Number(process.env.KPD_E2E_CONCURRENCY ?? 2)
const isAlone = (f) => RUNS_ALONE.some((name) => f.endsWith(`/${name}`))
const phases = parts.flatMap((part) => {
  const files = filesOf(part)
  if (part === 'unit') return [{name: 'unit', files, concurrency: 2}]
  return [
    {name: 'e2e side by side', files: files.filter((f) => !isAlone(f)), concurrency: e2eConcurrency},
    {name: 'e2e alone', files: files.filter(isAlone), concurrency: 1},
  ]
})
if (phases.every((p) => p.files.length === 0)) {
  console.error(
    `no test files found under ${parts.map((p) => PARTS[p]).join(' and ')}${filter ? ` matching ${filter}` : ''}`,
  )
  process.exit(1)
}

const runDir = mkdtempSync(join(tmpdir(), 'kpd-test-run-'))
const totals = {passed: 0, failed: 0}
let status = 0
try {
  for (const phase of phases.filter((p) => p.files.length > 0)) {
    const started = Date.now()
    const tap = join(runDir, `${phase.name.replaceAll(' ', '-')}.tap`)
    const shown = process.stdout.isTTY ? 'spec' : 'tap'
    const r = spawnSync(
      process.execPath,
      [
        '--test',
        `--test-concurrency=${phase.concurrency}`,
        `--test-reporter=${shown}`,
        '--test-reporter-destination=stdout',
        '--test-reporter=tap',
        `--test-reporter-destination=${tap}`,
        ...phase.files,
      ],
      {stdio: 'inherit', env: {...process.env, KPD_TEST_RUN_DIR: runDir}},
    )
    // The runner's own closing lines, from the TAP copy (the last "# pass N" and "# fail N").
    const text = existsSync(tap) ? readFileSync(tap, 'utf8') : ''
    const count = (key) => Number([...text.matchAll(new RegExp(`^# ${key} (\\d+)$`, 'gm'))].pop()?.[1] ?? 0)
    totals.passed += count('pass')
    totals.failed += count('fail') + count('cancelled')
    if (r.status !== 0) status = r.status ?? 1
    const minutes = ((Date.now() - started) / 60000).toFixed(1)
    console.log(
      `${phase.name}: ${phase.files.length} files, ${phase.concurrency} at a time, ${minutes} min, pass ${count('pass')}, fail ${count('fail') + count('cancelled')}`,
    )
  }
} finally {
  rmSync(runDir, {recursive: true, force: true})
}
console.log(`${totals.passed} passed, ${totals.failed} failed`)
process.exit(status || (totals.failed > 0 ? 1 : 0))
