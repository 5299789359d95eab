/**
 * The path graph both pictures are drawn from: what each lane shows for a path that works, one that breaks on its own
 * node, one that breaks on an endpoint's node, one whose break an ignore rule silenced and a half not followed. The
 * report is the broken example's, with its paths set to each state as a diagnosis would write them.
 */
import assert from 'node:assert/strict'
import {test} from 'node:test'
import {pathGraphs} from '../../src/report/path-graph.js'
import type {Report} from '../../src/report/report.js'
import {runCli} from '../helpers/run-cli.js'

async function example(name: string): Promise<Report> {
  return (await runCli(['svc', 'web', '-n', 'shop', '--snapshot', `examples/${name}`, '-o', 'json'])).json as Report
}

/** A lane as `label[state]` words, left to right, the endpoints as `node[state]→pod`. */
function lane(r: Report, node: string, index: number): string[] {
  const g = pathGraphs(r).find((x) => x.node === node)!
  return g.nodes.filter((n) => n.lane === index).map((n) => `${n.kind === 'pod' ? '→' : ''}${n.label}[${n.state}]`)
}

test('a working path: entry, the steps of its entry point with the mode’s names, the split, each endpoint and Pod', async () => {
  const r = await example('healthy-cluster')
  const g = pathGraphs(r)
  assert.deepEqual(
    g.map((x) => x.node),
    r.nodes.map((n) => n.name),
  )
  const i = r.paths.filter((p) => p.node === 'node-a').findIndex((p) => p.entry === 'outside→NodePort')
  const remote = r.paths.filter((p) => p.node === 'node-a')[i].remote
  assert.deepEqual(lane(r, 'node-a', i), [
    'outside→NodePort[ok]',
    ...['entry', 'service-match', 'nodeport-match', 'external-policy', 'service', 'endpoint', 'DNAT', 'filter'].map(
      (s) => `${s}[ok]`,
    ),
    'masquerade[ok]',
    'endpoint split[ok]',
    'node-a[ok]',
    ...remote.flatMap((h) => [`${h.node}[ok]`, `→${h.pod}[ok]`]),
  ])
  const step = g[0].nodes.find((n) => n.label === 'service-match')!
  assert.equal(step.sublabel, 'nat KUBE-SERVICES')
  const split = g[0].nodes.find((n) => n.kind === 'split' && n.lane === i)!
  assert.deepEqual(
    g[0].edges.filter((e) => e.from === split.id).map((e) => e.label),
    [
      `${Math.round((1 - remote.reduce((s, h) => s + h.share, 0)) * 1000) / 10}%`,
      ...remote.map((h) => `${Math.round(h.share * 1000) / 10}%`),
    ],
  )
})

test('a break on the endpoint’s node: this node’s steps pass, that endpoint’s half is red with its reason and code; an ignored break and a half not followed', async () => {
  const r = await example('healthy-cluster')
  const paths = r.paths.filter((p) => p.node === 'node-a')
  const p = paths[0]
  const h = p.remote[0]
  Object.assign(p, {ok: false, breaksAt: 'filter', breaksOn: h.node, detail: `on ${h.node}: dropped`})
  Object.assign(h, {ok: false, breaksAt: 'filter', detail: 'filter FORWARD line 3: -j DROP'})
  r.findings.push({
    code: 'KPD-FILTER-DROP',
    severity: 'error',
    title: 'dropped',
    node: h.node,
    message: 'dropped by filter FORWARD',
    check: null,
    fix: null,
    text: null,
    evidence: [],
  })
  assert.ok(p.remote.length >= 2, 'two halves on node-b')
  Object.assign(p.remote[1], {followed: false, ok: null, detail: 'not followed: its rules were not read'})
  Object.assign(paths[1], {
    ok: false,
    breaksAt: 'DNAT',
    breaksOn: 'node-a',
    ignoredBy: 'config: known',
    detail: 'stale',
  })
  const g = pathGraphs(r).find((x) => x.node === 'node-a')!
  const half = g.nodes.find((n) => n.lane === 0 && n.kind === 'endpoint-node' && n.sublabel?.startsWith(h.endpoint))!
  assert.equal(half.state, 'broken')
  assert.equal(half.reason, 'filter FORWARD line 3: -j DROP')
  assert.equal(half.finding?.code, 'KPD-FILTER-DROP')
  assert.ok(g.nodes.filter((n) => n.lane === 0 && n.kind === 'step').every((n) => n.state === 'ok'))
  if (p.remote[1]) assert.equal(g.nodes.filter((n) => n.lane === 0 && n.kind === 'endpoint-node')[1].state, 'unknown')
  // The lane stops at its break, then goes on to the endpoints some connections still reach.
  const ignored = lane(r, 'node-a', 1)
  assert.deepEqual(ignored.slice(ignored.indexOf('DNAT[ignored]') - 1, ignored.indexOf('DNAT[ignored]') + 2), [
    'endpoint[ok]',
    'DNAT[ignored]',
    'endpoint split[ok]',
  ])
  assert.equal(g.nodes.find((n) => n.lane === 1 && n.label === 'DNAT')!.reason, 'ignored (config: known): stale')
  assert.equal(g.lanes[1].state, 'ignored')
})
