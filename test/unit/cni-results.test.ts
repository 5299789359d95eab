/**
 * Hairpin without the FDB: libcni's result cache (/var/lib/cni/results) maps each pod IP to its host veth, so an idle
 * backend (its FDB and neighbour entries expired) with hairpin off is still an error naming the pod and its port.
 */
import assert from 'node:assert/strict'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {test} from 'node:test'
import {parseCniResults} from '../../src/parse/cni-results.js'
import {parseBridgeState, withCniResults} from '../../src/parse/bridge-state.js'
import {NODE_FILES, type NodeRecording} from '../../src/node/read/node-files.js'
import {parseNodeRecording} from '../../src/node/read/recording.js'
import {readNodeBundle, writeNodeRecording} from '../../src/node/read/bundle.js'
import {SnapshotNodeAccess} from '../../src/node/transport/snapshot-transport.js'
import {PodExecNodeAccess} from '../../src/node/transport/pod/pod-exec-transport.js'
import type {KubeConfig} from '@kubernetes/client-node'
import {buildCommandLine} from '../../src/node/node-commands.js'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {cniCacheFile, cniCacheGrep} from '../fixtures/api-objects.js'
import {labPods} from '../fixtures/lab-cluster.js'
import {offlineCluster} from '../helpers/offline-cluster.js'

const [webA1, webB1, webB2] = labPods()
const DIR = '/var/lib/cni/results'

/** A dual-stack bridge attachment (cbr0, host veth, pod eth0), pretty-printed: two IPs on eth0, the bridge's own address on cbr0. */
const DUAL_STACK = JSON.stringify(
  {
    kind: 'cniCacheV1',
    containerId: 'c0ffee',
    ifName: 'eth0',
    networkName: 'k8s-pod-network',
    result: {
      cniVersion: '1.0.0',
      interfaces: [
        {name: 'cni0', mac: 'aa:00:00:00:00:01'},
        {name: 'veth1a2b3c4d', mac: 'aa:00:00:00:00:02'},
        {name: 'eth0', mac: 'aa:00:00:00:00:03', sandbox: '/var/run/netns/cni-1'},
      ],
      ips: [
        {address: '10.244.3.7/24', gateway: '10.244.3.1', interface: 2},
        {address: 'fd00:10:244:3::7/64', gateway: 'fd00:10:244:3::1', interface: 2},
        {address: '10.244.3.1/24', interface: 0},
      ],
    },
  },
  null,
  2,
)

const NETWORK = (ports: string[], hairpinOff: string[] = []) =>
  [
    '## hairpin',
    ...ports.map((p) => `/sys/class/net/cni0/brif/${p}/hairpin_mode ${hairpinOff.includes(p) ? 0 : 1}`),
    '## links',
    '## neigh',
    '## fdb',
  ].join('\n')

test('the read is one program with fixed arguments, under sudo for a user that is not root', () => {
  assert.equal(buildCommandLine('cniResults', true), 'grep -r -H -s . /var/lib/cni/results')
  assert.equal(buildCommandLine('cniResults', false), 'sudo -n grep -r -H -s . /var/lib/cni/results')
})

test('parser: a bridge plugin result (one line, as libcni writes it) gives the pod IP and the host-side interfaces', () => {
  const f = cniCacheFile(webB1, '10.244.2.1')
  const r = parseCniResults(cniCacheGrep([f]))
  assert.deepEqual(r.ignored, [])
  assert.deepEqual(r.attachments, [
    {
      file: f.name,
      containerId: f.name.slice(5, 69),
      network: 'cbr0',
      ifName: 'eth0',
      podIps: ['10.244.2.10'],
      hostInterfaces: ['cbr0', 'vweb-b1'],
    },
  ])
})

test('parser: pretty-printed, several IPs, IPv6 in canonical spelling, an address on the bridge left out', () => {
  const r = parseCniResults(cniCacheGrep([{name: 'k8s-pod-network-c0ffee-eth0', json: DUAL_STACK}]))
  assert.deepEqual(r.ignored, [])
  assert.deepEqual(r.attachments[0].podIps, ['10.244.3.7', 'fd00:10:244:3::7'])
  assert.deepEqual(r.attachments[0].hostInterfaces, ['cni0', 'veth1a2b3c4d'])
})

