import assert from 'node:assert/strict'
import {execFile, execFileSync, spawnSync} from 'node:child_process'
import {createHash} from 'node:crypto'
import {mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {dirname, join, resolve} from 'node:path'
import {after, test} from 'node:test'
import {parse} from 'yaml'
import {fromKubectlArgs} from '../../src/cli/kubectl-args.js'

const tmp = mkdtempSync(join(tmpdir(), 'kpd-kubectl-'))
after(() => rmSync(tmp, {recursive: true, force: true}))
// Only the plugin, node and the system tools on PATH: kubectl must discover the plugin from PATH alone.
symlinkSync(resolve('bin/kubectl-kproxy_doctor'), join(tmp, 'kubectl-kproxy_doctor'))
const PATH = [tmp, dirname(process.execPath), '/usr/local/bin', '/usr/bin', '/bin'].join(':')

function kubectl(args: string[]): Promise<{code: number; stdout: string; stderr: string}> {
  return new Promise((done) => {
    execFile(
      '/usr/bin/kubectl',
      args,
      {encoding: 'utf8', timeout: 60_000, env: {PATH, HOME: tmp, NO_COLOR: '1'}},
      (err, stdout, stderr) => {
        done({code: err ? ((err as {code?: number}).code ?? -1) : 0, stdout, stderr})
      },
    )
  })
}

test("kubectl's global flags are moved after the command words, in kproxy-doctor's spelling", () => {
  assert.deepEqual(fromKubectlArgs(['-n', 'shop', 'svc', 'web']), ['svc', 'web', '--namespace', 'shop'])
  assert.deepEqual(fromKubectlArgs(['--context=prod', 'svc', 'web', '-nshop', '--kubeconfig', '/k']), [
    'svc',
    'web',
    '--context',
    'prod',
    '--namespace',
    'shop',
    '--kubeconfig',
    '/k',
  ])
  assert.deepEqual(fromKubectlArgs(['svc', 'web', '--namespace=shop', '-o', 'json']), [
    'svc',
    'web',
    '-o',
    'json',
    '--namespace',
    'shop',
  ])
  assert.deepEqual(fromKubectlArgs(['svc', 'web', '--', '-n', 'x']), ['svc', 'web', '--', '-n', 'x'])
  assert.deepEqual(
    fromKubectlArgs(['svc', 'web', '-n']),
    ['svc', 'web', '-n'],
    'a flag missing its value is left for the parser to refuse',
  )
})

test('the plugin file is executable and declared in package.json', () => {
  assert.ok(statSync('bin/kubectl-kproxy_doctor').mode & 0o111)
  const pkg = JSON.parse(readFileSync('package.json', 'utf8'))
  assert.equal(pkg.bin['kubectl-kproxy_doctor'], './bin/kubectl-kproxy_doctor')
})

test('the real kubectl discovers the plugin on PATH', async () => {
  const r = await kubectl(['plugin', 'list'])
  assert.match(r.stdout, new RegExp(`${join(tmp, 'kubectl-kproxy_doctor')}\\n`))
})

test('kubectl kproxy-doctor svc web -n shop diagnoses the bundled example, -n before or after the command', async () => {
  for (const args of [
    ['kproxy-doctor', 'svc', 'web', '-n', 'shop', '--snapshot', resolve('examples/broken-cluster'), '-o', 'json'],
    ['kproxy-doctor', '-n', 'shop', 'svc', 'web', '--snapshot', resolve('examples/broken-cluster'), '-o', 'json'],
    ['kproxy-doctor', '--namespace=shop', 'svc', 'web', '--snapshot', resolve('examples/broken-cluster'), '-o', 'json'],
  ]) {
    const r = await kubectl(args)
    assert.equal(r.code, 1, r.stderr)
    assert.match(JSON.parse(r.stdout).summary, /^✗ shop\/web: .* breaks at DNAT on node-b/)
  }
  const help = await kubectl(['kproxy-doctor', 'svc', '--help'])
  assert.match(help.stdout, /\$ kubectl kproxy-doctor svc NAME/)
})

test("kubectl's --kubeconfig and --context reach the diagnosis", async () => {
  const kc = join(tmp, 'kubeconfig')
  writeFileSync(
    kc,
    'apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user:\n    token: t\ncurrent-context: x\n',
  )
  const wrong = await kubectl(['kproxy-doctor', '--kubeconfig', kc, '--context', 'prod', 'svc', 'web', '-n', 'shop'])
  assert.equal(wrong.code, 2)
  assert.match(wrong.stderr, /context "prod" not found in kubeconfig \(known: x\)/)
  const down = await kubectl([
    'kproxy-doctor',
    'svc',
    'web',
    '-n',
    'shop',
    `--kubeconfig=${kc}`,
    '--context=x',
    '--timeout',
    '3',
  ])
  assert.equal(down.code, 2)
  assert.match(down.stderr, /cannot reach the Kubernetes API at https:\/\/127\.0\.0\.1:1: ECONNREFUSED/)
})

test('the krew manifest is a template: the release fills each platform from the checksum of its own asset', () => {
  const template = readFileSync('plugins/kproxy-doctor.template.yaml', 'utf8')
  assert.doesNotMatch(template, /[0-9a-f]{64}/, 'the checked-in template claims no checksum')
  const assets = [...template.matchAll(/\{\{URI:([^}]+)\}\}/g)].map((m) => m[1])
  assert.deepEqual(assets, [
    'kproxy-doctor-linux-x64.tar.gz',
    'kproxy-doctor-linux-arm64.tar.gz',
    'kproxy-doctor-npm.tgz',
  ])
  const sums = join(tmp, 'SHA256SUMS')
  const checksum = (asset: string) => createHash('sha256').update(asset).digest('hex')
  writeFileSync(sums, assets.map((a) => `${checksum(a)}  ${a}\n`).join(''))
  const pkg = JSON.parse(readFileSync('package.json', 'utf8'))
  const base = 'https://github.com/example/kproxy-doctor/releases/download/v9.9.9'
  const filled = execFileSync(
    process.execPath,
    ['scripts/krew-manifest.mjs', '--version', pkg.version, '--base-url', base, '--checksums', sums],
    {encoding: 'utf8'},
  )
  const manifest = parse(filled)
  assert.equal(manifest.kind, 'Plugin')
  assert.equal(manifest.metadata.name, 'kproxy-doctor')
  assert.equal(manifest.spec.version, `v${pkg.version}`)
  assert.equal(manifest.spec.homepage, 'https://github.com/example/kproxy-doctor')
  const platforms = manifest.spec.platforms as Array<{uri: string; sha256: string; bin: string}>
  assert.deepEqual(
    platforms.map((p) => [p.uri, p.sha256]),
    assets.map((a) => [`${base}/${a}`, checksum(a)]),
  )
  assert.deepEqual(
    platforms.map((p) => p.bin),
    ['kproxy-doctor', 'kproxy-doctor', pkg.bin['kubectl-kproxy_doctor'].replace(/^\.\//, '')],
  )
  // An asset without a checksum gives no manifest.
  writeFileSync(sums, `${checksum(assets[0])}  ${assets[0]}\n`)
  const refused = spawnSync(
    process.execPath,
    ['scripts/krew-manifest.mjs', '--version', pkg.version, '--base-url', base, '--checksums', sums],
    {encoding: 'utf8'},
  )
  assert.equal(refused.status, 2)
  assert.equal(refused.stdout, '')
  assert.match(refused.stderr, /no checksum for kproxy-doctor-linux-arm64\.tar\.gz/)
})
