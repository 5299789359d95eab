import {test} from 'node:test'
import assert from 'node:assert/strict'
import {spawnSync} from 'node:child_process'
import {Chalk} from 'chalk'
import stringWidth from 'string-width'
import {fixLines} from '../../src/report/fix-lines.js'
import {displayWidth, ONE_COLUMN_EACH, outputWidth, wrapCommand, wrapProse} from '../../src/report/width.js'
import {runCli} from '../helpers/run-cli.js'
import {lcg} from '../helpers/seeded.js'

const EXAMPLES = ['broken-cluster', 'healthy-cluster', 'ipvs-cluster']
const COLS = {COLUMNS: '80'}

function assertFits(text: string, width: number, what: string): void {
  const over = text.split('\n').filter((l) => stringWidth(l) > width)
  assert.deepEqual(over, [], `${what}: lines wider than ${width} columns`)
}

/** The text with line breaks and indentation folded to single spaces, as a reader joins wrapped lines. */
const joined = (text: string) => text.replace(/\s+/g, ' ')

/** The trace command over a node of each example (IPVS nodes with their ipvsadm and ipset dumps). */
function traceArgs(example: string): string[] {
  const dir = `examples/${example}/nodes/node-b`
  const base = [
    'trace',
    '--iptables-save',
    `${dir}/iptables-save.txt`,
    '--src',
    '10.244.2.5',
    '--dst',
    '10.96.10.10',
    '--dport',
    '80',
    '--node-ip',
    '10.200.0.12',
  ]
  return example === 'ipvs-cluster'
    ? [...base, '--ipvsadm', `${dir}/ipvsadm.txt`, '--ipset-save', `${dir}/ipset.txt`]
    : base
}

for (const example of EXAMPLES) {
  test(`${example}: svc, svc --explain, scan and trace fit 80 columns and lose nothing`, async () => {
    const snapshot = ['--snapshot', `examples/${example}`]
    const json = (await runCli(['svc', 'web', '-n', 'shop', ...snapshot, '-o', 'json', '--explain'])).json
    for (const args of [[], ['--explain']]) {
      const r = await runCli(['svc', 'web', '-n', 'shop', ...snapshot, ...args], COLS)
      const what = `${example} svc ${args.join(' ')}`
      assertFits(r.stdout, 80, what)
      const text = joined(r.stdout)
      for (const f of json.findings) {
        assert.ok(text.includes(f.code), `${what}: ${f.code}`)
        const message = f.node && f.message.startsWith(`${f.node}: `) ? f.message.slice(f.node.length + 2) : f.message
        assert.ok(text.includes(joined(message)), `${what}: the message of ${f.code}: ${message}`)
        for (const e of f.evidence as string[]) {
          const line = /line (\d+)/.exec(e)?.[1]
          if (line) assert.ok(text.includes(`line ${line}`), `${what}: evidence line ${line} of ${f.code}`)
        }
      }
      for (const n of json.nodes) assert.ok(text.includes(n.name), `${what}: node ${n.name}`)
      for (const p of json.paths.filter((x: {ok: boolean | null}) => x.ok === false))
        assert.ok(text.includes(`✗ ${p.breaksAt}`), `${what}: ${p.node} ${p.entry} ✗ ${p.breaksAt}`)
      if (args.length > 0)
        for (const p of json.paths.filter((x: {ok: boolean | null; trace?: unknown}) => x.ok === false && x.trace)) {
          assert.ok(text.includes(p.entry), `${what}: the walk of ${p.node} ${p.entry}`)
        }
    }
    const scan = await runCli(['scan', '-A', ...snapshot], COLS)
    assertFits(scan.stdout, 80, `${example} scan`)
    for (const f of json.findings) assert.ok(scan.stdout.includes(f.code), `${example} scan: ${f.code}`)
    const trace = await runCli(traceArgs(example), COLS)
    assert.equal(trace.code, 0, trace.stderr)
    assertFits(trace.stdout, 80, `${example} trace`)
    const traced = (await runCli([...traceArgs(example), '-o', 'json'])).json
    for (const o of traced.outcomes)
      for (const s of o.steps)
        assert.match(
          trace.stdout,
          new RegExp(`(:| line )${s.line}\\b`),
          `${example} trace: step ${s.chain} line ${s.line}`,
        )
  })
}

