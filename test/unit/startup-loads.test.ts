import {test, after} from 'node:test'
import assert from 'node:assert/strict'
import {spawnSync} from 'node:child_process'
import {closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {basename, join, resolve} from 'node:path'

// What a run loads beside the program (dist/bundle/kproxy-doctor.cjs): the API client (client-node.cjs, 6 MB) and the
// live packages (ssh2, ws, dns-packet: live-packages.cjs) are required on first use. A snapshot run and --version need
// neither; a single import of the client into a module every run loads (as once read-policy.ts's import of its
// ApiException class) made every snapshot run read and compile the whole client.
const tmp = mkdtempSync(join(tmpdir(), 'kpd-startup-loads-'))
after(() => rmSync(tmp, {recursive: true, force: true}))
let runs = 0

/**
 * Runs a command line through bin/program.js as bin/run.js does; returns its exit code, the files it required and the
 * Node.js modules it loaded (process.moduleLoadList, without the prefix `NativeModule `).
 */
function filesRequired(
  args: string[],
  {outputToFiles = false} = {},
): {code: number | null; files: string[]; builtIns: string[]; stderr: string} {
  const list = join(tmp, `required-${runs++}.json`)
  const script = `process.on('exit', () => require('node:fs').writeFileSync(${JSON.stringify(list)}, JSON.stringify({files: Object.keys(require.cache), builtIns: process.moduleLoadList})))
require(${JSON.stringify(resolve('bin/program.js'))}).runProgram(${JSON.stringify(args)})`
  // A script file, not `node -e`: Node loads its crypto modules for code given with -e.
  const file = join(tmp, `run-${runs}.cjs`)
  writeFileSync(file, script)
  // Output to files, as a redirection gives: Node.js makes a pipe's stream with net, which a run then loads anyway.
  const outputs = [join(tmp, `stdout-${runs}`), join(tmp, `stderr-${runs}`)]
  const fds = outputToFiles ? outputs.map((f) => openSync(f, 'w')) : []
  const r = spawnSync(process.execPath, [file], {
    encoding: 'utf8',
    env: {...process.env, XDG_CACHE_HOME: join(tmp, 'cache'), NO_COLOR: '1'},
    timeout: 60_000,
    stdio: outputToFiles ? ['ignore', fds[0], fds[1]] : 'pipe',
  })
  for (const fd of fds) closeSync(fd)
  if (outputToFiles) r.stderr = readFileSync(outputs[1], 'utf8')
  const loaded = JSON.parse(readFileSync(list, 'utf8')) as {files: string[]; builtIns: string[]}
  const builtIns = loaded.builtIns.filter((m) => m.startsWith('NativeModule ')).map((m) => m.slice(13))
  return {code: r.status, files: loaded.files.map((f) => basename(f)), builtIns, stderr: r.stderr}
}

test('a snapshot svc and --version load neither the API client nor the live packages', () => {
  for (const args of [['svc', 'web', '-n', 'shop', '--snapshot', 'examples/broken-cluster'], ['--version']]) {
    for (const round of ['first run', 'with the code cache']) {
      const r = filesRequired(args)
      assert.equal(r.code, args[0] === 'svc' ? 1 : 0, r.stderr)
      assert.deepEqual(
        r.files.filter((f) => f === 'client-node.cjs' || f === 'live-packages.cjs'),
        [],
        `${args.join(' ')}, ${round}`,
      )
    }
  }
})

// oclif requires these as it loads, for paths a snapshot run does not take (a WSL check, a flag read from stdin,
// OCLIF_PERFORMANCE, fs/promises but for its theme file's readFile), and src/'s transports import crypto: each is a
// dozen Node.js modules compiled at start (scripts/bundle.mjs LOADED_LATER; chain names are hashed by @noble/hashes, pure JavaScript).
test('a snapshot svc and --version load neither child_process, readline, perf_hooks, crypto nor fs/promises', () => {
  for (const args of [['svc', 'web', '-n', 'shop', '--snapshot', 'examples/broken-cluster'], ['--version']]) {
    const r = filesRequired(args)
    assert.equal(r.code, args[0] === 'svc' ? 1 : 0, r.stderr)
    assert.deepEqual(
      r.builtIns.filter((m) => ['child_process', 'readline', 'perf_hooks', 'crypto', 'fs/promises'].includes(m)),
      [],
      args.join(' '),
    )
  }
})

// With its output to files, nothing a snapshot run does needs net or tty (a dozen Node.js modules): oclif works out
// the terminal's widths only when it wraps an error or help (process.stderr was made for it at start), and chalk's
// colour detection asks node:tty only about a character device (scripts/bundle.mjs screenWidthsOnRead,
// isattyByFstat); in a terminal, Node.js makes stdout's stream with tty.
test('a snapshot svc and --version with their output to files load neither net nor tty', () => {
  for (const args of [['svc', 'web', '-n', 'shop', '--snapshot', 'examples/broken-cluster'], ['--version']]) {
    const r = filesRequired(args, {outputToFiles: true})
    assert.equal(r.code, args[0] === 'svc' ? 1 : 0, r.stderr)
    assert.deepEqual(
      r.builtIns.filter((m) => ['net', 'tty'].includes(m)),
      [],
      args.join(' '),
    )
  }
})

test('a live svc loads the API client (the check above sees what is required)', () => {
  const kubeconfig = join(tmp, 'kubeconfig')
  // An API server at a closed port on loopback: the client is loaded to ask it, and the run ends on the refusal.
  writeFileSync(
    kubeconfig,
    'apiVersion: v1\nkind: Config\nclusters:\n- name: closed\n  cluster: {server: "https://127.0.0.1:9"}\n' +
      'contexts:\n- name: closed\n  context: {cluster: closed, user: nobody}\ncurrent-context: closed\n' +
      'users:\n- name: nobody\n  user: {token: placeholder}\n',
  )
  const r = filesRequired(['svc', 'web', '-n', 'shop', '--kubeconfig', kubeconfig])
  assert.match(r.stderr, /cannot reach the Kubernetes API at https:\/\/127\.0\.0\.1:9/)
  assert.ok(r.files.includes('client-node.cjs'), r.files.join(' '))
})
