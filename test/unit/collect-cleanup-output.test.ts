/**
 * `collect svc` and `cleanup` speak the one output contract too: -o json|yaml print a CollectReport / CleanupReport
 * document (apiVersion, kind, toolVersion, valid against the schema), an Error document when they cannot run, and
 * their table form is what a person reads (node names made printable).
 */
import assert from 'node:assert/strict'
import {test} from 'node:test'
import {cleanupDocument, collectDocument} from '../../src/report/document.js'
import {writeCleanup, writeCollect} from '../../src/report/output.js'
import {runCli} from '../helpers/run-cli.js'
import {parseYaml, schemaErrors} from '../helpers/report-schema.js'

const meta = {toolVersion: '0.1.0', time: '2026-01-01T12:00:00.000Z'}
const argv = ['kproxy-doctor', 'svc', 'web', '-n', 'shop', '--snapshot', './web-bundle']
const collected = collectDocument(
  {
    context: 'prod',
    bundle: './web-bundle',
    service: {namespace: 'shop', name: 'web'},
    nodes: [
      {name: 'node-a', read: true, error: null},
      {name: 'node-b\u001b[2J', read: false, error: 'ssh: connect refused'},
    ],
    next: {command: 'kproxy-doctor svc web -n shop --snapshot ./web-bundle', argv: [argv]},
  },
  meta,
)
const cleaned = cleanupDocument({node: 'node-b', removed: ['kpd_trace_a1b2c3_1795000000'], failed: []}, meta)

const written = (f: (write: (chunk: string | Uint8Array) => void) => void): string => {
  let out = ''
  f((chunk) => (out += chunk.toString()))
  return out
}

test('collect svc: the table says what was written and read, with the command that diagnoses it; -q that line alone', () => {
  assert.equal(
    written((w) => writeCollect(collected, {format: 'table'}, w)),
    'wrote ./web-bundle: 1 node(s) read, 1 not (node-b\\x1b[2J)\n' +
      'diagnose it with: kproxy-doctor svc web -n shop --snapshot ./web-bundle\n',
  )
  assert.equal(
    written((w) => writeCollect(collected, {format: 'table', quiet: true}, w)),
    'wrote ./web-bundle: 1 node(s) read, 1 not (node-b\\x1b[2J)\n',
  )
})

test('collect svc and cleanup -o json|yaml: one valid document of their kind, the same in both formats', () => {
  for (const [document, write, command] of [
    [
      collected,
      (w: (c: string | Uint8Array) => void, format: 'json' | 'yaml') => writeCollect(collected, {format}, w),
      'collect',
    ],
    [
      cleaned,
      (w: (c: string | Uint8Array) => void, format: 'json' | 'yaml') => writeCleanup(cleaned, {format}, w),
      'cleanup',
    ],
  ] as const) {
    const json = JSON.parse(written((w) => write(w, 'json')))
    assert.deepEqual(json, document)
    assert.deepEqual(Object.keys(json).slice(0, 4), ['apiVersion', 'kind', 'toolVersion', 'time'])
    assert.equal(schemaErrors(json, command), null)
    assert.deepEqual(parseYaml(written((w) => write(w, 'yaml'))), json)
  }
  assert.match(schemaErrors(cleaned, 'collect') ?? '', /kind CleanupReport, expected CollectReport/)
  assert.match(schemaErrors({...cleaned, removed: 'all'}) ?? '', /must/)
})

test('cleanup: the table names each table deleted, or says there was none', () => {
  assert.equal(
    written((w) => writeCleanup(cleaned, {format: 'table'}, w)),
    'node-b: deleted table inet kpd_trace_a1b2c3_1795000000\n',
  )
  assert.equal(
    written((w) => writeCleanup({...cleaned, removed: []}, {format: 'table'}, w)),
    "node-b: no table of kproxy-doctor's (kpd_trace_*) to delete\n",
  )
})

test('collect svc and cleanup that cannot run: an Error document in JSON and YAML, exit 2; collect -q with -o json is refused', async () => {
  for (const args of [
    [
      'collect',
      'svc',
      'web',
      '-n',
      'shop',
      '--out',
      '/nonexistent/dir/bundle',
      '--kubeconfig',
      '/nonexistent/kubeconfig',
    ],
    ['cleanup', '--node', 'node-b', '--kubeconfig', '/nonexistent/kubeconfig'],
  ])
    for (const format of ['json', 'yaml']) {
      const r = await runCli([...args, '-o', format])
      assert.equal(r.code, 2, r.stderr)
      assert.equal(r.json?.kind, 'Error', r.stdout)
      assert.equal(r.json.apiVersion, 'kproxy-doctor/v3')
    }
  const both = await runCli(['collect', 'svc', 'web', '--out', '/tmp/never-written', '-q', '-o', 'json'])
  assert.equal(both.code, 2)
  assert.match(both.stderr, /--quiet prints only the line naming the bundle: it cannot be combined with -o json/)
})
