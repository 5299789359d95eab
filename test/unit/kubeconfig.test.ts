import assert from 'node:assert/strict'
import {mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {after, before, test} from 'node:test'
import {LiveClusterSource, loadKubeConfig} from '../../src/cluster/live-source.js'
import {LabApiServer} from '../lab/apiserver.js'
import {runCli} from '../helpers/run-cli.js'

const TOKEN = 'kpd-unit-token-0123456789'
const dir = mkdtempSync(join(tmpdir(), 'kpd-kubeconfig-'))
const api = new LabApiServer({token: TOKEN})
const emptyHome = join(dir, 'home')
mkdirSync(emptyHome)

before(async () => {
  await api.start()
  api.set('nodes', [{metadata: {name: 'node-a'}}])
})
after(async () => {
  await api.stop()
  rmSync(dir, {recursive: true, force: true})
  rmSync(api.dir, {recursive: true, force: true})
})

/** No kubeconfig anywhere, not in a Pod: what a first run on a fresh machine sees. */
const NOWHERE = {HOME: emptyHome, KUBECONFIG: '', KUBERNETES_SERVICE_HOST: '', KUBERNETES_SERVICE_PORT: ''}

test("no kubeconfig anywhere: the doctor's own line says what was tried and how to point at one (also with --context)", async () => {
  for (const extra of [[], ['--context', 'prod']]) {
    const r = await runCli(['svc', 'web', '-n', 'shop', ...extra], NOWHERE)
    assert.equal(r.code, 2, r.stderr)
    assert.equal(
      r.stderr,
      `kproxy-doctor: no kubeconfig found: tried ${emptyHome}/.kube/config (does not exist), in-cluster (KUBERNETES_SERVICE_HOST/PORT are not set: not in a Pod); pass --kubeconfig FILE or set KUBECONFIG to point at one\n`,
    )
  }
  const listed = await runCli(['svc', 'web', '-n', 'shop'], {...NOWHERE, KUBECONFIG: `${dir}/a:${dir}/b`})
  assert.equal(
    listed.stderr,
    `kproxy-doctor: no kubeconfig found: tried $KUBECONFIG (${dir}/a:${dir}/b: none exists), in-cluster (KUBERNETES_SERVICE_HOST/PORT are not set: not in a Pod); pass --kubeconfig FILE or set KUBECONFIG to point at one\n`,
  )
  const missing = await runCli(['svc', 'web', '--kubeconfig', join(dir, 'absent')], NOWHERE)
  assert.equal(missing.stderr, `kproxy-doctor: kubeconfig ${join(dir, 'absent')} does not exist (--kubeconfig)\n`)
})

function kubeconfig(name: string, contexts: string[], user = `users: [{name: u, user: {token: ${TOKEN}}}]`): string {
  const path = join(dir, name)
  writeFileSync(
    path,
    [
      'apiVersion: v1',
      'kind: Config',
      `current-context: ${contexts[0]}`,
      `clusters: [{name: c, cluster: {server: "${api.url}", certificate-authority-data: ${Buffer.from(api.caPem).toString('base64')}}}]`,
      user,
      `contexts: [${contexts.map((c) => `{name: ${c}, context: {cluster: c, user: u, namespace: ns-${c}}}`).join(', ')}]`,
      '',
    ].join('\n'),
  )
  return path
}

test('$KUBECONFIG: the files that exist are merged, the first one deciding the current context; --context lists the real names', async () => {
  const a = kubeconfig('a.yaml', ['staging'])
  const b = kubeconfig('b.yaml', ['prod', 'dev'])
  const env = {KUBECONFIG: [join(dir, 'absent.yaml'), a, b].join(':'), KUBERNETES_SERVICE_HOST: ''}
  const loaded = loadKubeConfig({}, {env, home: emptyHome})
  assert.deepEqual(
    [loaded.kc.getContexts().map((c) => c.name), loaded.kc.getCurrentContext(), loaded.namespace, loaded.inCluster],
    [['staging', 'prod', 'dev'], 'staging', 'ns-staging', false],
  )
  assert.equal(loadKubeConfig({context: 'dev'}, {env, home: emptyHome}).namespace, 'ns-dev')
  assert.throws(
    () => loadKubeConfig({context: 'qa'}, {env, home: emptyHome}),
    /^Error: context "qa" not found in kubeconfig \(known: staging, prod, dev\)$/,
  )
})

test("in a Pod: the service account's token, CA and namespace, read against the API server", async () => {
  const root = join(dir, 'pod-root')
  const sa = join(root, 'var/run/secrets/kubernetes.io/serviceaccount')
  mkdirSync(sa, {recursive: true})
  writeFileSync(join(sa, 'token'), TOKEN)
  writeFileSync(join(sa, 'ca.crt'), api.caPem)
  writeFileSync(join(sa, 'namespace'), 'kube-system')
  const env = {KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String(api.port)}
  const loaded = loadKubeConfig({timeoutMs: 5000}, {env, serviceAccountRoot: root, home: emptyHome})
  assert.deepEqual([loaded.inCluster, loaded.namespace], [true, 'kube-system'])
  const nodes = await new LiveClusterSource(loaded.kc, 5000).listNodes()
  assert.deepEqual(
    nodes.map((n) => n.metadata?.name),
    ['node-a'],
  )
  assert.throws(
    () => loadKubeConfig({context: 'prod'}, {env, serviceAccountRoot: root, home: emptyHome}),
    /context "prod": the in-cluster configuration \(this Pod's service account\) has no contexts/,
  )
  // Not in a Pod after all: the token folder alone is not enough.
  assert.throws(
    () => loadKubeConfig({}, {env: {}, serviceAccountRoot: root, home: emptyHome}),
    /no kubeconfig found: .*in-cluster \(KUBERNETES_SERVICE_HOST\/PORT are not set: not in a Pod\)/,
  )
})

function plugin(name: string, body: string): string {
  const path = join(dir, name)
  writeFileSync(path, `#!/bin/sh\n${body}\n`, {mode: 0o755})
  return path
}

test('an exec credential plugin: its token is used, and asked once for concurrent calls', async () => {
  const calls = join(dir, 'plugin-calls')
  const script = plugin(
    'token-plugin',
    `echo call >> ${calls}\necho '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"'"$KPD_TOKEN"'"}}'`,
  )
  const kc = kubeconfig(
    'exec.yaml',
    ['exec'],
    `users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: ${script}, env: [{name: KPD_TOKEN, value: ${TOKEN}}]}}}]`,
  )
  const loaded = loadKubeConfig({kubeconfig: kc, timeoutMs: 5000})
  const source = new LiveClusterSource(loaded.kc, 5000)
  const [first, second] = await Promise.all([source.listNodes(), source.listNodes()])
  assert.deepEqual([first.length, second.length], [1, 1])
  assert.equal(readFileSync(calls, 'utf8'), 'call\n', 'one plugin run for both calls, its answer kept')
})

test('an exec credential plugin that never answers: exit 2 within the timeout, one line naming it, the plugin killed', async () => {
  const pidFile = join(dir, 'hung-plugin.pid')
  const script = plugin('hung-plugin', `echo $$ > ${pidFile}\nsleep 600 & wait`)
  const kc = kubeconfig(
    'hung.yaml',
    ['hung'],
    `users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: ${script}}}}]`,
  )
  // The test's own bound: a few seconds above --timeout 2 (a hang is killed at 8 s and fails below with code -1).
  const r = await runCli(['svc', 'web', '-n', 'shop', '--kubeconfig', kc, '--timeout', '2'], {}, 8000)
  assert.equal(r.code, 2, r.stderr)
  assert.equal(
    r.stderr,
    `kproxy-doctor: the kubeconfig's exec credential plugin \`${script}\` did not answer within 2s\n`,
  )
  const pid = Number(readFileSync(pidFile, 'utf8'))
  assert.throws(() => process.kill(pid, 0), /ESRCH/, 'the plugin is not left running')
})

test('an exec credential plugin that fails: its exit status and last line, exit 2', async () => {
  const script = plugin('failing-plugin', 'echo "error: you must log in first" >&2\nexit 3')
  const kc = kubeconfig(
    'failing.yaml',
    ['failing'],
    `users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: ${script}}}}]`,
  )
  const r = await runCli(['svc', 'web', '-n', 'shop', '--kubeconfig', kc, '--timeout', '5'])
  assert.equal(r.code, 2, r.stderr)
  assert.deepEqual(
    r.stderr.split('\n').filter((l) => l.startsWith('kproxy-doctor:')),
    [
      `kproxy-doctor: the kubeconfig's exec credential plugin \`${script}\` failed (exit 3): error: you must log in first`,
    ],
  )
})
