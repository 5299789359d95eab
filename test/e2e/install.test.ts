import assert from 'node:assert/strict'
import {execFileSync, spawnSync} from 'node:child_process'
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import {tmpdir} from 'node:os'
import {dirname, join, resolve} from 'node:path'
import {after, before, test} from 'node:test'
import {generateBundle} from '../../bench/generate.js'

// Packs the working tree as `npm pack` would for a release (prepack cleans dist/ and builds), installs the tarball globally into a
// temporary prefix from the npm cache only (--offline), and runs what a user would run.
const repo = resolve('.')
const tmp = mkdtempSync(join(tmpdir(), 'kpd-install-'))
const prefix = join(tmp, 'prefix')
let tarball = ''
after(() => rmSync(tmp, {recursive: true, force: true}))

function npm(args: string[], cwd: string): string {
  return execFileSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: 240_000,
  })
}

function run(file: string, args: string[], env: Record<string, string> = {}, cwd = tmp, timeout = 60_000) {
  const r = spawnSync(file, args, {cwd, encoding: 'utf8', timeout, env: {...process.env, NO_COLOR: '1', ...env}})
  return {code: r.status, stdout: r.stdout, stderr: r.stderr}
}

before(() => {
  // A clean copy without dist/: proves prepack builds, and does not disturb the dist/ these tests run from.
  const src = join(tmp, 'src')
  mkdirSync(src)
  for (const entry of [
    'package.json',
    'package-lock.json',
    'tsconfig.json',
    'README.md',
    'bin',
    'scripts',
    'src',
    'examples',
    'schema',
  ]) {
    if (existsSync(join(repo, entry))) cpSync(join(repo, entry), join(src, entry), {recursive: true})
  }
  symlinkSync(realpathSync(join(repo, 'node_modules')), join(src, 'node_modules'))
  // A compiled command whose source is gone must not ship (the build's oclif manifest, made from the compiled commands,
  // would list it): prepack starts from an empty dist/.
  mkdirSync(join(src, 'dist/src/commands'), {recursive: true})
  writeFileSync(join(src, 'dist/src/commands/removed.js'), 'export default class Removed {}\n')
  mkdirSync(join(tmp, 'out'))
  npm(['pack', '--pack-destination', join(tmp, 'out')], src)
  tarball = join(
    tmp,
    'out',
    readdirSync(join(tmp, 'out')).find((f) => f.endsWith('.tgz'))!,
  )
  installFromCache(['install', '--global', '--prefix', prefix, tarball])
})

/** From the npm cache alone; a cache that lacks some package metadata may fill it from the registry (never elsewhere). */
function installFromCache(args: string[]): void {
  try {
    npm([...args, '--offline'], tmp)
  } catch (e) {
    if (!/ENOTCACHED/.test(String((e as {stderr?: string}).stderr))) throw e
    npm([...args, '--prefer-offline'], tmp)
  }
}

test('the packed tarball holds the bundled CLI, its examples and nothing from development', () => {
  const files = execFileSync('tar', ['-tzf', tarball], {encoding: 'utf8'}).trim().split('\n')
  for (const wanted of [
    'package/bin/run.js',
    'package/bin/kubectl-kproxy_doctor',
    'package/dist/bundle/kproxy-doctor.cjs',
    'package/dist/bundle/client-node.cjs',
    'package/dist/bundle/live-packages.cjs',
    'package/bin/program.js',
    'package/bin/package.json',
    'package/dist/bundle/scan-worker.js',
    'package/dist/bundle/scan-report.js',
    'package/dist/bundle/THIRD-PARTY-NOTICES.txt',
    'package/examples/broken-cluster/services.json',
    'package/README.md',
    'package/package.json',
  ])
    assert.ok(files.includes(wanted), `${wanted} in the tarball`)
  const unwanted = files.filter(
    (f) =>
      /^package\/(src|test|bench|dist\/src|dist\/test|dist\/bench|dist\/sea|scripts|node_modules|\.ci)\//.test(f) ||
      f.endsWith('.ts'),
  )
  assert.deepEqual(unwanted, [])
  const pkg = JSON.parse(execFileSync('tar', ['-xzOf', tarball, 'package/package.json'], {encoding: 'utf8'}))
  assert.deepEqual(pkg.dependencies ?? {}, {}, 'everything the CLI runs is in the bundle')
})

