import assert from 'node:assert/strict'
import {describe, test} from 'node:test'
import type {Duplex} from 'node:stream'
import {KubeConfig} from '@kubernetes/client-node'
import {execInPod} from '../../src/kube/exec-in-pod.js'
import {openPortForward} from '../../src/kube/port-forward.js'
import {
  KubeAbortedError,
  KubeCommandNotFoundError,
  KubeForbiddenError,
  KubeNotFoundError,
  KubePortForwardError,
  KubeTimeoutError,
} from '../../src/kube/errors.js'
import {labGuard} from '../helpers/lab-guard.js'
import {withLab} from '../helpers/lab-suite.js'
import {labPodSandbox} from '../lab/apiserver-sandboxes.js'
import type {NetnsLab} from '../lab/netns-lab.js'
import {sleep} from '../lab/sh.js'

const why = labGuard()
const NS = 'kube-system'
const KUBE_PROXY_A = 'kube-proxy-ax7k2'
const KUBE_PROXY_B = 'kube-proxy-bx7k2'

/** Sends one HTTP/1.0 request through a forwarded stream and returns everything the server said. */
function httpGet(stream: Duplex, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    stream.on('data', (d: Buffer) => chunks.push(d))
    stream.on('end', () => resolve(Buffer.concat(chunks).toString()))
    stream.on('error', reject)
    stream.write(`GET ${path} HTTP/1.0\r\nHost: localhost\r\n\r\n`)
  })
}

