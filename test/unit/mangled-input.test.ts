/**
 * What the seeded CLI campaign of stop 44 found (mutated bundles and dumps through `svc`, `scan` and `trace`; seeds and
 * counts in docs/development.md), each as the smallest input that shows it: input that is no longer what the node
 * printed is refused with one line, never judged.
 */
import assert from 'node:assert/strict'
import {cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {after, test} from 'node:test'
import {BufferSource} from '../../src/parse/dump-source.js'
import {IptablesSave} from '../../src/parse/iptables-save.js'
import {runCli} from '../helpers/run-cli.js'

const tmp = mkdtempSync(join(tmpdir(), 'kpd-mangled-'))
after(() => rmSync(tmp, {recursive: true, force: true}))

const POD = ['--src', '10.244.1.5', '--dst', '10.96.10.10', '--dport', '80']
const NAT_HEAD =
  '*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n'

function refusal(text: string): string | undefined {
  try {
    IptablesSave.parse(new BufferSource(Buffer.from(text)))
    return undefined
  } catch (e) {
    return (e as Error).message
  }
}

test('a chain declared twice in one table is refused naming the second declaration, however the dump is ordered', () => {
  const again =
    'chain A is declared twice in table nat: iptables-save declares each chain once (two dumps run together?)'
  // In order (the declarations' block), after the rules began, and with rules out of order between the two.
  assert.equal(refusal(`${NAT_HEAD}:A - [0:0]\n:B - [0:0]\n:A DROP [0:0]\n-A A -j B\nCOMMIT\n`), `line 8: ${again}`)
  assert.equal(refusal(`${NAT_HEAD}:A - [0:0]\n-A A -j RETURN\n:A - [0:0]\nCOMMIT\n`), `line 8: ${again}`)
  assert.equal(
    refusal(`${NAT_HEAD}:B - [0:0]\n:A - [0:0]\n-A A -j B\n-A B -j A\n:A - [0:0]\nCOMMIT\n`),
    `line 10: ${again}`,
  )
  // A chain with rules and then its declaration is a declaration read late, not a second one.
  assert.equal(refusal(`${NAT_HEAD}-A A -j RETURN\n:A - [0:0]\nCOMMIT\n`), undefined)
  // The same name in two tables is two chains.
  assert.equal(refusal(`${NAT_HEAD}:A - [0:0]\nCOMMIT\n*filter\n:A - [0:0]\nCOMMIT\n`), undefined)
})

test('a table that begins again is refused naming both lines, even when it declares nothing twice', () => {
  assert.equal(
    refusal(`${NAT_HEAD}:A - [0:0]\nCOMMIT\n*filter\nCOMMIT\n*nat\n-A A -j RETURN\nCOMMIT\n`),
    'line 10: table nat begins again (first on line 1): iptables-save prints each table once (two dumps run together?)',
  )
})

test("two dumps run together in a node's recording: that node not read (exit 3), never doubled rules judged", async () => {
  const dir = join(tmp, 'twice')
  cpSync('examples/healthy-cluster', dir, {recursive: true})
  const file = join(dir, 'nodes/node-a/iptables-save.txt')
  const save = readFileSync(file, 'utf8')
  writeFileSync(file, save + save)
  // Read as one dump, every KUBE-SVC chain held its branches twice: KPD-PROBABILITY-WRONG and KPD-NODE-DIVERGES.
  const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', dir, '-o', 'json'])
  assert.equal(r.code, 3, r.stdout + r.stderr)
  assert.deepEqual(
    r.json.findings.map((f: {code: string; node?: string}) => `${f.code} ${f.node}`),
    ['KPD-NODE-UNREADABLE node-a'],
  )
  const firstTable = save.split('\n').findIndex((l) => l.startsWith('*')) + 1
  const again = save.split('\n').length - 1 + firstTable
  const row = r.json.notChecked.find(
    (n: {node: string; check: string}) => n.node === 'node-a' && n.check === 'node-read',
  )
  assert.equal(
    row?.reason,
    `not read: iptables-save.txt unreadable: line ${again}: table filter begins again (first on line ${firstTable}): iptables-save prints each table once (two dumps run together?)`,
  )
})

test('trace of a dump with a chain declared twice: exit 2, one line naming it', async () => {
  const file = join(tmp, 'declared-twice.txt')
  const save = readFileSync('examples/healthy-cluster/nodes/node-a/iptables-save.txt', 'utf8')
  const lines = save.split('\n')
  const at = lines.findIndex((l) => l.startsWith(':KUBE-SERVICES '))
  lines.splice(at + 1, 0, lines[at])
  writeFileSync(file, lines.join('\n'))
  const r = await runCli(['trace', '--iptables-save', file, ...POD])
  assert.equal(r.code, 2, r.stdout + r.stderr)
  assert.equal(r.stdout, '')
  const table = lines
    .slice(0, at)
    .filter((l) => l.startsWith('*'))
    .pop()!
    .slice(1)
  assert.equal(
    r.stderr,
    `kproxy-doctor: ${file}: line ${at + 2}: chain KUBE-SERVICES is declared twice in table ${table}: iptables-save declares each chain once (two dumps run together?)\n`,
  )
})

test("a bundle's JSON file that holds null: one line naming the file (was: a TypeError's words), exit 2", async () => {
  for (const [file, why] of [
    ['services.json', 'no "items" list'],
    ['endpointslices.json', 'no "items" list'],
    ['manifest.json', 'not a kproxy-doctor bundle manifest'],
  ]) {
    const dir = join(tmp, `null-${file}`)
    cpSync('examples/healthy-cluster', dir, {recursive: true})
    writeFileSync(join(dir, file), 'null\n')
    const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', dir])
    assert.equal(r.code, 2, r.stdout + r.stderr)
    assert.equal(r.stderr, `kproxy-doctor: cannot read ${join(dir, file)}: ${why}\n`, file)
  }
})

test('a COMMIT outside a table is refused naming its line (a doubled COMMIT was read past)', () => {
  assert.equal(
    refusal(`${NAT_HEAD}COMMIT\nCOMMIT\n`),
    'line 7: COMMIT outside a table (no "*table" line before it since the last COMMIT)',
  )
})

test("a node's recorded dump with a chain that has rules but no declaration: that node not read (exit 3), never judged", async () => {
  const dir = join(tmp, 'undeclared')
  cpSync('examples/healthy-cluster', dir, {recursive: true})
  const file = join(dir, 'nodes/node-a/iptables-save.txt')
  const lines = readFileSync(file, 'utf8').split('\n')
  const at = lines.findIndex((l) => l.startsWith(':KUBE-SEP-'))
  const chain = lines[at].slice(1).split(' ')[0]
  lines.splice(at, 1)
  writeFileSync(file, lines.join('\n'))
  // Before: judged as a whole dump, exit 0 (a trace walks such a paste as the fragment it is).
  const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', dir, '-o', 'json'])
  assert.equal(r.code, 3, r.stdout + r.stderr)
  const firstRule = lines.findIndex((l) => l.startsWith(`-A ${chain} `)) + 1
  const row = r.json.notChecked.find(
    (n: {node: string; check: string}) => n.node === 'node-a' && n.check === 'node-read',
  )
  assert.equal(
    row?.reason,
    `not read: iptables-save.txt unreadable: line ${firstRule}: chain ${chain} of table nat has rules but no ":${chain}" declaration: iptables-save declares every chain (a cut or edited copy?)`,
  )
})

test('an unreadable save of the other iptables backend is a not-required iptables-backend row (was: nothing said)', async () => {
  const dir = join(tmp, 'backend')
  cpSync('examples/healthy-cluster', dir, {recursive: true})
  writeFileSync(join(dir, 'nodes/node-a/iptables-legacy-save.txt'), '*nat\n:PREROUTING ACCEPT [0:0]\ngarbage\n')
  const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', dir, '-o', 'json'])
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.deepEqual(
    r.json.notChecked
      .filter((n: {check: string}) => n.check === 'iptables-backend')
      .map((n: {node: string; reason: string; required: boolean}) => [n.node, n.reason, n.required]),
    [
      [
        'node-a',
        'iptables-legacy-save.txt unreadable: line 3: not iptables-save output: "garbage": kube-proxy rules left in iptables-legacy are not looked for',
        false,
      ],
    ],
  )
})

test("a #kpd-not-read mark in a node's recorded dump: the read was not made, never a dump judged or an empty one", async () => {
  // IPv4: before, the mark's line was a comment (a dump after it was judged; alone, "returned nothing").
  const dir = join(tmp, 'mark4')
  cpSync('examples/healthy-cluster', dir, {recursive: true})
  const file = join(dir, 'nodes/node-a/iptables-save.txt')
  writeFileSync(file, `#kpd-not-read 1\tiptables-save\tiptables-save: Permission denied\n${readFileSync(file, 'utf8')}`)
  const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', dir, '-o', 'json'])
  assert.equal(r.code, 3, r.stdout + r.stderr)
  const row = r.json.notChecked.find(
    (n: {node: string; check: string}) => n.node === 'node-a' && n.check === 'node-read',
  )
  assert.equal(
    row?.reason,
    'not read: iptables-save.txt unreadable: line 1: a #kpd-not-read mark: iptables-save was not read (exit 1: iptables-save: Permission denied)',
  )
  // IPv6: before, the mark alone was read as a save with no table: KPD-HOOK-MISSING and KPD-MODE-LEFTOVER on node-a.
  const dual = join(tmp, 'mark6')
  cpSync('examples/dualstack-cluster', dual, {recursive: true})
  writeFileSync(join(dual, 'nodes/node-a/ip6tables-save.txt'), '#kpd-not-read 127\tip6tables-save\tnot found\n')
  const r6 = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', dual, '-o', 'json'])
  assert.equal(r6.code, 1, r6.stdout + r6.stderr)
  assert.deepEqual(
    r6.json.findings.map((f: {code: string; node?: string}) => `${f.code} ${f.node}`),
    ['KPD-DNAT-WRONG node-b'],
  )
  assert.deepEqual(
    r6.json.notChecked
      .filter((n: {node: string; required: boolean}) => n.node === 'node-a' && n.required)
      .map((n: {check: string; reason: string}) => [n.check, n.reason]),
    [['proxy-rules', 'IPv6 rules not read (ip6tables-save)']],
  )
})