test('--explain on the broken example: under 70 lines at 80 columns, numbered, the breaking step marked with why', async () => {
  const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', 'examples/broken-cluster', '--explain'], COLS)
  const lines = r.stdout.trimEnd().split('\n')
  // Each finding's check and its fix (changes …) lines: 70.
  assert.ok(lines.length < 70, `${lines.length} lines`)
  assert.match(r.stdout, /^ {2}1 +nat\/PREROUTING:46 → KUBE-SERVICES:66 /m)
  assert.match(r.stdout, /^ {2}2a +33\.3% :71 → /m)
  assert.match(
    r.stdout,
    /^✗ 2c +33\.3% :73 → KUBE-SEP-DYSIX5QMVXZZP7LU:59 → DNAT 10\.244\.2\.7:8080 ✗ not a\n +ready endpoint$/m,
  )
  assert.doesNotMatch(r.stdout, /[└├]─ /, 'no tree left')
})

test('a table that does not fit becomes one line per node, nothing lost', async () => {
  const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', 'examples/broken-cluster'], {COLUMNS: '40'})
  // A word longer than the line (a path, a chain name) is left whole.
  assertFits(
    r.stdout
      .split('\n')
      .filter((l) => !/^\s+\S+( \\)?$/.test(l))
      .join('\n'),
    40,
    'COLUMNS=40',
  )
  const text = joined(r.stdout)
  assert.ok(
    text.includes(
      'node-a (iptables): ✓ pod→ClusterIP, ✓ node→ClusterIP, ✓ outside→NodePort, ✗ pod→itself at bridge/hairpin',
    ),
  )
  assert.ok(
    text.includes(
      'node-b (iptables): ✗ pod→ClusterIP at DNAT, ✗ node→ClusterIP at DNAT, ✗ outside→NodePort at DNAT, ✗ pod→itself at DNAT',
    ),
  )
})

test('without a terminal or COLUMNS the output is not wrapped; a terminal wins over COLUMNS', async () => {
  assert.equal(outputWidth({isTTY: false}, {}), Number.POSITIVE_INFINITY)
  assert.equal(outputWidth({isTTY: false}, {COLUMNS: '100'}), 100)
  assert.equal(outputWidth({isTTY: false}, {COLUMNS: 'x'}), Number.POSITIVE_INFINITY)
  assert.equal(outputWidth({isTTY: true, columns: 120}, {COLUMNS: '80'}), 120)
  const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', 'examples/broken-cluster'])
  assert.match(
    r.stdout,
    /^✗ shop\/web: pod→ClusterIP \(http\) breaks at DNAT on node-b: .*, which is not a ready endpoint$/m,
  )
})

test('prose wraps with a hanging indent; ANSI colours and ✓ ✗ → are measured as what they show', () => {
  const c = new Chalk({level: 1})
  const lines = wrapProse(c.red('✗ KPD-X') + ' → ' + 'word '.repeat(30), 40, '', '    ')
  for (const l of lines) assert.ok(stringWidth(l) <= 40, l)
  assert.ok(lines.slice(1).every((l) => l.startsWith('    ')))
})

/** What bash runs for a command text: its words, one a line (the command replaced by printf). */
function argvOf(text: string): string {
  const r = spawnSync('bash', ['-c', `printf '%s\\n' ${text}`], {encoding: 'utf8'})
  return `${r.stdout}\nexit ${r.status}\n${r.stderr}`
}

