import assert from 'node:assert/strict'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join, resolve} from 'node:path'
import {after, test} from 'node:test'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import type {IgnoreRule} from '../../src/diagnosis/ignore-rules.js'
import {offlineCluster} from '../helpers/offline-cluster.js'
import {runCli} from '../helpers/run-cli.js'

const EXAMPLE = resolve('examples/broken-cluster')
const dir = mkdtempSync(join(tmpdir(), 'kpd-ignore-'))
after(() => rmSync(dir, {recursive: true, force: true}))

/** The hairpin fault of web-b1 (on node-b), diagnosed with the given rules: what stays, what is silenced. */
function withRules(rules: Array<Omit<IgnoreRule, 'source'>>) {
  const {cluster, observations} = offlineCluster({hairpinOff: ['web-b1']})
  const d = diagnose(cluster, observations, {ignore: rules.map((r, i) => ({...r, source: `rule ${i + 1}`}))})
  return {
    findings: d.findings.map((f) => `${f.code} ${f.node}`),
    ignored: d.ignored.map((f) => `${f.code} ${f.node} by ${f.ignoredBy.source}`),
    ok: d.ok,
  }
}

test('scoped ignore rules silence only the findings in their scope', () => {
  const fault = 'KPD-HAIRPIN-OFF node-b'
  const table: Array<{name: string; rules: Array<Omit<IgnoreRule, 'source'>>; silenced: boolean}> = [
    {name: 'the code everywhere', rules: [{code: 'KPD-HAIRPIN-OFF'}], silenced: true},
    {name: 'the right node', rules: [{code: 'KPD-HAIRPIN-OFF', node: 'node-b'}], silenced: true},
    {name: 'another node', rules: [{code: 'KPD-HAIRPIN-OFF', node: 'node-a'}], silenced: false},
    {
      name: 'the right namespace and Service',
      rules: [{code: 'KPD-HAIRPIN-OFF', namespace: 'shop', service: 'web'}],
      silenced: true,
    },
    {name: 'another Service', rules: [{code: 'KPD-HAIRPIN-OFF', namespace: 'shop', service: 'api'}], silenced: false},
    {name: 'another namespace', rules: [{code: 'KPD-HAIRPIN-OFF', namespace: 'default'}], silenced: false},
    {name: 'another code', rules: [{code: 'KPD-SEP-STALE'}], silenced: false},
  ]
  for (const row of table) {
    const r = withRules(row.rules)
    if (row.silenced) assert.deepEqual(r, {findings: [], ignored: [`${fault} by rule 1`], ok: true}, row.name)
    else
      assert.deepEqual(
        r.findings.includes(fault) && !r.ok && r.ignored.length === 0,
        true,
        `${row.name}: ${JSON.stringify(r)}`,
      )
  }
})

test('a config file scopes ignores: JSON lists each silenced finding with its rule and reason; exit code follows what is left', async () => {
  const config = join(dir, 'scoped.yaml')
  writeFileSync(
    config,
    'ignore:\n  - code: KPD-HAIRPIN-OFF\n    namespace: shop\n    service: web\n    node: node-a\n    reason: the CNI sets hairpin itself (OPS-1)\n  - code: KPD-SEP-STALE\n    node: node-a\n',
  )
  const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', EXAMPLE, '--config', config, '-o', 'json'])
  assert.equal(r.code, 1, r.stderr)
  assert.deepEqual(
    r.json.findings.map((f: {code: string; node: string}) => `${f.code} ${f.node}`),
    ['KPD-SEP-MISSING node-b', 'KPD-SEP-STALE node-b', 'KPD-NODE-DIVERGES node-b'],
  )
  assert.deepEqual(r.json.ignored, [
    {
      code: 'KPD-HAIRPIN-OFF',
      node: 'node-a',
      source: `config ${config}, ignore entry 1`,
      reason: 'the CNI sets hairpin itself (OPS-1)',
    },
  ])
})

test('.kproxy-doctor.yaml in the working directory is read without --config; silencing every error gives exit 0 and a ✓ headline', async () => {
  const cwd = mkdtempSync(join(dir, 'cwd-'))
  writeFileSync(
    join(cwd, '.kproxy-doctor.yaml'),
    'ignore:\n  - {code: KPD-HAIRPIN-OFF}\n  - {code: KPD-SEP-MISSING, node: node-b}\n  - {code: KPD-SEP-STALE, service: web}\n',
  )
  const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', EXAMPLE], {}, 60_000, undefined, cwd)
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.match(r.stdout.split('\n')[0], /^✓ shop\/web: .*, 1 warning\(s\), 3 ignored$/)
  assert.ok(
    r.stdout
      .split('\n')
      .includes(
        'Findings: 0 error(s), 1 warning(s), 0 info, 3 ignored (KPD-SEP-MISSING [node-b], KPD-SEP-STALE [node-b], KPD-HAIRPIN-OFF [node-a])',
      ),
    r.stdout,
  )
})

test('a bad config file is one line naming the file and entry, exit 2', async () => {
  const cases: Array<[string, RegExp]> = [
    [
      'ignore:\n  - code: KPD-NO-SUCH\n',
      /^kproxy-doctor: config .*bad\.yaml, ignore entry 1: unknown finding code\(s\) KPD-NO-SUCH/,
    ],
    [
      'ignore:\n  - {code: KPD-HAIRPIN-OFF, pod: web-a1}\n',
      /^kproxy-doctor: config .*bad\.yaml, ignore entry 1: unknown key\(s\) pod /,
    ],
    ['ignore:\n  - {node: node-a}\n', /^kproxy-doctor: config .*bad\.yaml, ignore entry 1: "code" is required/],
    ['ignore: KPD-HAIRPIN-OFF\n', /^kproxy-doctor: config .*bad\.yaml: "ignore" must be a list/],
    ['ignores: []\n', /^kproxy-doctor: config .*bad\.yaml: unknown key\(s\) ignores/],
    ['ignore: [\n', /^kproxy-doctor: config .*bad\.yaml: /],
  ]
  const bad = join(dir, 'bad.yaml')
  for (const [text, line] of cases) {
    writeFileSync(bad, text)
    const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', EXAMPLE, '--config', bad])
    assert.equal(r.code, 2, text)
    assert.equal(r.stdout, '', text)
    assert.match(r.stderr, line, text)
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr)
  }
  const missing = await runCli([
    'svc',
    'web',
    '-n',
    'shop',
    '--snapshot',
    EXAMPLE,
    '--config',
    join(dir, 'absent.yaml'),
  ])
  assert.equal(missing.code, 2)
  assert.match(missing.stderr, /^kproxy-doctor: config .*absent\.yaml: ENOENT/)
})