test('parser: truncated, garbage, foreign, pre-0.3.0 or oddly named files are skipped with a reason, never a crash', () => {
  const good = cniCacheFile(webB2, '10.244.2.1')
  const text = [
    `${DIR}/cbr0-trunc-eth0:${good.json.slice(0, 120)}`,
    `${DIR}/cbr0-garbage-eth0:\u0000\u0001 not json at all`,
    `${DIR}/cbr0-array-eth0:[1,2,3]`,
    `${DIR}/cbr0-other-eth0:{"kind":"somethingElse"}`,
    `${DIR}/cbr0-old-eth0:{"kind":"cniCacheV1","containerId":"x","ifName":"eth0","networkName":"cbr0","result":{"ip4":{"ip":"10.244.2.9/24"}}}`,
    `${DIR}/sub/dir:{"kind":"cniCacheV1"}`,
    'grep: /var/lib/cni/results/x: Permission denied',
    'Binary file /var/lib/cni/results/bin matches',
    cniCacheGrep([good]).trimEnd(),
  ].join('\n')
  const r = parseCniResults(text)
  assert.deepEqual(
    r.attachments.map((a) => a.podIps),
    [['10.244.2.11']],
  )
  assert.deepEqual(
    r.ignored.map((i) => [i.file, i.reason.replace(/\(.*\)$/, '(…)')]),
    [
      ['cbr0-trunc-eth0', 'not JSON (…)'],
      ['cbr0-garbage-eth0', 'not JSON (…)'],
      ['cbr0-array-eth0', 'not a JSON object'],
      ['cbr0-other-eth0', 'kind "somethingElse", not cniCacheV1'],
      ['cbr0-old-eth0', 'the result has no interfaces or ips (…)'],
      ['"sub/dir"', 'not a libcni cache file name (…)'],
    ],
  )
  assert.deepEqual(parseCniResults(''), {attachments: [], ignored: []})
})

test('mapping: the cache maps an idle pod (no fdb) to its bridge port; the fdb maps the rest; a contested IP is left to the fdb', () => {
  const state = parseBridgeState(
    NETWORK(['vweb-b1', 'vweb-b2']).replace(
      '## fdb',
      '10.244.2.11 dev cni0 lladdr 02:00:00:00:01:11 REACHABLE\n## fdb\n02:00:00:00:01:11 dev vweb-b2 master cni0',
    ),
  )
  const files = [cniCacheFile(webB1, '10.244.2.1')]
  const mapped = withCniResults(state, parseCniResults(cniCacheGrep(files)))
  assert.deepEqual(
    [...mapped.portOfIp],
    [
      ['10.244.2.11', 'vweb-b2'],
      ['10.244.2.10', 'vweb-b1'],
    ],
  )
  assert.equal(mapped.mappedBy.get('10.244.2.10'), `10.244.2.10 → vweb-b1: CNI result cache (${DIR}/${files[0].name})`)
  assert.equal(mapped.mappedBy.get('10.244.2.11'), '10.244.2.11 → vweb-b2: neighbour + fdb (MAC 02:00:00:00:01:11)')
  // A stale file claiming the same address on another port: neither wins.
  const stale = {...cniCacheFile({...webB2, ip: webB1.ip}, '10.244.2.1'), name: 'cbr0-stale-eth0'}
  const contested = withCniResults(state, parseCniResults(cniCacheGrep([...files, stale])))
  assert.equal(contested.portOfIp.has('10.244.2.10'), false)
  assert.match(contested.cniNotes!.join('\n'), /10\.244\.2\.10 is claimed by .* \(a stale file\?\): left to the fdb/)
})