describe('execInPod and openPortForward against the test API server', {skip: why}, () => {
  let lab: NetnsLab
  let kc: KubeConfig
  withLab((l) => {
    lab = l
    lab.api.opts.podSandbox = labPodSandbox(lab, {'kube-proxy-b': ['ipvsadm']})
    kc = new KubeConfig()
    kc.loadFromFile(lab.kubeconfigPath)
  })

  const withForbidden = async (entries: string[], body: () => Promise<void>) => {
    lab.api.opts.forbidden = new Set(entries)
    try {
      await body()
    } finally {
      lab.api.opts.forbidden = undefined
    }
  }

  /** Bounded wait until the server holds no exec/port-forward socket or process (the client really let go). */
  const serverIdle = async () => {
    for (let i = 0; i < 50 && (lab.api.streams.sockets.size > 0 || lab.api.streams.children.size > 0); i++)
      await sleep(50)
    return {sockets: lab.api.streams.sockets.size, children: lab.api.streams.children.size}
  }

  test("reads the node's real nat table", async () => {
    const r = await execInPod(kc, NS, KUBE_PROXY_A, 'kube-proxy', ['iptables-save', '-t', 'nat'], {timeoutMs: 10_000})
    assert.equal(r.exitCode, 0)
    assert.equal(r.stderr, '')
    assert.match(r.stdout, /^:KUBE-SERVICES - \[0:0\]$/m)
    assert.match(r.stdout, /-d 10\.96\.10\.10\/32 .*--dport 80 .*-j KUBE-SVC-/)
    const b = await execInPod(kc, NS, KUBE_PROXY_B, 'kube-proxy', ['cat', '/proc/sys/net/ipv4/ip_forward'], {
      timeoutMs: 10_000,
    })
    assert.deepEqual(b, {stdout: '1\n', stderr: '', exitCode: 0})
  })

  test('a non-zero exit is a result with both streams; arguments are not shell-expanded', async () => {
    const r = await execInPod(kc, NS, KUBE_PROXY_A, 'kube-proxy', ['sh', '-c', 'echo out; echo err >&2; exit 7'], {
      timeoutMs: 10_000,
    })
    assert.deepEqual(r, {stdout: 'out\n', stderr: 'err\n', exitCode: 7})
    const literal = await execInPod(
      kc,
      NS,
      KUBE_PROXY_A,
      'kube-proxy',
      ['printf', '%s|', '$(id -u)', '; true', "'q'"],
      {timeoutMs: 10_000},
    )
    assert.equal(literal.stdout, "$(id -u)|; true|'q'|")
  })

  test('large output arrives whole across many frames; a cap ends the call', async () => {
    const r = await execInPod(kc, NS, KUBE_PROXY_A, 'kube-proxy', ['head', '-c', '3000000', '/dev/zero'], {
      timeoutMs: 20_000,
    })
    assert.equal(r.stdout.length, 3_000_000)
    await assert.rejects(
      execInPod(kc, NS, KUBE_PROXY_A, 'kube-proxy', ['head', '-c', '300000', '/dev/zero'], {
        timeoutMs: 10_000,
        maxOutputBytes: 100_000,
      }),
      /output exceeds 100000 bytes/,
    )
    assert.deepEqual(await serverIdle(), {sockets: 0, children: 0})
  })

  test('a command the image lacks is KubeCommandNotFoundError', async () => {
    await assert.rejects(
      execInPod(kc, NS, KUBE_PROXY_B, 'kube-proxy', ['ipvsadm', '-Ln'], {timeoutMs: 10_000}),
      (e: unknown) => e instanceof KubeCommandNotFoundError && e.command === 'ipvsadm',
    )
    // the same tool is there on node-a's image
    await assert.rejects(
      execInPod(kc, NS, KUBE_PROXY_A, 'kube-proxy', ['kpd-no-such-tool'], {timeoutMs: 10_000}),
      (e: unknown) => e instanceof KubeCommandNotFoundError && e.command === 'kpd-no-such-tool',
    )
  })

  test('RBAC denial names the verb and resource; a missing pod is NotFound', async () => {
    await withForbidden(['create pods/exec kube-system'], async () => {
      await assert.rejects(
        execInPod(kc, NS, KUBE_PROXY_A, 'kube-proxy', ['true'], {timeoutMs: 10_000}),
        (e: unknown) => {
          assert.ok(e instanceof KubeForbiddenError, String(e))
          assert.deepEqual(
            {verb: e.verb, resource: e.resource, namespace: e.namespace, httpStatus: e.httpStatus},
            {verb: 'create', resource: 'pods/exec', namespace: NS, httpStatus: 403},
          )
          assert.equal(e.message, 'forbidden: this user may not create pods/exec in the namespace "kube-system"')
          assert.match(e.serverMessage, /cannot create resource "pods\/exec"/)
          return true
        },
      )
    })
    await withForbidden(['create pods/portforward *'], async () => {
      await assert.rejects(
        openPortForward(kc, NS, KUBE_PROXY_A, 10256, {timeoutMs: 10_000}),
        (e: unknown) => e instanceof KubeForbiddenError && e.resource === 'pods/portforward',
      )
    })
    await assert.rejects(
      execInPod(kc, NS, 'kube-proxy-gone', 'kube-proxy', ['true'], {timeoutMs: 10_000}),
      (e: unknown) => e instanceof KubeNotFoundError && e.pod === 'kube-proxy-gone',
    )
  })

  test('a hung exec ends at the deadline with its socket destroyed', async () => {
    lab.api.opts.hungExec = new Set([`${NS}/${KUBE_PROXY_A}`])
    try {
      const started = Date.now()
      await assert.rejects(
        execInPod(kc, NS, KUBE_PROXY_A, 'kube-proxy', ['iptables-save'], {timeoutMs: 800}),
        (e: unknown) => e instanceof KubeTimeoutError && e.timeoutMs === 800,
      )
      const took = Date.now() - started
      assert.ok(took >= 750 && took < 3000, `took ${took} ms`)
      assert.deepEqual(await serverIdle(), {sockets: 0, children: 0})
    } finally {
      lab.api.opts.hungExec = undefined
    }
  })

  test('a slow command is cut at the deadline, and an abort cancels at once; the server-side process goes away', async () => {
    await assert.rejects(
      execInPod(kc, NS, KUBE_PROXY_A, 'kube-proxy', ['sleep', '30'], {timeoutMs: 500}),
      KubeTimeoutError,
    )
    assert.deepEqual(await serverIdle(), {sockets: 0, children: 0})
    const ac = new AbortController()
    const running = execInPod(kc, NS, KUBE_PROXY_A, 'kube-proxy', ['sleep', '30'], {
      timeoutMs: 30_000,
      signal: ac.signal,
    })
    setTimeout(() => ac.abort(), 200)
    await assert.rejects(running, KubeAbortedError)
    assert.deepEqual(await serverIdle(), {sockets: 0, children: 0})
    const aborted = new AbortController()
    aborted.abort()
    await assert.rejects(
      execInPod(kc, NS, KUBE_PROXY_A, 'kube-proxy', ['true'], {timeoutMs: 5000, signal: aborted.signal}),
      KubeAbortedError,
    )
  })

  test('a stop ends a watch early with what it printed so far and no exit status (the --kernel-trace monitor)', async () => {
    const stop = new AbortController()
    const started = Date.now()
    const watching = execInPod(kc, NS, KUBE_PROXY_A, 'kube-proxy', ['sh', '-c', 'echo first; exec sleep 30'], {
      timeoutMs: 30_000,
      stop: stop.signal,
    })
    setTimeout(() => stop.abort(), 1000)
    assert.deepEqual(await watching, {stdout: 'first\n', stderr: '', exitCode: null})
    assert.ok(Date.now() - started < 10_000, 'not the command’s 30 s')
    assert.deepEqual(await serverIdle(), {sockets: 0, children: 0})
  })

  test("port-forward reaches kube-proxy's healthz and metrics on the node's loopback", async () => {
    const health = await httpGet(await openPortForward(kc, NS, KUBE_PROXY_A, 10256, {timeoutMs: 10_000}), '/healthz')
    assert.match(health, /^HTTP\/1\.[01] 200 /)
    assert.match(health, /"nodeEligible":true/)
    lab.setKubeProxy('node-b', {healthy: false})
    try {
      const unhealthy = await httpGet(
        await openPortForward(kc, NS, KUBE_PROXY_B, 10256, {timeoutMs: 10_000}),
        '/healthz',
      )
      assert.match(unhealthy, /^HTTP\/1\.[01] 503 /)
    } finally {
      lab.setKubeProxy('node-b', {healthy: true})
    }
    const metrics = await httpGet(await openPortForward(kc, NS, KUBE_PROXY_A, 10249, {timeoutMs: 10_000}), '/metrics')
    assert.match(metrics, /^kubeproxy_sync_proxy_rules_last_timestamp_seconds \d+$/m)
    assert.deepEqual(await serverIdle(), {sockets: 0, children: 0})
  })

  test('port-forward to a port nothing listens on errors with refused', async () => {
    const stream = await openPortForward(kc, NS, KUBE_PROXY_A, 10999, {timeoutMs: 10_000})
    const error = await new Promise<unknown>((resolve) => {
      stream.on('error', resolve)
      stream.on('data', () => {})
      stream.on('end', () => resolve(undefined))
    })
    assert.ok(error instanceof KubePortForwardError, String(error))
    assert.equal(error.refused, true)
    assert.equal(error.port, 10999)
  })

  test('destroying a forwarded stream closes the tunnel on the server', async () => {
    const stream = await openPortForward(kc, NS, KUBE_PROXY_A, 10249, {timeoutMs: 10_000})
    stream.destroy()
    assert.deepEqual(await serverIdle(), {sockets: 0, children: 0})
  })
})
