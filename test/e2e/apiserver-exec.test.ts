import assert from 'node:assert/strict'
import {describe, test} from 'node:test'
import {PassThrough, Readable} from 'node:stream'
import {CoreV1Api, Exec, KubeConfig, PortForward, type V1Status} from '@kubernetes/client-node'
import {labGuard} from '../helpers/lab-guard.js'
import {withLab} from '../helpers/lab-suite.js'
import {labPodSandbox} from '../lab/apiserver-sandboxes.js'
import type {NetnsLab} from '../lab/netns-lab.js'
import {runAsync} from '../lab/sh.js'

const why = labGuard()
const KUBE_PROXY_A = 'kube-proxy-ax7k2'

/** Runs one command through @kubernetes/client-node's own Exec and collects what it hands back. */
async function clientNodeExec(
  kc: KubeConfig,
  pod: string,
  argv: string[],
  stdin?: string,
): Promise<{stdout: string; stderr: string; status: V1Status; protocol: string}> {
  const stdout = new PassThrough()
  const stderr = new PassThrough()
  const out: Buffer[] = []
  const err: Buffer[] = []
  stdout.on('data', (d: Buffer) => out.push(d))
  stderr.on('data', (d: Buffer) => err.push(d))
  let protocol = ''
  const status = await new Promise<V1Status>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('exec did not finish in 10 s')), 10_000)
    new Exec(kc)
      .exec(
        'kube-system',
        pod,
        'kube-proxy',
        argv,
        stdout,
        stderr,
        stdin === undefined ? null : Readable.from([Buffer.from(stdin)]),
        false,
        (s) => {
          clearTimeout(timer)
          resolve(s)
        },
      )
      .then((ws) => (protocol = ws.protocol))
      .catch((e: unknown) => {
        clearTimeout(timer)
        reject(e as Error)
      })
  })
  return {stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString(), status, protocol}
}

