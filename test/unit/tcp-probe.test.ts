import {test} from 'node:test'
import assert from 'node:assert/strict'
import {connect, createServer, type AddressInfo, type Server} from 'node:net'
import type {Duplex} from 'node:stream'
import {classifyOpenError, probeTargets, type OpenTcp} from '../../src/node/tcp-probe.js'

/** A real TCP connect from this process, standing in for a connection the node's transport opens. */
const openLocal: OpenTcp = (host, port) =>
  new Promise<Duplex>((resolve, reject) => {
    const s = connect({host, port})
    s.once('connect', () => resolve(s))
    s.once('error', reject)
  })

function listen(): Promise<Server> {
  return new Promise((resolve) => {
    const srv = createServer((c) => c.destroy())
    srv.listen(0, '127.0.0.1', () => resolve(srv))
  })
}

test('probes: a listener connects, a closed port is refused, counts are per attempt', async () => {
  const up = await listen()
  const closed = await listen()
  const closedPort = (closed.address() as AddressInfo).port
  await new Promise<void>((r) => closed.close(() => r()))
  try {
    const [ok, refused] = await probeTargets(
      openLocal,
      [
        {host: '127.0.0.1', port: (up.address() as AddressInfo).port},
        {host: '127.0.0.1', port: closedPort},
      ],
      {attempts: 4, timeoutMs: 2000, concurrency: 3},
    )
    assert.deepEqual([ok.attempts, ok.connected, ok.refused, ok.timedOut], [4, 4, 0, 0])
    assert.deepEqual([refused.attempts, refused.connected, refused.refused, refused.timedOut], [4, 0, 4, 0])
  } finally {
    up.close()
  }
})

test('probes: an open that never answers is a timeout; a transport that will not forward is not probed, not a failure', async () => {
  const hung: OpenTcp = () => new Promise<Duplex>(() => undefined)
  const [t] = await probeTargets(hung, [{host: '10.0.0.1', port: 80}], {attempts: 2, timeoutMs: 50, concurrency: 2})
  assert.deepEqual([t.attempts, t.timedOut, t.connected], [2, 2, 0])
  const denied: OpenTcp = () => Promise.reject(new Error('(SSH) Channel open failure: administratively prohibited: open failed'))
  const [d] = await probeTargets(denied, [{host: '10.0.0.1', port: 80}], {attempts: 3, timeoutMs: 50, concurrency: 1})
  assert.equal(d.attempts, 0)
  assert.match(d.notProbed ?? '', /administratively prohibited/)
})

test('probe errors are classified by what the peer said', () => {
  assert.equal(classifyOpenError(new Error('(SSH) Channel open failure: Connection refused')), 'refused')
  assert.equal(classifyOpenError(new Error('connect ECONNREFUSED 127.0.0.1:9')), 'refused')
  assert.equal(classifyOpenError(new Error('(SSH) Channel open failure: No route to host')), 'unreachable')
  assert.equal(classifyOpenError(new Error('(SSH) Channel open failure: open failed')), 'not-probed')
})
