import assert from 'node:assert/strict'
import {execFileSync, spawnSync} from 'node:child_process'
import {mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join, resolve} from 'node:path'
import {after, before, test} from 'node:test'
import {generateBundle} from '../../bench/generate.js'
import {API_VERSION} from '../../src/report/document.js'

// Builds the standalone executable from this machine's node (scripts/sea.mjs, as the release workflow does) into an
// empty folder, and runs it there as a user would on a machine without Node.js: PATH holds no node, and nothing of
// this repository (no node_modules, no dist/) is beside it.
const repo = resolve('.')
const tmp = mkdtempSync(join(tmpdir(), 'kpd-standalone-'))
const home = join(tmp, 'empty')
const exe = join(home, 'kproxy-doctor')
const example = join(repo, 'examples/broken-cluster')
const version = JSON.parse(readFileSync('package.json', 'utf8')).version
after(() => rmSync(tmp, {recursive: true, force: true}))

before(() => {
  mkdirSync(home)
  execFileSync(process.execPath, ['scripts/sea.mjs', '--out', exe], {stdio: 'pipe', timeout: 300_000})
})

/** Runs `file` with PATH = `path` alone, from the executable's folder. */
function run(file: string, args: string[], path = join(tmp, 'no-tools')) {
  const r = spawnSync(file, args, {
    cwd: home,
    encoding: 'utf8',
    timeout: 60_000,
    env: {PATH: path, HOME: home, NO_COLOR: '1'},
  })
  return {code: r.status, stdout: r.stdout, stderr: r.stderr}
}

test('the executable is one file that runs without node on PATH', () => {
  assert.ok(statSync(exe).mode & 0o111)
  assert.notEqual(spawnSync('/bin/sh', ['-c', 'command -v node'], {env: {PATH: join(tmp, 'no-tools')}}).status, 0)
  const r = run(exe, ['--version'])
  assert.equal(r.code, 0, r.stderr)
  assert.equal(r.stdout, `kproxy-doctor/${version} linux-${process.arch} node-${process.version}\n`)
  assert.equal(r.stderr, '')
})

test('the executable diagnoses the bundled broken example', () => {
  const r = run(exe, ['svc', 'web', '-n', 'shop', '--snapshot', example])
  assert.equal(r.code, 1, r.stderr)
  assert.match(r.stdout, /^✗ shop\/web: .* breaks at DNAT on node-b/)
  assert.equal(r.stderr, '')
  const json = run(exe, [
    'svc',
    'web',
    '-n',
    'shop',
    '--snapshot',
    join(repo, 'examples/healthy-cluster'),
    '-o',
    'yaml',
  ])
  assert.equal(json.code, 0, json.stderr)
  assert.ok(json.stdout.startsWith(`apiVersion: ${API_VERSION}\nkind: ServiceReport\n`), json.stdout.slice(0, 200))
})

test('the executable answers an unknown command and --help as the npm package does', () => {
  const unknown = run(exe, ['svcc', 'web'])
  assert.equal(unknown.code, 2)
  assert.equal(
    unknown.stderr,
    'kproxy-doctor: "svcc" is not a kproxy-doctor command. Did you mean "svc"? Run "kproxy-doctor help" for the list.\n',
  )
  const help = run(exe, ['help', 'svc'])
  assert.equal(help.code, 0, help.stderr)
  assert.match(help.stdout, /\$ kproxy-doctor svc NAME/)
})

test('named kubectl-kproxy_doctor, the executable is a kubectl plugin', () => {
  const bin = join(tmp, 'plugin-bin')
  mkdirSync(bin)
  symlinkSync(exe, join(bin, 'kubectl-kproxy_doctor'))
  symlinkSync('/usr/bin/kubectl', join(bin, 'kubectl'))
  const r = run(join(bin, 'kubectl'), ['kproxy-doctor', '-n', 'shop', 'svc', 'web', '--snapshot', example], bin)
  assert.equal(r.code, 1, r.stderr)
  assert.match(r.stdout, /^✗ shop\/web: .* breaks at DNAT on node-b/)
  const help = run(join(bin, 'kubectl'), ['kproxy-doctor', 'svc', '--help'], bin)
  assert.match(help.stdout, /\$ kubectl kproxy-doctor svc NAME/)
})

test('a large scan runs on one thread: the executable has no worker script beside it', () => {
  const {bundle} = generateBundle(join(tmp, 'scan'), 40, {nodes: 1})
  const r = run(exe, ['scan', '-n', 'bench', '--snapshot', bundle, '--threads', '2', '-v', '-o', 'json'])
  assert.equal(r.code, 0, r.stderr)
  assert.match(r.stderr, /40 of 40 Service\(s\) to diagnose, on 1 thread\(s\)/)
  assert.equal(JSON.parse(r.stdout).services.length, 40)
})
