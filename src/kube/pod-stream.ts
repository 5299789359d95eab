import type {ClientRequest, IncomingMessage} from 'node:http'
import type {RequestOptions} from 'node:https'
import type {KubeConfig} from '@kubernetes/client-node'
import WebSocket from 'ws'
import {KubeAbortedError, KubeForbiddenError, KubeNotFoundError, KubeStreamError, KubeTimeoutError} from './errors.js'

/**
 * One WebSocket to a pod subresource (exec, portforward), authenticated by @kubernetes/client-node's
 * KubeConfig.applyToHTTPSOptions (so every kubeconfig auth method works), framed here on `ws`. client-node's own
 * Exec/PortForward are not used: they cannot be cancelled or timed out before the upgrade completes, they keep only
 * "Unexpected server response: 403" of a refusal (not the Status naming what is missing), and an unexpected
 * channel number throws inside the socket's event handler.
 */
export interface PodStreamTarget {
  namespace: string
  pod: string
  subresource: 'exec' | 'portforward'
  query: URLSearchParams
}

export interface PodStreamOptions {
  timeoutMs: number
  signal?: AbortSignal
}

export interface PodStream {
  socket: WebSocket
  /** Settles the call with an error (first one wins) and destroys the socket. */
  fail(error: Error): void
  /** Ends the deadline and the abort listener (the caller has its answer). */
  finish(): void
  /** Rejected with the call's first error: the refusal, the deadline, the abort, or whatever `fail` was given. */
  failed: Promise<never>
}

const MAX_STATUS_BYTES = 64 * 1024

/** Opens the socket; `onFrame` gets each binary frame's channel and payload. Resolves once the upgrade succeeded. */
export async function openPodStream(
  kubeConfig: KubeConfig,
  target: PodStreamTarget,
  options: PodStreamOptions,
  onFrame: (channel: number, data: Buffer) => void,
): Promise<PodStream> {
  const what = `${target.subresource} in pod ${target.namespace}/${target.pod}`
  let socket: WebSocket | undefined
  let settled = false
  let rejectFailed!: (e: Error) => void
  const failed = new Promise<never>((_, reject) => (rejectFailed = reject))
  failed.catch(() => {})
  const fail = (error: Error) => {
    if (!settled) {
      settled = true
      rejectFailed(error)
    }
    finish()
    socket?.terminate()
  }
  const timer = setTimeout(() => fail(new KubeTimeoutError(what, options.timeoutMs)), options.timeoutMs)
  const onAbort = () => fail(new KubeAbortedError(what))
  const finish = () => {
    clearTimeout(timer)
    options.signal?.removeEventListener('abort', onAbort)
  }
  if (options.signal?.aborted) onAbort()
  else options.signal?.addEventListener('abort', onAbort, {once: true})

  try {
    const opened = connect(kubeConfig, target, onFrame, (ws) => {
      socket = ws
      ws.on('unexpected-response', (_req: ClientRequest, res: IncomingMessage) => void refusal(res, target).then(fail))
      if (settled) ws.terminate()
    })
    await Promise.race([opened, failed])
  } catch (e) {
    fail(
      e instanceof KubeStreamError
        ? e
        : new KubeStreamError(`${what}: ${(e as {message?: string}).message ?? String(e)}`, {cause: e}),
    )
    return failed
  }
  return {socket: socket!, fail, finish, failed}
}

const PROTOCOLS = {exec: ['v5.channel.k8s.io', 'v4.channel.k8s.io'], portforward: ['v4.channel.k8s.io']}

async function connect(
  kubeConfig: KubeConfig,
  target: PodStreamTarget,
  onFrame: (channel: number, data: Buffer) => void,
  created: (ws: WebSocket) => void,
): Promise<void> {
  const cluster = kubeConfig.getCurrentCluster()
  if (!cluster) throw new KubeStreamError('the kubeconfig has no current cluster')
  const server = new URL(cluster.server)
  server.protocol = server.protocol === 'https:' ? 'wss:' : 'ws:'
  const base = server.toString().replace(/\/$/, '')
  const path = `/api/v1/namespaces/${encodeURIComponent(target.namespace)}/pods/${encodeURIComponent(target.pod)}/${target.subresource}?${target.query.toString()}`
  const tlsAndAuth: RequestOptions = {}
  await kubeConfig.applyToHTTPSOptions(tlsAndAuth)
  const ws = new WebSocket(base + path, PROTOCOLS[target.subresource], {...tlsAndAuth})
  created(ws)
  ws.on('message', (data: Buffer, isBinary: boolean) => {
    if (isBinary && data.length > 0) onFrame(data[0], data.subarray(1))
  })
  await new Promise<void>((resolve, reject) => {
    ws.on('open', resolve)
    ws.on('error', reject)
  })
}

/** Reads the Status the API server refused the upgrade with and names the error after it. */
async function refusal(res: IncomingMessage, target: PodStreamTarget): Promise<Error> {
  const chunks: Buffer[] = []
  let size = 0
  try {
    for await (const chunk of res) {
      size += (chunk as Buffer).length
      if (size > MAX_STATUS_BYTES) break
      chunks.push(chunk as Buffer)
    }
  } catch {
    // a body cut short still leaves the status code
  }
  let message = ''
  try {
    message = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as {message?: string}).message ?? ''
  } catch {
    message = Buffer.concat(chunks).toString('utf8').slice(0, 300)
  }
  const code = res.statusCode ?? 0
  if (code === 403) {
    const named = /cannot (\S+) resource "([^"]+)"/.exec(message)
    return new KubeForbiddenError(
      named?.[1] ?? 'create',
      named?.[2] ?? `pods/${target.subresource}`,
      target.namespace,
      message,
    )
  }
  if (code === 404) return new KubeNotFoundError(target.namespace, target.pod)
  return new KubeStreamError(
    `${target.subresource} in pod ${target.namespace}/${target.pod} refused (HTTP ${code})${message ? `: ${message}` : ''}`,
    {httpStatus: code},
  )
}