test('an idle backend with hairpin off, mapped through the cache: KPD-HAIRPIN-OFF names the pod, the port and how it was mapped', () => {
  const noFdb = {'node-b': (t: string) => t.replace(/## neigh[\s\S]*$/, '## neigh\n## fdb\n')}
  const {cluster, observations} = offlineCluster({
    hairpinOff: ['web-b1'],
    editNetwork: noFdb,
    cniCache: {'node-b': (t) => t},
  })
  const f = diagnose(cluster, observations).findings.filter((x) => x.code.startsWith('KPD-HAIRPIN'))
  assert.deepEqual(
    f.map((x) => [x.code, x.severity, x.message, x.evidence]),
    [
      [
        'KPD-HAIRPIN-OFF',
        'error',
        'node-b: pod web-b1 sits on cbr0 port vweb-b1 with hairpin_mode 0 (bridge not promiscuous): it cannot reach itself through the Service',
        [
          '/sys/class/net/cbr0/brif/vweb-b1/hairpin_mode = 0',
          `pod 10.244.2.10 → vweb-b1: CNI result cache (${DIR}/${cniCacheFile(webB1, '10.244.2.1').name})`,
        ],
      ],
    ],
  )
  // Without the cache, the same node is only the warning (the old behaviour, kept as the fallback).
  const without = offlineCluster({hairpinOff: ['web-b1'], editNetwork: noFdb})
  assert.deepEqual(
    diagnose(without.cluster, without.observations)
      .findings.filter((x) => x.code.startsWith('KPD-HAIRPIN'))
      .map((x) => [x.code, x.severity]),
    [['KPD-HAIRPIN-UNMAPPED', 'warning']],
  )
  // With the fdb (a busy pod), the evidence says the fdb mapped it.
  const busy = offlineCluster({hairpinOff: ['web-b1']})
  assert.deepEqual(
    diagnose(busy.cluster, busy.observations).findings.find((x) => x.code === 'KPD-HAIRPIN-OFF')?.evidence?.[1],
    'pod 10.244.2.10 → vweb-b1: neighbour + fdb (MAC 02:00:00:00:01:10)',
  )
})

test('snapshot: collect records cni-results.txt; the bundle and the snapshot transport give it back', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpd-cni-'))
  try {
    const grep = cniCacheGrep([cniCacheFile(webB1, '10.244.2.1'), cniCacheFile(webA1, '10.244.1.1')])
    const rec: NodeRecording = new Map([
      [NODE_FILES.iptablesSave, Buffer.from('*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n')],
      [NODE_FILES.network, Buffer.from(NETWORK(['vweb-b1'], ['vweb-b1']).replaceAll('cni0', 'cbr0'))],
      [NODE_FILES.cniResults, Buffer.from(grep)],
    ])
    writeNodeRecording(dir, rec)
    const obs = readNodeBundle(dir, 'node-b')
    assert.deepEqual([...obs.network!.portOfIp], [['10.244.2.10', 'vweb-b1']])
    const r = await SnapshotNodeAccess.fromFolder(dir).run('cniResults')
    assert.equal(r.kind === 'ran' && r.stdout.toString(), grep)
    // A bundle without the file: the fdb only, and said.
    rec.delete(NODE_FILES.cniResults)
    assert.deepEqual(parseNodeRecording('node-b', rec).network!.cniNotes, [
      'CNI result cache (/var/lib/cni/results) not read',
    ])
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})

test("kube-proxy's Pod: the cache is not read (the node's /var/lib/cni is not mounted there), no exec is made, and it is listed as not read", async () => {
  const access = new PodExecNodeAccess(
    undefined as unknown as KubeConfig,
    {namespace: 'kube-system', name: 'kube-proxy-a', container: 'kube-proxy'},
    1000,
  )
  const r = await access.run('cniResults')
  assert.deepEqual(r, {
    kind: 'not-recorded',
    what: "/var/lib/cni/results (the CNI result cache) is not mounted in kube-proxy's Pod",
  })
  assert.deepEqual(access.notes().missingTools, [
    "/var/lib/cni/results (the CNI result cache) is not mounted in kube-proxy's Pod: pods mapped to bridge ports through fdb and neighbour entries only (they expire on idle Pods)",
  ])
})
