/** `cilium-dbg service list -o json` as recorded on the lab's nodes, parsed exactly; what is not that list, refused. */
import assert from 'node:assert/strict'
import {test} from 'node:test'
import {parseCiliumServices, type CiliumBackend} from '../../src/parse/cilium-services.js'
import {ParseError} from '../../src/parse/parse-error.js'
import {ciliumServiceList} from '../fixtures/cilium-services.js'

const web: CiliumBackend[] = [
  {ip: '10.244.1.10', port: 8080, state: 'active', nodeName: 'node-a', weight: 100},
  {ip: '10.244.2.10', port: 8080, state: 'active', nodeName: 'node-b', weight: 100},
  {ip: '10.244.2.11', port: 8080, state: 'active', nodeName: 'node-b', weight: 100},
]
const dns = [{ip: '10.244.1.53', port: 53, state: 'active', nodeName: 'node-a', weight: 100}]
const webFront = (id: number, ip: string, type: string, backends: CiliumBackend[] = web) => ({
  id,
  ip,
  port: type === 'NodePort' ? 30080 : 80,
  protocol: 'tcp',
  type,
  namespace: 'shop',
  name: 'web',
  backends,
})

test("node-b's healthy list: every frontend, its type, Service and backends with their states", () => {
  assert.deepEqual(parseCiliumServices(ciliumServiceList('node-b')), [
    {
      id: 1,
      ip: '10.96.0.1',
      port: 443,
      protocol: 'tcp',
      type: 'ClusterIP',
      namespace: 'default',
      name: 'kubernetes',
      backends: [{ip: '10.200.0.10', port: 6443, state: 'active', weight: 100}],
    },
    {
      id: 2,
      ip: '10.96.0.10',
      port: 53,
      protocol: 'udp',
      type: 'ClusterIP',
      namespace: 'kube-system',
      name: 'kube-dns',
      backends: dns,
    },
    {
      id: 3,
      ip: '10.96.0.10',
      port: 53,
      protocol: 'tcp',
      type: 'ClusterIP',
      namespace: 'kube-system',
      name: 'kube-dns',
      backends: dns,
    },
    webFront(4, '10.96.10.10', 'ClusterIP'),
    webFront(5, '10.200.0.12', 'NodePort'),
    webFront(6, '0.0.0.0', 'NodePort'),
  ])
})

test('a missing backend, a stale one, a state, and no frontend: as recorded', () => {
  const list = parseCiliumServices(
    ciliumServiceList('node-a', {
      dropFrontends: ['NodePort'],
      dropBackends: ['10.244.2.11'],
      extraBackends: [{ip: '10.244.2.99', port: 8080}],
      states: {'10.244.2.10': 'terminating'},
    }),
  )
  assert.deepEqual(
    list.filter((f) => f.name === 'web'),
    [
      webFront(4, '10.96.10.10', 'ClusterIP', [
        web[0],
        {...web[1], state: 'terminating'},
        {ip: '10.244.2.99', port: 8080, state: 'active', weight: 100},
      ]),
    ],
  )
})

test('an agent before backend states: every backend active', () => {
  const list = parseCiliumServices(ciliumServiceList('node-a', {noStates: true}))
  assert.deepEqual(new Set(list.flatMap((f) => f.backends.map((b) => b.state))), new Set(['active']))
})

test('an agent with no Service prints null: no frontend', () => {
  assert.deepEqual(parseCiliumServices('null\n'), [])
  assert.deepEqual(parseCiliumServices('[]'), [])
})

test('what is not the list is refused with one line naming the command', () => {
  const cases: Array<[string, RegExp]> = [
    ['Error: cannot reach agent', /^cilium-dbg service list -o json not JSON$/],
    ['{"spec": {}}', /not a list of services$/],
    ['[{"status": {}}]', /service 1: no spec$/],
    [
      '[{"spec": {"frontend-address": {"ip": "10.96.0.1", "port": 70000}}}]',
      /service 1 frontend: port 70000 is not a port number$/,
    ],
    [
      '[{"spec": {"frontend-address": {"ip": "10.96.0.1", "port": 80}, "backend-addresses": [{"port": 80}]}}]',
      /service 1 backend 1: no ip$/,
    ],
    [`${'['.repeat(40)}${']'.repeat(40)}`, /nests deeper than 16$/],
  ]
  for (const [text, message] of cases)
    assert.throws(
      () => parseCiliumServices(text),
      (e: unknown) => e instanceof ParseError && message.test(e.message),
    )
})
