import {test} from 'node:test'
import assert from 'node:assert/strict'
import {execFile} from 'node:child_process'
import {resolve} from 'node:path'
import {XMLValidator} from 'fast-xml-parser'
import {progressReporter} from '../../src/cli/progress.js'
import {runCli} from '../helpers/run-cli.js'

const ROOT = resolve(import.meta.dirname, '../../..')
const CLEAR = '\r\x1b[K'

/** A terminal that records what is written, with a clock the test moves. */
function fakeTerminal(isTTY: boolean, columns = 120) {
  const writes: string[] = []
  let t = 0
  return {
    stream: {isTTY, columns, write: (s: string) => (writes.push(s), true)},
    writes,
    now: () => t,
    advance: (ms: number) => (t += ms),
  }
}

test('progress: in a terminal, one line redrawn with \\r per event (nodes read, the slowest node, Services diagnosed), cleared at the end', () => {
  const term = fakeTerminal(true)
  const p = progressReporter({}, term.stream, {}, term.now)
  assert.ok(p)
  p.onProgress({kind: 'node-read-started', node: 'node-a', total: 3})
  p.onProgress({kind: 'node-read-started', node: 'node-b', total: 3})
  term.advance(400)
  p.onProgress({kind: 'node-read-finished', node: 'node-a', ms: 400, ok: true})
  term.advance(1200)
  p.onProgress({kind: 'node-read-started', node: 'node-c', total: 3}) // node-b is still being read, 1.6 s so far
  term.advance(400)
  p.onProgress({kind: 'node-read-finished', node: 'node-b', ms: 2000, ok: false})
  p.onProgress({kind: 'node-read-finished', node: 'node-c', ms: 400, ok: true})
  p.onProgress({kind: 'service-diagnosed', service: 'shop/web', index: 1, total: 3})
  p.onProgress({kind: 'service-diagnosed', service: 'shop/db', index: 2, total: 3}) // within 100 ms: not redrawn
  p.onProgress({kind: 'service-diagnosed', service: 'shop/api', index: 3, total: 3}) // the last one always is
  p.done()
  p.onProgress({kind: 'service-diagnosed', service: 'shop/late', index: 3, total: 3}) // after done: nothing
  p.done()
  assert.deepEqual(term.writes, [
    `${CLEAR}kproxy-doctor: nodes read 0/3`,
    `${CLEAR}kproxy-doctor: nodes read 0/3`,
    `${CLEAR}kproxy-doctor: nodes read 1/3, slowest node-a 0.4s`,
    `${CLEAR}kproxy-doctor: nodes read 1/3, slowest node-b 1.6s and counting`,
    `${CLEAR}kproxy-doctor: nodes read 2/3 (1 failed), slowest node-b 2.0s`,
    `${CLEAR}kproxy-doctor: nodes read 3/3 (1 failed), slowest node-b 2.0s`,
    `${CLEAR}kproxy-doctor: nodes read 3/3 (1 failed), slowest node-b 2.0s · Services diagnosed 1/3`,
    `${CLEAR}kproxy-doctor: nodes read 3/3 (1 failed), slowest node-b 2.0s · Services diagnosed 3/3`,
    CLEAR,
  ])
  assert.ok(!term.writes.some((w) => w.includes('\n')), 'never a new line: the line is redrawn in place')
})

test('progress: the line never wraps (cut to the terminal width) and node names are made printable', () => {
  const term = fakeTerminal(true, 40)
  const p = progressReporter({}, term.stream, {}, term.now)!
  p.onProgress({kind: 'node-read-started', node: 'node-\x1b[31m-with-a-very-long-name', total: 1})
  p.onProgress({kind: 'node-read-finished', node: 'node-\x1b[31m-with-a-very-long-name', ms: 10, ok: true})
  p.done()
  for (const w of term.writes.slice(0, -1)) {
    assert.ok(w.length - CLEAR.length <= 39, w)
    assert.ok(!w.slice(CLEAR.length).includes('\x1b'), JSON.stringify(w))
  }
  assert.equal(term.writes.at(-1), CLEAR)
})

test('progress: nothing at all into a pipe, in CI, with TERM=dumb, with --verbose or -q; no clear when nothing was drawn', () => {
  for (const [isTTY, flags, env] of [
    [false, {}, {}],
    [true, {}, {CI: 'true'}],
    [true, {}, {TERM: 'dumb'}],
    [true, {verbose: true}, {}],
    [true, {quiet: true}, {}],
  ] as const) {
    const term = fakeTerminal(isTTY)
    assert.equal(progressReporter(flags, term.stream, env, term.now), undefined)
  }
  const term = fakeTerminal(true)
  progressReporter({}, term.stream, {}, term.now)!.done()
  assert.deepEqual(term.writes, [])
})

test('scan -o json / -o junit with stderr a pipe: stdout is one clean document, stderr is empty', async () => {
  const snapshot = resolve(ROOT, 'examples/healthy-cluster')
  const json = await runCli(['scan', '-A', '--snapshot', snapshot, '-o', 'json'], {CI: ''})
  assert.equal(json.code, 0, json.stderr)
  assert.equal(json.stderr, '')
  assert.equal(JSON.parse(json.stdout).kind, 'ScanReport')
  const junit = await runCli(['scan', '-A', '--snapshot', snapshot, '-o', 'junit'], {CI: ''})
  assert.equal(junit.code, 0, junit.stderr)
  assert.equal(junit.stderr, '')
  assert.equal(XMLValidator.validate(junit.stdout), true)
  assert.match(junit.stdout, /^<\?xml/)
})

test('scan in a real terminal (a pty from util-linux script): the progress line, cleared, then the report', async (t) => {
  const hasScript = await new Promise<boolean>((ok) => execFile('script', ['--version'], (err) => ok(!err)))
  if (!hasScript) return t.skip('util-linux script is not installed')
  const env: NodeJS.ProcessEnv = {...process.env, NO_COLOR: '1', TERM: 'xterm'}
  delete env.CI
  const out = await new Promise<string>((ok, fail) =>
    execFile(
      'script',
      [
        '-qec',
        `${JSON.stringify(process.execPath)} bin/run.js scan -A --snapshot examples/broken-cluster`,
        '/dev/null',
      ],
      {cwd: ROOT, env, encoding: 'utf8', timeout: 60_000},
      (err, stdout) =>
        // exit 1: the broken example has error findings
        err && (err as {code?: unknown}).code !== 1 ? fail(err) : ok(stdout),
    ),
  )
  const drawn = out.indexOf('kproxy-doctor: Services diagnosed 1/1')
  assert.ok(drawn >= 0, JSON.stringify(out.slice(0, 300)))
  const cleared = out.indexOf(CLEAR, drawn)
  const report = out.indexOf('1 of 1 diagnosed Services are broken')
  assert.ok(cleared > drawn && report > cleared, 'the line is cleared before the report is printed')
  assert.match(out, /note: a scan asks cluster DNS[^\n]*\r?\n$/, 'the output ends with the report')
})
