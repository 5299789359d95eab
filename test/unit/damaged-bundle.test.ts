/**
 * Issue #32: a bundle `collect` wrote that lacks pods.json or endpointslices.json is damaged, not a cluster whose
 * endpoints are gone: one line naming the file, exit 2, never a confident ✗.
 */
import assert from 'node:assert/strict'
import {cpSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {after, test} from 'node:test'
import {runCli} from '../helpers/run-cli.js'

const tmp = mkdtempSync(join(tmpdir(), 'kpd-damaged-'))
after(() => rmSync(tmp, {recursive: true, force: true}))

for (const file of ['pods.json', 'endpointslices.json', 'nodes.json']) {
  test(`a collected bundle without ${file}: damaged, exit 2, the file named`, async () => {
    const dir = join(tmp, file)
    cpSync('examples/broken-cluster', dir, {recursive: true})
    rmSync(join(dir, file))
    const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', dir])
    assert.equal(r.code, 2, r.stdout + r.stderr)
    assert.equal(r.stdout, '')
    assert.equal(
      r.stderr,
      `kproxy-doctor: snapshot ${dir} is damaged: ${file} is missing (every bundle collect writes has it)\n`,
    )
  })
}

test('trace given a directory as its dump: one line naming the path, exit 2', async () => {
  const r = await runCli([
    'trace',
    '--iptables-save',
    tmp,
    '--src',
    '10.244.1.5',
    '--dst',
    '10.96.10.10',
    '--dport',
    '80',
  ])
  assert.equal(r.code, 2, r.stdout + r.stderr)
  assert.equal(r.stderr, `kproxy-doctor: cannot read ${tmp}: it is a directory, not a dump file\n`)
})

test('trace given a directory as --nft, --ipset-save or --ipvsadm: one line naming the path (before: EISDIR), exit 2', async () => {
  const packet = ['--src', '10.244.1.5', '--dst', '10.96.10.10', '--dport', '80']
  const dump = 'examples/healthy-cluster/nodes/node-a/iptables-save.txt'
  for (const flags of [
    ['--nft', tmp],
    ['--iptables-save', dump, '--ipset-save', tmp],
    ['--iptables-save', dump, '--ipvsadm', tmp],
  ]) {
    const r = await runCli(['trace', ...flags, ...packet])
    assert.equal(r.code, 2, r.stdout + r.stderr)
    assert.equal(r.stderr, `kproxy-doctor: ${tmp}: it is a directory, not a dump file\n`, flags.join(' '))
  }
})

test("a stray file in a bundle's nodes/ folder is no node: the bundle is read", async () => {
  const dir = join(tmp, 'stray')
  cpSync('examples/healthy-cluster', dir, {recursive: true})
  writeFileSync(join(dir, 'nodes/.DS_Store'), 'x')
  writeFileSync(join(dir, 'nodes/notes.txt'), 'x')
  const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', dir, '-o', 'json'])
  assert.equal(r.code, 0, r.stderr)
  assert.deepEqual(
    r.json.nodes.map((n: {name: string}) => n.name),
    ['node-a', 'node-b'],
  )
})
