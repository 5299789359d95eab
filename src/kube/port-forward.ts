import {Duplex} from 'node:stream'
import type {KubeConfig} from '@kubernetes/client-node'
import {KubePortForwardError} from './errors.js'
import {openPodStream} from './pod-stream.js'

export interface PortForwardOptions {
  /** Bounds opening the tunnel (the upgrade and the server's first frame); the open stream has no deadline. */
  timeoutMs: number
  /** Aborting fails the opening, or destroys the open stream. */
  signal?: AbortSignal
}

const DATA = 0
const ERROR = 1

/**
 * A TCP connection to `port` on the pod's own network (for a host-network pod such as kube-proxy: the node's
 * loopback), through pods/portforward over WebSocket (v4.channel.k8s.io: channel 0 data, 1 error, each opened by
 * the server with the port as two little-endian bytes). One WebSocket carries one connection.
 *
 * The stream ends when the far side closes; it errors with KubePortForwardError when the kubelet reports a failure
 * (e.g. nothing listens: `refused`). Ending the writable side does not half-close (the protocol cannot); destroy()
 * closes the tunnel.
 */
export async function openPortForward(
  kubeConfig: KubeConfig,
  namespace: string,
  pod: string,
  port: number,
  options: PortForwardOptions,
): Promise<Duplex> {
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new RangeError(`not a port: ${port}`)
  const prefixPending = [true, true]
  const errorText: Buffer[] = []
  let opened!: () => void
  const firstFrame = new Promise<void>((resolve) => (opened = resolve))
  const early: Buffer[] = []
  // eslint-disable-next-line prefer-const -- assigned once the tunnel exists; the frame handler registered before reads it
  let duplex: Duplex | undefined
  const onFrame = (channel: number, data: Buffer) => {
    if (channel !== DATA && channel !== ERROR) return
    if (prefixPending[channel]) {
      prefixPending[channel] = false
      data = data.subarray(2)
      if (channel === DATA) opened()
    }
    if (data.length === 0) return
    if (channel === ERROR) errorText.push(data)
    else if (duplex) duplex.push(data)
    else early.push(data)
  }
  const stream = await openPodStream(
    kubeConfig,
    {namespace, pod, subresource: 'portforward', query: new URLSearchParams({ports: String(port)})},
    options,
    onFrame,
  )
  const closedBeforeOpen = () =>
    stream.fail(
      new KubePortForwardError(
        port,
        Buffer.concat(errorText).toString('utf8') || 'the tunnel closed before it opened',
        false,
      ),
    )
  stream.socket.on('close', closedBeforeOpen)
  await Promise.race([firstFrame, stream.failed])
  stream.socket.off('close', closedBeforeOpen)
  stream.finish()
  const {socket} = stream
  const tunnel = new Duplex({
    read() {},
    write(chunk: Buffer, _encoding, callback) {
      if (socket.readyState !== 1) return callback(new KubePortForwardError(port, 'the tunnel is closed', false))
      socket.send(Buffer.concat([Buffer.from([DATA]), chunk]), callback)
    },
    final(callback) {
      callback()
    },
    destroy(error, callback) {
      socket.terminate()
      callback(error)
    },
  })
  duplex = tunnel
  for (const chunk of early.splice(0)) tunnel.push(chunk)
  const onAbort = () => tunnel.destroy(new KubePortForwardError(port, 'cancelled', false))
  options.signal?.addEventListener('abort', onAbort, {once: true})
  const closed = () => {
    options.signal?.removeEventListener('abort', onAbort)
    const message = Buffer.concat(errorText).toString('utf8')
    if (message) tunnel.destroy(new KubePortForwardError(port, message, /connection refused/i.test(message)))
    else tunnel.push(null)
  }
  if (socket.readyState === 3) closed()
  else socket.on('close', closed)
  return tunnel
}