describe('test API server: pods/exec and pods/portforward over WebSocket', {skip: why}, () => {
  let lab: NetnsLab
  let kc: KubeConfig
  withLab((l) => {
    lab = l
    lab.api.opts.podSandbox = labPodSandbox(lab, {'kube-proxy-b': ['ipvsadm']})
    kc = new KubeConfig()
    kc.loadFromFile(lab.kubeconfigPath)
  })

  test("client-node Exec reads the node's real rules, over v5.channel.k8s.io, with a Success status", async () => {
    const r = await clientNodeExec(kc, KUBE_PROXY_A, ['iptables-save', '-t', 'nat'])
    assert.equal(r.protocol, 'v5.channel.k8s.io')
    assert.deepEqual(r.status, {metadata: {}, status: 'Success'})
    assert.match(r.stdout, /^\*nat$/m)
    assert.match(r.stdout, /-d 10\.96\.10\.10\/32 .*-j KUBE-SVC-/)
    assert.equal(r.stderr, '')
    const log = lab.api.requestLog.filter((e) => e.subresource === 'exec').at(-1)!
    assert.deepEqual(
      {
        verb: log.verb,
        namespace: log.namespace,
        name: log.name,
        command: log.query.filter(([k]) => k === 'command').map(([, v]) => v),
      },
      {verb: 'get', namespace: 'kube-system', name: KUBE_PROXY_A, command: ['iptables-save', '-t', 'nat']},
    )
  })

  test('each node pod execs in its own node: addresses differ', async () => {
    const a = await clientNodeExec(kc, KUBE_PROXY_A, ['ip', '-o', '-4', 'addr', 'show', 'dev', 'eth0'])
    const b = await clientNodeExec(kc, 'kube-proxy-bx7k2', ['ip', '-o', '-4', 'addr', 'show', 'dev', 'eth0'])
    assert.match(a.stdout, /inet 10\.200\.0\.11\//)
    assert.match(b.stdout, /inet 10\.200\.0\.12\//)
  })

  test('non-zero exit: stdout and stderr apart, NonZeroExitCode with the code; argv is not run through a shell', async () => {
    const r = await clientNodeExec(kc, KUBE_PROXY_A, ['sh', '-c', 'echo out; echo err >&2; exit 3'])
    assert.equal(r.stdout, 'out\n')
    assert.equal(r.stderr, 'err\n')
    assert.equal(r.status.status, 'Failure')
    assert.equal(r.status.reason, 'NonZeroExitCode')
    assert.deepEqual(r.status.details?.causes, [{reason: 'ExitCode', message: '3'}])
    const literal = await clientNodeExec(kc, KUBE_PROXY_A, ['echo', '$(id -u);', '`true`'])
    assert.equal(literal.stdout, '$(id -u); `true`\n')
  })

  test('stdin reaches the command and its end (v5 close signal) ends the command', async () => {
    const r = await clientNodeExec(kc, KUBE_PROXY_A, ['wc', '-c'], 'hello world')
    assert.equal(r.stdout.trim(), '11')
    assert.equal(r.status.status, 'Success')
  })

  test('a command the image lacks is an InternalError status, not a crash', async () => {
    const r = await clientNodeExec(kc, 'kube-proxy-bx7k2', ['ipvsadm', '-Ln'])
    assert.equal(r.status.reason, 'InternalError')
    assert.match(r.status.message ?? '', /exec: "ipvsadm": executable file not found in \$PATH/)
    const missingOnHost = await clientNodeExec(kc, KUBE_PROXY_A, ['kpd-no-such-tool'])
    assert.equal(missingOnHost.status.reason, 'InternalError')
  })

  test('RBAC denial of pods/exec is a 403 before the upgrade', async () => {
    lab.api.opts.forbidden = new Set(['create pods/exec kube-system'])
    try {
      // client-node rejects with the ws ErrorEvent, which names the HTTP status but drops the Status body.
      await assert.rejects(clientNodeExec(kc, KUBE_PROXY_A, ['true']), (e: {message?: string}) =>
        /Unexpected server response: 403/.test(e.message ?? ''),
      )
    } finally {
      lab.api.opts.forbidden = undefined
    }
  })

  test("client-node PortForward reaches kube-proxy's health port on the node's loopback", async () => {
    const output = new PassThrough()
    const input = new PassThrough()
    const chunks: Buffer[] = []
    output.on('data', (d: Buffer) => chunks.push(d))
    const ws = (await new PortForward(kc).portForward('kube-system', KUBE_PROXY_A, [10256], output, null, input)) as {
      protocol: string
      close(): void
    }
    assert.equal(ws.protocol, 'v4.channel.k8s.io')
    input.write('GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n')
    for (let i = 0; i < 50 && !Buffer.concat(chunks).toString().includes('nodeEligible'); i++)
      await new Promise((r) => setTimeout(r, 100))
    ws.close()
    const text = Buffer.concat(chunks).toString()
    assert.match(text, /^HTTP\/1\.[01] 200 /)
    assert.match(text, /"nodeEligible":true/)
  })

  test('a debug pod is created, runs in its node, and is deleted; one that is not what the doctor promises is refused (422)', async () => {
    const core = kc.makeApiClient(CoreV1Api)
    const body = {
      metadata: {
        generateName: 'kpd-debug-',
        labels: {'app.kubernetes.io/managed-by': 'kproxy-doctor', 'kproxy-doctor/run': 'abc123'},
      },
      spec: {
        nodeName: 'node-b',
        hostNetwork: true,
        tolerations: [{operator: 'Exists'}],
        containers: [
          {
            name: 'debug',
            image: 'registry.k8s.io/kube-proxy:v1.33.0',
            securityContext: {capabilities: {drop: ['ALL'], add: ['NET_ADMIN', 'NET_RAW', 'SYS_CHROOT']}} as object,
            volumeMounts: [{name: 'root', mountPath: '/host', readOnly: true}],
          },
        ],
        volumes: [{name: 'root', hostPath: {path: '/'}}],
      },
    }
    const writable = structuredClone(body)
    writable.spec.containers[0].volumeMounts[0].readOnly = false
    writable.spec.containers[0].securityContext = {capabilities: {add: ['NET_ADMIN']}}
    await assert.rejects(
      core.createNamespacedPod({namespace: 'kube-system', body: writable}),
      (e: {code?: number; body?: unknown}) =>
        e.code === 422 &&
        /: containers\[0\]\.securityContext\.capabilities\.add must hold NET_RAW; the node's \/ at \/host must be read-only$/.test(
          (JSON.parse(String(e.body)) as {message: string}).message,
        ),
    )
    const created = await core.createNamespacedPod({namespace: 'kube-system', body})
    const name = created.metadata!.name!
    assert.match(name, /^kpd-debug-/)
    let phase = created.status?.phase
    for (let i = 0; i < 50 && phase !== 'Running'; i++) {
      await new Promise((r) => setTimeout(r, 50))
      phase = (await core.readNamespacedPod({namespace: 'kube-system', name})).status?.phase
    }
    assert.equal(phase, 'Running')
    const stdout = new PassThrough()
    const out: Buffer[] = []
    stdout.on('data', (d: Buffer) => out.push(d))
    await new Promise<void>((resolve, reject) => {
      void new Exec(kc)
        .exec(
          'kube-system',
          name,
          'debug',
          ['ip', '-o', '-4', 'addr', 'show', 'dev', 'eth0'],
          stdout,
          null,
          null,
          false,
          () => resolve(),
        )
        .catch(reject)
    })
    assert.match(Buffer.concat(out).toString(), /inet 10\.200\.0\.12\//)
    await core.deleteNamespacedPod({namespace: 'kube-system', name})
    await assert.rejects(core.readNamespacedPod({namespace: 'kube-system', name}), /404|not found/i)
    assert.deepEqual(
      lab.api.requestLog
        .filter((e) => e.name === name || (e.verb === 'create' && e.resource === 'pods'))
        .map((e) => `${e.verb} ${e.resource}${e.subresource ? '/' + e.subresource : ''}`),
      [
        'create pods',
        'create pods',
        ...Array(
          lab.api.requestLog.filter((e) => e.name === name && e.verb === 'get' && !e.subresource).length - 1,
        ).fill('get pods'),
        'get pods/exec',
        'delete pods',
        'get pods',
      ],
    )
  })

  test('pods create can be denied; deleting a pod ends the processes exec started in it', async () => {
    const core = kc.makeApiClient(CoreV1Api)
    const body = {
      metadata: {name: 'kpd-debug-x'},
      spec: {nodeName: 'node-a', hostNetwork: true, containers: [{name: 'debug', image: 'busybox'}]},
    }
    lab.api.opts.forbidden = new Set(['create pods kube-system'])
    try {
      await assert.rejects(
        core.createNamespacedPod({namespace: 'kube-system', body}),
        (e: {code?: number; body?: unknown}) =>
          e.code === 403 &&
          /cannot create resource "pods" in API group "" in the namespace "kube-system"/.test(
            (JSON.parse(String(e.body)) as {message: string}).message,
          ),
      )
    } finally {
      lab.api.opts.forbidden = undefined
    }
    assert.equal(lab.api.createdPods.length, 0)
    await core.createNamespacedPod({namespace: 'kube-system', body})
    for (
      let i = 0;
      i < 50 && (lab.api.createdPods[0]?.status as {phase?: string} | undefined)?.phase !== 'Running';
      i++
    )
      await new Promise((r) => setTimeout(r, 50))
    const closed = new Promise<number>((resolve, reject) => {
      new Exec(kc)
        .exec('kube-system', 'kpd-debug-x', 'debug', ['sleep', '30'], null, null, null, false)
        .then((ws) => (ws as unknown as {on(e: 'close', l: () => void): void}).on('close', () => resolve(Date.now())))
        .catch(reject)
    })
    await new Promise((r) => setTimeout(r, 200))
    assert.equal(lab.api.streams.children.size, 1)
    const deletedAt = Date.now()
    await core.deleteNamespacedPod({namespace: 'kube-system', name: 'kpd-debug-x'})
    assert.ok((await closed) - deletedAt < 2000)
    assert.equal(lab.api.streams.children.size, 0)
  })

  test('kubectl exec (WebSocket by default) prints the output and passes the exit code on', async () => {
    const version = await runAsync('kubectl', ['version', '--client', '-o', 'json'])
    const minor = Number(
      (JSON.parse(version.stdout) as {clientVersion: {minor: string}}).clientVersion.minor.replace(/\D/g, ''),
    )
    assert.ok(minor >= 30, `kubectl 1.${minor} does not use WebSocket exec by default`)
    const r = await runAsync('kubectl', [
      '--kubeconfig',
      lab.kubeconfigPath,
      'exec',
      '-n',
      'kube-system',
      KUBE_PROXY_A,
      '--',
      'sh',
      '-c',
      'iptables-save -t nat | grep -c KUBE-SVC-; exit 4',
    ])
    assert.equal(r.code, 4, r.stderr)
    assert.ok(Number(r.stdout.trim()) > 0, r.stdout)
    const ok = await runAsync('kubectl', [
      '--kubeconfig',
      lab.kubeconfigPath,
      'exec',
      '-n',
      'kube-system',
      KUBE_PROXY_A,
      '-c',
      'kube-proxy',
      '--',
      'cat',
      '/proc/sys/net/ipv4/ip_forward',
    ])
    assert.equal(ok.code, 0, ok.stderr)
    assert.equal(ok.stdout, '1\n')
    const upgrades = lab.api.requestLog.filter((e) => e.subresource === 'exec' && e.name === KUBE_PROXY_A).slice(-2)
    assert.equal(upgrades.length, 2)
  })
})
