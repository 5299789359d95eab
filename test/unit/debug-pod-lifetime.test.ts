/**
 * Issue #32: a debug Pod never outlives its run for long. A closed terminal (SIGHUP) or SIGQUIT deletes the Pods as
 * Ctrl-C does; a run killed outright leaves them to activeDeadlineSeconds, capped whatever --timeout says.
 */
import assert from 'node:assert/strict'
import {spawn} from 'node:child_process'
import {after, before, test} from 'node:test'
import {dirname, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'
import {debugPodSpec} from '../../src/node/transport/pod/debug-pod.js'
import {LabApiServer} from '../lab/apiserver.js'

const settings = {namespace: 'kube-system', runId: 'abc123', kubectl: ['kubectl']}

test('activeDeadlineSeconds: ten times --timeout plus a minute, at most 15 minutes', () => {
  assert.equal(debugPodSpec(settings, 'node-a', 'img', 10_000).spec?.activeDeadlineSeconds, 160)
  assert.equal(debugPodSpec(settings, 'node-a', 'img', 3_600_000).spec?.activeDeadlineSeconds, 900)
})

const api = new LabApiServer({token: 'kpd-lifetime', podStartMs: 10})
before(async () => {
  await api.start()
  api.set('nodes', [{metadata: {name: 'node-a'}}])
})
after(() => api.stop())

const HERE = dirname(fileURLToPath(import.meta.url))

for (const [signal, code] of [
  ['SIGHUP', 129],
  ['SIGQUIT', 131],
] as const) {
  test(`${signal} while a debug Pod lives: it is deleted, then the process exits ${code}`, async () => {
    const kubeconfig = api.writeKubeconfig()
    // A process that creates one debug Pod and waits, as a run reading its node would.
    const script = `
      import {DebugPods} from ${JSON.stringify(resolve(HERE, '../../src/node/transport/pod/debug-pod.js'))}
      import {loadKubeConfig} from ${JSON.stringify(resolve(HERE, '../../src/cluster/live-source.js'))}
      const kc = loadKubeConfig({kubeconfig: ${JSON.stringify(kubeconfig)}, timeoutMs: 5000}).kc
      const pods = new DebugPods(kc, {namespace: 'kube-system', runId: 'sig${code}', kubectl: ['kubectl']}, 5000)
      await pods.start('node-a', 'img')
      process.stdout.write('started\\n')
      setTimeout(() => {}, 30000)
    `
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {stdio: ['ignore', 'pipe', 'pipe']})
    let stderr = ''
    child.stderr.on('data', (d) => (stderr += d))
    await new Promise<void>((res, rej) => {
      child.stdout.on('data', (d) => String(d).includes('started') && res())
      child.on('exit', () => rej(new Error(`exited before the Pod ran: ${stderr}`)))
    })
    assert.equal(api.createdPods.length, 1)
    const exited = new Promise<number | null>((res) => child.on('exit', (c) => res(c)))
    child.kill(signal)
    assert.equal(await exited, code, stderr)
    assert.equal(api.createdPods.length, 0, 'the debug Pod is deleted')
    assert.match(stderr, new RegExp(`^kproxy-doctor: ${signal}: deleting 1 debug Pod before exiting$`, 'm'))
  })
}

test('the debug Pod has what its reads need, no more: not privileged, three capabilities, no hostPID, bounded resources', () => {
  const spec = debugPodSpec(settings, 'node-a', 'img', 10_000).spec!
  assert.equal(spec.hostPID, undefined)
  assert.equal(spec.hostNetwork, true)
  const [c] = spec.containers
  assert.deepEqual(c.securityContext, {
    privileged: false,
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    capabilities: {drop: ['ALL'], add: ['NET_ADMIN', 'NET_RAW', 'SYS_CHROOT']},
  })
  assert.deepEqual(c.resources, {requests: {cpu: '50m', memory: '64Mi'}, limits: {cpu: '1', memory: '512Mi'}})
  assert.deepEqual(c.volumeMounts, [{name: 'host-root', mountPath: '/host', readOnly: true}])
})
