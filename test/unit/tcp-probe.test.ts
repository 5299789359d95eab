import {test} from 'node:test'
import assert from 'node:assert/strict'
import {connect, createServer, type AddressInfo, type Server} from 'node:net'
import type {Duplex} from 'node:stream'
import {classifyOpenError, probeOpener, probeTargets, type OpenTcp} from '../../src/node/probe/tcp-probe.js'
import {lateTimeout} from '../../src/util/late-timeout.js'
import type {NodeAccess, TcpOpen} from '../../src/node/transport/node-access.js'
import {planProbes, probesOfFamily} from '../../src/diagnosis/probe-plan.js'
import {offlineCluster} from '../helpers/offline-cluster.js'
import {labPods} from '../fixtures/lab-cluster.js'

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
  const denied: OpenTcp = () =>
    Promise.reject(new Error('(SSH) Channel open failure: administratively prohibited: open failed'))
  const [d] = await probeTargets(denied, [{host: '10.0.0.1', port: 80}], {attempts: 3, timeoutMs: 50, concurrency: 1})
  assert.equal(d.attempts, 0)
  assert.match(d.notProbed ?? '', /administratively prohibited/)
})

test('probe errors are classified by what the peer said', () => {
  assert.equal(classifyOpenError(new Error('(SSH) Channel open failure: Connection refused')), 'refused')
  assert.equal(classifyOpenError(new Error('connect ECONNREFUSED 127.0.0.1:9')), 'refused')
  assert.equal(classifyOpenError(new Error('(SSH) Channel open failure: No route to host')), 'unreachable')
  assert.equal(classifyOpenError(new Error('(SSH) Channel open failure: open failed')), 'not-probed')
  assert.equal(
    classifyOpenError(
      new Error(
        "the node's sshd would not open a connection to 10.0.0.1:80 (administratively prohibited: forwarding is off, or its connect() failed at once)",
      ),
    ),
    'not-probed',
  )
  assert.equal(
    classifyOpenError(
      new Error('port forward from the node to 10.0.0.1:80 failed: (SSH) Channel open failure: Connection refused'),
    ),
    'refused',
  )
})

test('probes through a NodeAccess keep its typed outcome: a timed-out port forward is a timeout, not "not probed"; "prohibited" is unreachable once other forwards worked', async () => {
  const outcomes: Record<string, TcpOpen> = {
    '10.0.0.1:80': {kind: 'refused', outcome: 'timeout', reason: 'port forward to 10.0.0.1:80 timed out after 1.5s'},
    '10.0.0.2:80': {kind: 'refused', outcome: 'refused', reason: '(SSH) Channel open failure: Connection refused'},
    '10.0.0.3:80': {kind: 'refused', outcome: 'not-probed', reason: 'administratively prohibited'},
  }
  const access = {openTcp: async (host: string, port: number) => outcomes[`${host}:${port}`]} as unknown as NodeAccess
  const tallies = await probeTargets(
    probeOpener(access, 1500),
    ['10.0.0.1', '10.0.0.2', '10.0.0.3'].map((host) => ({host, port: 80, attempts: 2})),
    {attempts: 5, timeoutMs: 2000, concurrency: 2},
  )
  assert.deepEqual(
    tallies.map((t) => [t.target.host, t.attempts, t.connected, t.refused, t.timedOut, t.notProbed ?? null]),
    [
      ['10.0.0.1', 2, 0, 0, 2, null],
      ['10.0.0.2', 2, 0, 2, 0, null],
      ['10.0.0.3', 2, 0, 0, 0, null],
    ],
  )
  assert.equal(
    tallies[2].unreachable,
    2,
    'other forwards worked: the prohibited one is a connect() that failed at once',
  )
  const alone = await probeTargets(probeOpener(access, 1500), [{host: '10.0.0.3', port: 80, attempts: 2}], {
    attempts: 5,
    timeoutMs: 2000,
    concurrency: 2,
  })
  assert.deepEqual(
    alone.map((t) => [t.attempts, t.unreachable, t.notProbed ?? null]),
    [[0, 0, 'administratively prohibited']],
    'nothing forwarded at all: forwarding may be off, nothing was learnt',
  )
})

