/**
 * `collect` writes a bundle safely: a new folder (a non-empty --out needs --force), built beside it and renamed into
 * place, 0700 folders and 0600 files, no symbolic link followed, and only the fields the diagnosis reads.
 */
import assert from 'node:assert/strict'
import {lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {test} from 'node:test'
import type {V1Pod} from '@kubernetes/client-node'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {gatherSnapshot} from '../../src/diagnosis/gather.js'
import {writeBundle} from '../../src/diagnosis/write-bundle.js'
import {loadNodeRecording} from '../../src/node/read/bundle.js'
import {runCli} from '../helpers/run-cli.js'

const SECRET = 'pa55-w0rd-9f3e1c7a'

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n)
    return lstatSync(p).isDirectory() ? [p, ...walk(p)] : [p]
  })
}

/** The broken example bundle as collect would write it, with a Pod that carries a secret in its env and bookkeeping. */
async function recordExample(out: string, force = false): Promise<void> {
  const g = await gatherSnapshot('examples/broken-cluster', 'shop', 'web')
  const pod: V1Pod = {
    ...g.cluster.pods[0],
    metadata: {
      ...g.cluster.pods[0].metadata,
      annotations: {
        'kubectl.kubernetes.io/last-applied-configuration': JSON.stringify({
          env: [{name: 'DB_PASSWORD', value: SECRET}],
        }),
      },
      managedFields: [
        {manager: 'kubectl', operation: 'Update', fieldsType: 'FieldsV1', fieldsV1: {'f:spec': {'f:containers': {}}}},
      ],
    },
    spec: {
      ...g.cluster.pods[0].spec!,
      containers: (g.cluster.pods[0].spec?.containers ?? []).map((c) => ({
        ...c,
        env: [{name: 'DB_PASSWORD', value: SECRET}],
        args: [`--password=${SECRET}`],
      })),
    },
  }
  // What the diagnosis never reads, and an application or an operator may have written a secret into (#32).
  pod.status = {
    ...pod.status,
    containerStatuses: (pod.status?.containerStatuses ?? []).map((c) => ({
      ...c,
      lastState: {terminated: {exitCode: 1, reason: 'Error', message: `panic: password ${SECRET}`}},
    })),
  }
  const annotated = <T extends {metadata?: object}>(o: T): T => ({
    ...o,
    metadata: {...o.metadata, annotations: {'example.com/note': SECRET}},
  })
  const proxyConfigMap = g.cluster.proxyConfigMap && {
    ...g.cluster.proxyConfigMap,
    data: {...g.cluster.proxyConfigMap.data, 'kubeconfig.conf': `token: ${SECRET}`},
  }
  const cluster = {
    ...g.cluster,
    pods: [pod, ...g.cluster.pods.slice(1)],
    nodes: g.cluster.nodes.map(annotated),
    proxyConfigMap,
    service: annotated({
      ...g.cluster.service,
      metadata: {...g.cluster.service.metadata, managedFields: [{manager: 'kubectl'}]},
    }),
  }
  const recordings = new Map(
    g.observations.map((o) => [o.name, loadNodeRecording(join('examples/broken-cluster/nodes', o.name))!]),
  )
  writeBundle(out, cluster, recordings, {namespace: 'shop', name: 'web', observations: g.observations}, {force})
}

test('collect: the bundle holds no env value, no termination message, annotation or unread ConfigMap entry, no managedFields, no last-applied copy; 0700 folders, 0600 files; the diagnosis from it is unchanged', async () => {
  const work = mkdtempSync(join(tmpdir(), 'kpd-bundle-'))
  try {
    const out = join(work, 'bundle')
    await recordExample(out)
    const paths = walk(out)
    assert.ok(
      paths.some((p) => p.endsWith('pods.json')) && paths.some((p) => p.endsWith('iptables-save.txt')),
      paths.join('\n'),
    )
    for (const p of paths) {
      const st = lstatSync(p)
      assert.ok(!st.isSymbolicLink(), p)
      assert.equal(st.mode & 0o777, st.isDirectory() ? 0o700 : 0o600, `${p} mode ${(st.mode & 0o777).toString(8)}`)
      if (st.isFile()) {
        const text = readFileSync(p, 'utf8')
        assert.ok(!text.includes(SECRET), `${p} holds the secret`)
        assert.ok(
          !text.includes('managedFields') && !text.includes('last-applied-configuration'),
          `${p} holds API bookkeeping`,
        )
      }
    }
    assert.equal(lstatSync(out).mode & 0o777, 0o700)
    assert.deepEqual(readdirSync(work), ['bundle'], 'the temporary folder is gone once renamed into place')
    const pods = JSON.parse(readFileSync(join(out, 'pods.json'), 'utf8')).items as V1Pod[]
    assert.deepEqual(Object.keys(pods[0].spec!.containers[0]).sort(), ['name', 'ports'])
    const fromExample = await gatherSnapshot('examples/broken-cluster', 'shop', 'web')
    const fromBundle = await gatherSnapshot(out, 'shop', 'web')
    const summary = (d: ReturnType<typeof diagnose>) => d.findings.map((f) => `${f.code} ${f.node} ${f.message}`).sort()
    assert.deepEqual(
      summary(diagnose(fromBundle.cluster, fromBundle.observations)),
      summary(diagnose(fromExample.cluster, fromExample.observations)),
    )
  } finally {
    rmSync(work, {recursive: true, force: true})
  }
})

