import {test} from 'node:test'
import assert from 'node:assert/strict'
import {cpSync, mkdtempSync, rmSync, symlinkSync, unlinkSync, writeFileSync} from 'node:fs'
import {execFileSync} from 'node:child_process'
import {tmpdir} from 'node:os'
import {join, resolve} from 'node:path'
import {runCli} from '../helpers/run-cli.js'

const EXAMPLE = resolve(import.meta.dirname, '../../../examples/broken-cluster')

async function withBundle(body: (bundle: string, dir: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'kpd-snap-'))
  try {
    const bundle = join(dir, 'bundle')
    cpSync(EXAMPLE, bundle, {recursive: true})
    await body(bundle, dir)
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
}

test('snapshot: a symbolic link in the bundle is refused, and what it points at is never echoed', async () => {
  await withBundle(async (bundle, dir) => {
    const secret = join(dir, 'shadow')
    writeFileSync(secret, 'root:$6$very-secret-hash:19000:0:99999:7:::\n')
    unlinkSync(join(bundle, 'services.json'))
    symlinkSync(secret, join(bundle, 'services.json'))
    const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', bundle])
    assert.equal(r.code, 2)
    assert.equal(
      r.stderr,
      `kproxy-doctor: cannot read ${join(bundle, 'services.json')}: ${join(bundle, 'services.json')} is a symbolic link: a bundle holds only regular files\n`,
    )
    assert.ok(!(r.stdout + r.stderr).includes('secret'))
  })
})

test('snapshot: a FIFO is refused at once instead of read forever; a file that is not JSON is named without its content', async () => {
  await withBundle(async (bundle) => {
    unlinkSync(join(bundle, 'pods.json'))
    execFileSync('mkfifo', [join(bundle, 'pods.json')])
    const fifo = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', bundle], {}, 15_000)
    assert.equal(fifo.code, 2)
    assert.match(fifo.stderr, /pods\.json is not a regular file\n$/)
    unlinkSync(join(bundle, 'pods.json'))
    writeFileSync(join(bundle, 'pods.json'), 'password=hunter2 and other things\n')
    const garbage = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', bundle])
    assert.equal(garbage.code, 2)
    assert.equal(garbage.stderr, `kproxy-doctor: cannot read ${join(bundle, 'pods.json')}: not valid JSON\n`)
  })
})

test('snapshot: --nodes takes node names only, of nodes the bundle holds; a symlinked node folder is not followed', async () => {
  await withBundle(async (bundle, dir) => {
    const escape = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', bundle, '--nodes', '../../etc'])
    assert.equal(escape.code, 2)
    assert.equal(escape.stderr, 'kproxy-doctor: not a node name (RFC 1123 subdomain): "../../etc"\n')
    const unknown = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', bundle, '--nodes', 'node-z'])
    assert.equal(unknown.code, 2)
    assert.equal(unknown.stderr, `kproxy-doctor: snapshot ${bundle} holds no node node-z (it holds node-a, node-b)\n`)
    const elsewhere = join(dir, 'elsewhere')
    cpSync(join(bundle, 'nodes', 'node-b'), elsewhere, {recursive: true})
    rmSync(join(bundle, 'nodes', 'node-b'), {recursive: true})
    symlinkSync(elsewhere, join(bundle, 'nodes', 'node-b'))
    const linked = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', bundle, '-o', 'json'])
    const nodeB = linked.json.nodes.find((n: {name: string}) => n.name === 'node-b')
    assert.deepEqual(nodeB, {
      name: 'node-b',
      reachable: false,
      error: 'nodes/node-b is not a folder (symbolic links are not followed)',
      mode: null,
      modeSource: null,
      implementer: null,
    })
  })
})

test('snapshot: a Service the bundle was not recorded for is exit 2 naming what it holds', async () => {
  const r = await runCli(['svc', 'kube-dns', '-n', 'kube-system', '--snapshot', EXAMPLE])
  assert.equal(r.code, 2)
  assert.equal(r.stderr, `kproxy-doctor: snapshot ${EXAMPLE} was recorded for shop/web, not kube-system/kube-dns\n`)
})

test("snapshot: a symbolic link inside a node's folder makes that node unreadable, named, and the other node is still diagnosed", async () => {
  await withBundle(async (bundle, dir) => {
    const secret = join(dir, 'hostname')
    writeFileSync(secret, 'very-secret-host\n')
    const dump = join(bundle, 'nodes', 'node-b', 'iptables-save.txt')
    unlinkSync(dump)
    symlinkSync(secret, dump)
    const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', bundle, '-o', 'json'])
    const nodeB = r.json.nodes.find((n: {name: string}) => n.name === 'node-b')
    assert.deepEqual(nodeB, {
      name: 'node-b',
      reachable: false,
      error: `iptables-save.txt: ${dump} is a symbolic link: a bundle holds only regular files`,
      mode: null,
      modeSource: null,
      implementer: null,
    })
    assert.equal(r.json.nodes.find((n: {name: string}) => n.name === 'node-a').reachable, true)
    assert.ok(!(r.stdout + r.stderr).includes('very-secret'))
  })
})
