/**
 * Wrong-typed API objects (issue #32): each object is checked where it is read, for the fields the doctor reads; a bad
 * object in a list is left out with one warning naming kind, namespace/name and the field, the Service asked for is
 * one clear error, and one bad Service never ends a scan.
 */
import assert from 'node:assert/strict'
import {cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {test} from 'node:test'
import type {ClusterSource} from '../../src/cluster/cluster-source.js'
import {readClusterState} from '../../src/cluster/read-cluster.js'
import {ValidatedClusterSource} from '../../src/cluster/validated-source.js'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {gatherSnapshot} from '../../src/diagnosis/gather.js'
import {scanSnapshot} from '../../src/diagnosis/scan.js'
import {DiagnosisError} from '../../src/errors.js'
import {runCli} from '../helpers/run-cli.js'

const EXAMPLE = 'examples/healthy-cluster'
type Json = Record<string, unknown>
const FILES = ['services', 'endpointslices', 'pods', 'nodes', 'configmaps'] as const
type File = (typeof FILES)[number]

function exampleItems(): Record<File, Json[]> {
  return Object.fromEntries(
    FILES.map((f) => [f, (JSON.parse(readFileSync(join(EXAMPLE, `${f}.json`), 'utf8')) as {items: Json[]}).items]),
  ) as Record<File, Json[]>
}

/** A copy of the example bundle with one object changed by `change`. */
function withChanged(file: File, index: number, change: (o: Json) => void): string {
  const dir = mkdtempSync(join(tmpdir(), 'kpd-shapes-'))
  cpSync(EXAMPLE, dir, {recursive: true})
  const path = join(dir, `${file}.json`)
  const list = JSON.parse(readFileSync(path, 'utf8')) as {items: Json[]}
  change(list.items[index])
  writeFileSync(path, JSON.stringify(list))
  return dir
}

const at = (o: Json, ...path: (string | number)[]): Json =>
  path.reduce<Json>((v, k) => (v as Record<string | number, Json>)[k], o)

test('svc on a bundle with a wrong-typed Pod, Node or EndpointSlice: that object is left out with one warning naming it and the field', async () => {
  const cases: Array<[File, (o: Json) => void, string]> = [
    [
      'pods',
      (o) => (at(o, 'status').podIPs = {ip: '10.244.1.10'}),
      'Pod shop/web-a1 skipped: status.podIPs should be a list, is an object',
    ],
    [
      'pods',
      (o) => (at(o, 'spec').containers = 'web'),
      'Pod shop/web-a1 skipped: spec.containers should be a list, is a string',
    ],
    [
      'nodes',
      (o) => (at(o, 'status').addresses = [null]),
      'Node node-a skipped: status.addresses[0] should be an object, is null',
    ],
    [
      'nodes',
      (o) => (at(o, 'metadata').labels = {zone: 3}),
      'Node node-a skipped: metadata.labels.zone should be a string, is a number',
    ],
    [
      'endpointslices',
      (o) => (o.ports = {http: 8080}),
      'EndpointSlice shop/web-abc12 skipped: ports should be a list, is an object',
    ],
    [
      'endpointslices',
      (o) => (at(o, 'endpoints', 0).addresses = '10.244.1.10'),
      'EndpointSlice shop/web-abc12 skipped: endpoints[0].addresses should be a list, is a string',
    ],
  ]
  for (const [file, change, warning] of cases) {
    const dir = withChanged(file, 0, change)
    try {
      const g = await gatherSnapshot(dir, 'shop', 'web')
      assert.deepEqual(g.warnings, [warning])
      assert.ok(Array.isArray(diagnose(g.cluster, g.observations).findings))
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  }
})

test('svc on a wrong-typed Service: one line naming the Service and the field, exit 2 (before: "….some is not a function")', async () => {
  const dir = withChanged('services', 0, (o) => (at(o, 'spec').ports = 'http'))
  try {
    const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', dir])
    assert.equal(r.code, 2)
    assert.equal(r.stdout, '')
    assert.equal(r.stderr, 'kproxy-doctor: Service shop/web cannot be read: spec.ports should be a list, is a string\n')
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})

test('scan with one wrong-typed Service: that Service is reported unreadable, the others are judged', async () => {
  const dir = withChanged('services', 1, (o) => (at(o, 'spec').clusterIPs = '10.96.0.10'))
  try {
    writeFileSync(
      join(dir, 'manifest.json'),
      JSON.stringify({
        ...JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')),
        services: ['shop/web', 'kube-system/kube-dns'],
      }),
    )
    const r = await scanSnapshot(dir, {namespace: undefined}, {summarise: (d) => d.findings.map((f) => f.code)})
    assert.deepEqual(
      r.outcomes.map((o) => [`${o.namespace}/${o.name}`, o.skipped ?? 'judged']),
      [
        [
          'kube-system/kube-dns',
          'not diagnosed: the Service cannot be read: spec.clusterIPs should be a list, is a string',
        ],
        ['shop/web', 'judged'],
      ],
    )
    assert.deepEqual(r.warnings, [
      'Service kube-system/kube-dns skipped: spec.clusterIPs should be a list, is a string',
    ])
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})

test('a list item that is no object (null, a number) is left out with a warning, never "Cannot read properties of null"', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpd-shapes-'))
  try {
    cpSync(EXAMPLE, dir, {recursive: true})
    const path = join(dir, 'nodes.json')
    const list = JSON.parse(readFileSync(path, 'utf8')) as {items: unknown[]}
    list.items.push(null, 7)
    writeFileSync(path, JSON.stringify(list))
    const g = await gatherSnapshot(dir, 'shop', 'web')
    assert.deepEqual(g.warnings, [
      'Node without a name skipped: the object should be an object, is null',
      'Node without a name skipped: the object should be an object, is a number',
    ])
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})

/** Every value of `o` (objects and lists included) with its path. */
function* paths(o: unknown, path: (string | number)[] = []): Generator<(string | number)[]> {
  if (path.length > 0) yield path
  if (Array.isArray(o)) for (const [i, v] of o.entries()) yield* paths(v, [...path, i])
  else if (typeof o === 'object' && o !== null) for (const [k, v] of Object.entries(o)) yield* paths(v, [...path, k])
}

function replaced(o: Json, path: (string | number)[], value: unknown): Json {
  const copy = structuredClone(o)
  const parent = path.slice(0, -1).reduce<unknown>((v, k) => (v as Record<string | number, unknown>)[k], copy)
  ;(parent as Record<string | number, unknown>)[path[path.length - 1]] = value
  return copy
}

function memorySource(items: Record<File, Json[]>): ClusterSource {
  const ns = (o: Json) => (o as {metadata?: {namespace?: string}} | null)?.metadata?.namespace
  const named = (o: Json, namespace: string, name: string) =>
    ns(o) === namespace && (o as {metadata?: {name?: string}} | null)?.metadata?.name === name
  const cast = <T>(list: Json[]) => list as unknown as T[]
  return {
    describe: () => 'memory',
    getService: async (namespace, name) => cast<never>(items.services).find((s) => named(s, namespace, name)),
    listServices: async (namespace) =>
      cast(items.services.filter((s) => namespace === undefined || ns(s) === namespace)),
    listEndpointSlices: async (namespace) => cast(items.endpointslices.filter((s) => ns(s) === namespace)),
    listNamespaceEndpointSlices: async (namespace) => cast(items.endpointslices.filter((s) => ns(s) === namespace)),
    getEndpoints: async () => undefined,
    listNetworkPolicies: async () => undefined,
    listNamespaces: async () => undefined,
    listCustomObjects: async () => 'not-recorded',
    listPods: async (namespace) => cast(items.pods.filter((p) => ns(p) === namespace)),
    listNodes: async () => cast(items.nodes),
    getConfigMap: async (namespace, name) => cast<never>(items.configmaps).find((c) => named(c, namespace, name)),
  }
}

test('every field of every object, given a value of each wrong type: a diagnosis or one clean line, never an internal error', async () => {
  const base = exampleItems()
  const snapshot = await gatherSnapshot(EXAMPLE, 'shop', 'web')
  // A string where a list, object or number belongs; a number where a string does; a list holding null.
  const wrong: unknown[] = ['x', 7, [null]]
  let tried = 0
  for (const file of FILES)
    for (const [index, object] of base[file].entries())
      for (const path of paths(object))
        for (const value of wrong) {
          const items = {...base, [file]: base[file].map((o, i) => (i === index ? replaced(o, path, value) : o))}
          const where = `${file}[${index}].${path.join('.')} = ${JSON.stringify(value)}`
          tried++
          try {
            const state = await readClusterState(new ValidatedClusterSource(memorySource(items)), 'shop', 'web')
            assert.ok(Array.isArray(diagnose(state, snapshot.observations).findings), where)
          } catch (e) {
            assert.ok(e instanceof DiagnosisError, `${where}: ${(e as Error).stack}`)
            assert.doesNotMatch(e.message, /\n/, where)
          }
        }
  assert.ok(tried > 1000, `${tried} objects tried`)
})

test('a wrong-typed NetworkPolicy or Namespace is left out with one warning naming it and the field; well-typed ones pass', async () => {
  const good = {
    metadata: {namespace: 'shop', name: 'allow-web'},
    spec: {podSelector: {matchLabels: {app: 'web'}}, ingress: [{_from: [{podSelector: {}}], ports: [{port: 8080}]}]},
  }
  const bad = {metadata: {namespace: 'shop', name: 'broken'}, spec: {podSelector: {}, ingress: 'all'}}
  const source = new ValidatedClusterSource({
    describe: () => 'memory',
    listNetworkPolicies: async () => [good, bad],
    listNamespaces: async () => [{metadata: {name: 'shop', labels: {team: 7}}}, {metadata: {name: 'web'}}],
  } as unknown as ClusterSource)
  assert.deepEqual(
    ((await source.listNetworkPolicies('shop')) ?? []).map((p) => p.metadata?.name),
    ['allow-web'],
  )
  assert.deepEqual(
    ((await source.listNamespaces()) ?? []).map((n) => n.metadata?.name),
    ['web'],
  )
  assert.deepEqual(source.warnings(), [
    'NetworkPolicy shop/broken skipped: spec.ingress should be a list, is a string',
    'Namespace shop skipped: metadata.labels.team should be a string, is a number',
  ])
})