test('npm i -g installs the package alone, within 20 MB', () => {
  const installed = join(prefix, 'lib/node_modules/kproxy-doctor')
  assert.deepEqual(
    readdirSync(prefix, {recursive: true}).filter((f) => String(f).includes('node_modules/kproxy-doctor/node_modules')),
    [],
  )
  // Every file's size, as `du -sb` counts it (the package has no node_modules of its own: checked above).
  const bytes = readdirSync(installed, {recursive: true, withFileTypes: true})
    .filter((e) => e.isFile())
    .reduce((sum, e) => sum + statSync(join(e.parentPath, e.name)).size, 0)
  assert.ok(bytes <= 20 * 1024 * 1024, `installed size ${(bytes / 1048576).toFixed(1)} MB`)
  const help = run(join(prefix, 'bin/kproxy-doctor'), ['help'])
  assert.equal(help.code, 0, help.stderr)
  assert.match(help.stdout, /svc +Diagnose one Service/)
  assert.doesNotMatch(help.stdout, /removed/, 'a stale compiled command is not listed')
  const version = run(join(prefix, 'bin/kproxy-doctor'), ['--version'])
  assert.equal(
    version.stdout,
    `kproxy-doctor/${JSON.parse(readFileSync('package.json', 'utf8')).version} ${process.platform}-${process.arch} node-${process.version}\n`,
  )
})

test('npm i -g: the installed kproxy-doctor diagnoses the bundled broken example', () => {
  const installed = join(prefix, 'lib/node_modules/kproxy-doctor')
  const r = run(join(prefix, 'bin/kproxy-doctor'), [
    'svc',
    'web',
    '-n',
    'shop',
    '--snapshot',
    join(installed, 'examples/broken-cluster'),
  ])
  assert.equal(r.code, 1, r.stderr)
  assert.match(r.stdout, /^✗ shop\/web: .* breaks at DNAT on node-b/)
  const healthy = run(join(prefix, 'bin/kproxy-doctor'), [
    'svc',
    'web',
    '-n',
    'shop',
    '--snapshot',
    join(installed, 'examples/healthy-cluster'),
    '-o',
    'json',
  ])
  assert.equal(healthy.code, 0, healthy.stderr)
  assert.equal(JSON.parse(healthy.stdout).ok, true)
})

test('npx (npm exec) runs the tarball without installing it globally', () => {
  const r = run(
    'npm',
    [
      'exec',
      '--prefer-offline',
      '--yes',
      `--package=${tarball}`,
      '--',
      'kproxy-doctor',
      'svc',
      'web',
      '-n',
      'shop',
      '--snapshot',
      join(repo, 'examples/broken-cluster'),
    ],
    {},
    tmp,
    240_000,
  )
  assert.equal(r.code, 1, r.stderr)
  assert.match(r.stdout, /^✗ shop\/web: .* breaks at DNAT on node-b/, `stdout was empty; npm exec said:\n${r.stderr}`)
})

test('the installed package is a kubectl plugin: kubectl finds it on PATH and runs it', () => {
  const env = {PATH: [join(prefix, 'bin'), dirname(process.execPath), '/usr/bin', '/bin'].join(':'), HOME: tmp}
  const list = run('/usr/bin/kubectl', ['plugin', 'list'], env)
  assert.match(list.stdout, new RegExp(`${join(prefix, 'bin/kubectl-kproxy_doctor')}\\n`))
  const installed = join(prefix, 'lib/node_modules/kproxy-doctor')
  const r = run(
    '/usr/bin/kubectl',
    ['kproxy-doctor', 'svc', 'web', '-n', 'shop', '--snapshot', join(installed, 'examples/broken-cluster')],
    env,
  )
  assert.equal(r.code, 1, r.stderr)
  assert.match(r.stdout, /^✗ shop\/web: .* breaks at DNAT on node-b/)
})

test('the installed package judges a large scan on worker threads (files beside the bundle)', () => {
  const {bundle} = generateBundle(join(tmp, 'scan'), 40, {nodes: 1})
  const r = run(join(prefix, 'bin/kproxy-doctor'), [
    'scan',
    '-n',
    'bench',
    '--snapshot',
    bundle,
    '--threads',
    '2',
    '-v',
    '-o',
    'json',
  ])
  assert.equal(r.code, 0, r.stderr)
  assert.match(r.stderr, /40 of 40 Service\(s\) to diagnose, on 2 thread\(s\)/)
  const document = JSON.parse(r.stdout)
  assert.equal(document.ok, true)
  assert.equal(document.services.length, 40)
})
