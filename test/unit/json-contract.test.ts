import assert from 'node:assert/strict'
import {readFileSync} from 'node:fs'
import {test} from 'node:test'
import {parse} from 'yaml'
import {runCli} from '../helpers/run-cli.js'
import {schemaErrors} from '../helpers/report-schema.js'

const version = JSON.parse(readFileSync('package.json', 'utf8')).version
const broken = ['svc', 'web', '-n', 'shop', '--snapshot', 'examples/broken-cluster']

test('the JSON report says which contract, tool version, time and context it comes from, and keeps every earlier field', async () => {
  const before = Date.now()
  const r = await runCli([...broken, '-o', 'json'])
  assert.equal(r.code, 1)
  assert.deepEqual(Object.keys(r.json).slice(0, 5), ['apiVersion', 'kind', 'toolVersion', 'time', 'context'])
  assert.equal(r.json.apiVersion, 'kproxy-doctor/v3')
  assert.equal(r.json.kind, 'ServiceReport')
  assert.equal(r.json.toolVersion, version)
  const time = Date.parse(r.json.time)
  assert.ok(time >= before - 1000 && time <= Date.now() + 1000, r.json.time)
  assert.equal(r.json.context, null, 'a snapshot has no kubeconfig context')
  for (const field of [
    'service',
    'ok',
    'summary',
    'next',
    'proxy',
    'endpoints',
    'findings',
    'nodes',
    'paths',
    'dns',
    'notes',
  ])
    assert.ok(field in r.json, field)
})

test('the schema accepts what the CLI prints and refuses what breaks the contract', async () => {
  const r = await runCli([...broken, '-o', 'json', '--explain'])
  assert.equal(schemaErrors(r.json), null)
  const wrong = structuredClone(r.json)
  wrong.findings[0].severity = 'fatal'
  delete wrong.apiVersion
  wrong.paths[0].trace.outcomes[0].probability = 2
  const errors = schemaErrors(wrong) ?? ''
  assert.match(errors, /must have required property 'apiVersion'/)
  assert.match(errors, /findings\/0\/severity must be equal to one of the allowed values/)
  assert.match(errors, /paths\/0\/trace\/outcomes\/0\/probability must be <= 1/)
})

test('-o yaml is the same document as -o json', async () => {
  const json = await runCli([...broken, '-o', 'json'])
  const yaml = await runCli([...broken, '-o', 'yaml'])
  assert.equal(yaml.code, 1)
  const doc = parse(yaml.stdout)
  assert.equal(schemaErrors(doc), null)
  assert.deepEqual({...doc, time: null}, {...json.json, time: null})
})

test('exit 2 with -o json or -o yaml: the line on stderr and an error document on stdout, for bad flags too', async () => {
  for (const [args, line] of [
    [
      ['svc', 'nope', '-n', 'shop', '--snapshot', 'examples/healthy-cluster', '-o', 'json'],
      /^snapshot examples\/healthy-cluster was recorded for shop\/web, not shop\/nope$/,
    ],
    [['svc', 'web', '--snapshot', '/nonexistent', '--output=json'], /\/nonexistent/],
    [['svc', 'web', '-o', 'json', '--bogus'], /^--bogus: no such flag \(kproxy-doctor svc --help lists them\)$/],
    [
      ['svc', 'web', '-ojson', '--snapshot', 'examples/healthy-cluster', '--context', 'x'],
      /^--context=x cannot also be provided when using --snapshot$/,
    ],
  ] as const) {
    const r = await runCli([...args])
    assert.equal(r.code, 2, args.join(' '))
    assert.equal(r.stderr.split('\n').length, 2, r.stderr)
    assert.ok(r.json, `JSON on stdout for ${args.join(' ')}`)
    assert.equal(schemaErrors(r.json), null)
    assert.equal(r.json.kind, 'Error')
    assert.equal(`kproxy-doctor: ${r.json.error}\n`, r.stderr)
    assert.match(r.json.error, line)
  }
  const yaml = await runCli(['svc', 'nope', '-n', 'shop', '--snapshot', 'examples/healthy-cluster', '-o', 'yaml'])
  assert.equal(yaml.code, 2)
  assert.equal(parse(yaml.stdout).kind, 'Error')
  const table = await runCli(['svc', 'nope', '-n', 'shop', '--snapshot', 'examples/healthy-cluster'])
  assert.equal(table.stdout, '', 'no document without -o json|yaml')
})

test('-q prints only the headline; the exit code is unchanged', async () => {
  const json = await runCli([...broken, '-o', 'json'])
  const quiet = await runCli([...broken, '-q'])
  assert.equal(quiet.code, 1)
  assert.equal(quiet.stdout, `${json.json.summary}\n`)
  const healthy = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', 'examples/healthy-cluster', '--quiet'])
  assert.equal(healthy.code, 0)
  assert.equal(healthy.stdout.split('\n').length, 2)
})

test('FORCE_COLOR turns colours on in a pipe, NO_COLOR and FORCE_COLOR=0 keep them off', async () => {
  const escape = '\x1b['
  assert.ok((await runCli([...broken, '-q'], {NO_COLOR: '', FORCE_COLOR: '1'})).stdout.includes(escape))
  assert.ok(!(await runCli([...broken, '-q'], {NO_COLOR: '1'})).stdout.includes(escape))
  assert.ok(!(await runCli([...broken, '-q'], {NO_COLOR: '', FORCE_COLOR: '0'})).stdout.includes(escape))
  assert.ok(!(await runCli([...broken, '-q'], {NO_COLOR: ''})).stdout.includes(escape), 'a pipe is not a terminal')
})