test('collect: a non-empty --out is refused unless --force, which swaps it out whole (no stale file survives)', async () => {
  const work = mkdtempSync(join(tmpdir(), 'kpd-bundle-'))
  try {
    const out = join(work, 'bundle')
    mkdirSync(out)
    writeFileSync(join(out, 'stale.txt'), 'from an earlier run')
    const refused = await runCli([
      'collect',
      'svc',
      'web',
      '-n',
      'shop',
      '--out',
      out,
      '--kubeconfig',
      join(work, 'no-such-kubeconfig'),
    ])
    assert.equal(refused.code, 2)
    assert.equal(
      refused.stderr.trim(),
      `kproxy-doctor: --out ${out} is not empty: give a new folder, or --force to replace it`,
    )
    await assert.rejects(recordExample(out), /--out .* is not empty: give a new folder, or --force to replace it/)
    await recordExample(out, true)
    assert.ok(!readdirSync(out).includes('stale.txt'), 'the old folder was replaced, not written into')
    assert.deepEqual(readdirSync(work), ['bundle'])
    const empty = join(work, 'empty')
    mkdirSync(empty)
    await recordExample(empty)
    assert.ok(readdirSync(empty).includes('manifest.json'), 'an empty --out is used')
  } finally {
    rmSync(work, {recursive: true, force: true})
  }
})

test('collect: a symbolic link as --out is refused and not followed, whatever it points at', async () => {
  const work = mkdtempSync(join(tmpdir(), 'kpd-bundle-'))
  try {
    const elsewhere = join(work, 'elsewhere')
    mkdirSync(elsewhere)
    const link = join(work, 'bundle')
    symlinkSync(elsewhere, link)
    const r = await runCli([
      'collect',
      'svc',
      'web',
      '-n',
      'shop',
      '--out',
      link,
      '--force',
      '--kubeconfig',
      join(work, 'no-such-kubeconfig'),
    ])
    assert.equal(r.code, 2)
    assert.equal(
      r.stderr.trim(),
      `kproxy-doctor: --out ${link} is a symbolic link: a bundle is written only to a real folder (links are not followed)`,
    )
    await assert.rejects(recordExample(link, true), /is a symbolic link/)
    assert.deepEqual(readdirSync(elsewhere), [], 'nothing written through the link')
    const file = join(work, 'file')
    writeFileSync(file, 'x')
    await assert.rejects(recordExample(file, true), /--out .* exists and is not a folder/)
  } finally {
    rmSync(work, {recursive: true, force: true})
  }
})

test('collect: a Node whose name is no Kubernetes name (a hostile API server) gets no folder; the others are written and replay', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpd-bundle-hostile-'))
  try {
    const g = await gatherSnapshot('examples/broken-cluster', 'shop', 'web')
    const hostile = '-oProxyCommand=touch x\x1b]52;c;aGk=\x07/../../escape'
    const base = g.cluster.nodes[0]
    const cluster = {...g.cluster, nodes: [...g.cluster.nodes, {...base, metadata: {...base.metadata, name: hostile}}]}
    const recordings = new Map(
      g.observations.map((o) => [o.name, loadNodeRecording(join('examples/broken-cluster/nodes', o.name))!]),
    )
    recordings.set(hostile, recordings.get('node-a')!)
    const out = join(dir, 'bundle')
    const r = writeBundle(out, cluster, recordings, {namespace: 'shop', name: 'web', observations: g.observations})
    assert.deepEqual(r, {leftOut: [hostile]})
    assert.deepEqual(readdirSync(join(out, 'nodes')).sort(), ['node-a', 'node-b'])
    assert.deepEqual(readdirSync(dir), ['bundle'])
    const replay = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', out, '-o', 'json'])
    assert.deepEqual(
      replay.json.nodes.map((n: {name: string; reachable: boolean}) => [n.name, n.reachable]),
      [
        ['node-a', true],
        ['node-b', true],
      ],
      replay.stderr,
    )
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})