test('the probe plan: per TCP port the ClusterIP, the NodePort on the node own address, each ready endpoint; none for UDP', () => {
  const {cluster} = offlineCluster({pods: labPods().map((p) => (p.name === 'web-b1' ? {...p, ready: false} : p))})
  const plan = planProbes(cluster, 'node-a')
  assert.deepEqual(
    plan.targets.map((t) => [
      t.kind,
      `${t.host}:${t.port}`,
      t.attempts,
      t.servicePort,
      t.pod ?? null,
      t.podNode ?? null,
    ]),
    [
      ['ClusterIP', '10.96.10.10:80', 8, 'http', null, null],
      ['NodePort', '10.200.0.11:30080', 8, 'http', null, null],
      ['endpoint', '10.244.1.10:8080', 3, 'http', 'web-a1', 'node-a'],
      ['endpoint', '10.244.2.11:8080', 3, 'http', 'web-b2', 'node-b'],
    ],
  )
  assert.deepEqual(plan.notes, [])
  cluster.service.spec!.ports![0].protocol = 'UDP'
  assert.deepEqual(planProbes(cluster, 'node-a').targets, [])
})

test("the probe plan of a dual-stack Service: each family's ClusterIP, the NodePort on the node's address of that family, that family's endpoints; each family judged on its own probes", () => {
  const {cluster} = offlineCluster({dualStack: true})
  const plan = planProbes(cluster, 'node-b')
  assert.deepEqual(
    plan.targets.map((t) => `${t.kind} ${t.host} ${t.port}`),
    [
      'ClusterIP 10.96.10.10 80',
      'NodePort 10.200.0.12 30080',
      'endpoint 10.244.1.10 8080',
      'endpoint 10.244.2.10 8080',
      'endpoint 10.244.2.11 8080',
      'ClusterIP fd00:10:96::10:10 80',
      'NodePort fd00:10:200::12 30080',
      'endpoint fd00:10:244:1::10 8080',
      'endpoint fd00:10:244:2::10 8080',
      'endpoint fd00:10:244:2::11 8080',
    ],
  )
  const tally = (host: string) => ({
    target: {kind: 'ClusterIP' as const, host, port: 80, servicePort: 'http'},
    attempts: 8,
    connected: 8,
    refused: 0,
    timedOut: 0,
    unreachable: 0,
  })
  const run = {
    ran: true as const,
    settings: {vipAttempts: 8, endpointAttempts: 3, timeoutMs: 1500, concurrency: 8},
    notes: [],
    nodes: [{node: 'node-b', via: 'x', tallies: [tally('10.96.10.10'), tally('fd00:10:96::10:10')]}],
  }
  const hosts = (r: ReturnType<typeof probesOfFamily>) =>
    r.ran ? r.nodes.flatMap((n) => n.tallies.map((t) => t.target.host)) : []
  assert.deepEqual(
    [hosts(probesOfFamily(run, 4)), hosts(probesOfFamily(run, 6))],
    [['10.96.10.10'], ['fd00:10:96::10:10']],
  )
})

test('a probe whose answer came while the doctor was not scheduled is not counted as timed out', async () => {
  const server = createServer((s) => s.end())
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  try {
    const race = async (expired: Promise<'timeout'>) => {
      const connected = new Promise<'connected'>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1', () => {
          socket.destroy()
          resolve('connected')
        }).on('error', reject)
      })
      // The process is busy past the timeout while the connection is made in the kernel.
      const until = Date.now() + 150
      while (Date.now() < until);
      return Promise.race([connected, expired])
    }
    const late = lateTimeout(20)
    assert.equal(await race(late.expired), 'connected')
    late.cancel()
    // A plain timer fires before the socket is polled: what the probes did before.
    let timer: NodeJS.Timeout | undefined
    assert.equal(
      await race(new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), 20)))),
      'timeout',
    )
    clearTimeout(timer)
  } finally {
    server.close()
  }
})