test('a wrapped command pastes into bash as the same command', () => {
  const c = new Chalk({level: 0})
  const commands = [
    "ssh -- node-b sudo iptables-save | grep -- 'KUBE-SEP-DYSIX5QMVXZZP7LU'",
    'ssh -- node-b sudo conntrack -D -f ipv4 -p udp --orig-dst 10.96.0.10 --orig-port-dst 53 --reply-src 10.244.1.7',
    `ssh 'node with space' 'ip neigh; bridge fdb show | grep -v permanent'   # map pod IP → MAC → port, a long comment that wraps`,
    `kubectl -n "my ns" describe pod "a b c d e f g h" --context='x y z' \\$HOME a\\ b`,
  ]
  for (const cmd of commands) {
    for (const width of [40, 60, 80]) {
      const lines = fixLines({check: {command: cmd, argv: []}, fix: null, text: null}, '    ', c, width)
      // Only a line holding one word (a quoted one may hold spaces) longer than the width may pass it.
      const oneWord = (l: string) => /^(?:[^\s'"]+|'[^']*'|"[^"]*")(?: \\)?$/.test(l.trim())
      for (const l of lines) assert.ok(stringWidth(l) <= width || oneWord(l), `${width}: ${l}`)
      const pasted = lines.join('\n').replace(/^ {4}check: /, '')
      assert.equal(argvOf(pasted), argvOf(cmd), `${width} columns:\n${lines.join('\n')}`)
      if (lines.length > 1 && !cmd.includes('#')) assert.ok(lines.slice(0, -1).every((l) => l.endsWith(' \\')))
    }
  }
  assert.deepEqual(wrapCommand('a b', Number.POSITIVE_INFINITY, '', ''), ['a b'])
})

test('findings that differ only by the node are shown once with the nodes listed', async () => {
  const {renderHuman} = await import('../../src/report/human.js')
  const r = (await runCli(['svc', 'web', '-n', 'shop', '--snapshot', 'examples/broken-cluster', '-o', 'json'])).json
  const f = r.findings.find((x: {code: string}) => x.code === 'KPD-SEP-MISSING')
  const twice = {
    ...r,
    findings: [
      f,
      {
        ...f,
        node: 'node-a',
        message: f.message.split('node-b').join('node-a'),
        check: JSON.parse(JSON.stringify(f.check).split('node-b').join('node-a')),
        fix: JSON.parse(JSON.stringify(f.fix).split('node-b').join('node-a')),
      },
    ],
  }
  const text = renderHuman(twice, new Chalk({level: 0}), 80)
  assert.equal(text.split('KPD-SEP-MISSING').length, 2, text)
  assert.match(text, /✗ KPD-SEP-MISSING \[node-b, node-a\] endpoint 10\.244\.2\.11:8080 \(pod web-b2 on\s+each node\)/)
})

test("the report's signs and colours are measured without string-width as string-width measures them", () => {
  const signs = ONE_COLUMN_EACH.source.match(/\\u[0-9a-f]{4}(-\\u[0-9a-f]{4})?/g) ?? []
  assert.ok(signs.length > 5, ONE_COLUMN_EACH.source)
  for (const range of signs) {
    const [from, to = from] = range.split('-').map((u) => parseInt(u.slice(2), 16))
    for (let c = from; c <= to; c++) assert.equal(stringWidth(String.fromCharCode(c)), 1, `U+${c.toString(16)}`)
  }
  const chalk = new Chalk({level: 3})
  const next = lcg(7)
  const pieces = [
    'web',
    ' ',
    '✓',
    '✗',
    '→',
    '─',
    '│',
    '…',
    '×',
    '界',
    '👍',
    'é',
    '\t',
    chalk.red('x'),
    chalk.bold.green('✓ ok'),
  ]
  for (let i = 0; i < 500; i++) {
    let s = ''
    for (let n = next(6); n > 0; n--) s += pieces[next(pieces.length)]
    assert.equal(displayWidth(s), stringWidth(s), JSON.stringify(s))
  }
})
