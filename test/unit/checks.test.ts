import assert from 'node:assert/strict'
import {describe, test} from 'node:test'
import {CHECKS} from '../../src/checks/index.js'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {labPods} from '../lab/lab-cluster.js'
import {offlineCluster, type OfflineOptions} from '../helpers/offline-cluster.js'

interface Case {
  name: string
  opts: () => OfflineOptions
  /** Every code@node that must be reported (node "-" for cluster-wide). */
  expect: string[]
  /** Codes that must stay silent in this case. */
  silent?: string[]
}

const notReady = (...names: string[]) => labPods().map((p) => (names.includes(p.name) ? {...p, ready: false} : p))

const CASES: Case[] = [
  {name: 'DNAT rule deleted from one SEP', opts: () => ({faults: {'node-b': {dropDnatFor: '10.244.1.10'}}}), expect: ['KPD-SEP-MISSING@node-b'], silent: ['KPD-SEP-STALE']},
  {name: 'endpoint left out of KUBE-SVC', opts: () => ({faults: {'node-a': {omitEndpoint: '10.244.2.11'}}}), expect: ['KPD-SEP-MISSING@node-a', 'KPD-NODE-DIVERGES@node-a']},
  {name: 'stale endpoint', opts: () => ({faults: {'node-a': {staleEndpoint: {ip: '10.244.9.9', port: 8080}}}}), expect: ['KPD-SEP-STALE@node-a'], silent: ['KPD-SEP-MISSING', 'KPD-PROBABILITY-WRONG']},
  {name: 'wrong DNAT port', opts: () => ({faults: {'node-b': {wrongPortFor: {ip: '10.244.2.10', port: 9999}}}}), expect: ['KPD-DNAT-WRONG@node-b'], silent: ['KPD-SEP-STALE']},
  {name: 'NodePorts missing', opts: () => ({faults: {'node-a': {omitNodePorts: true}}}), expect: ['KPD-NODEPORT-MISSING@node-a'], silent: ['KPD-SVC-RULE-MISSING']},
  {name: 'PREROUTING unhooked', opts: () => ({faults: {'node-b': {unhookPrerouting: true}}}), expect: ['KPD-HOOK-MISSING@node-b']},
  {name: 'MASQUERADE missing', opts: () => ({faults: {'node-a': {omitMasquerade: true}}}), expect: ['KPD-MASQ-MISSING@node-a']},
  {name: 'hairpin off', opts: () => ({hairpinOff: ['web-b1']}), expect: ['KPD-HAIRPIN-OFF@node-b'], silent: ['KPD-HAIRPIN-UNMAPPED']},
  {name: 'all backends not ready', opts: () => ({pods: notReady('web-a1', 'web-b1', 'web-b2')}), expect: ['KPD-NO-READY-ENDPOINTS@-'], silent: ['KPD-SEP-MISSING', 'KPD-REJECT-STALE']},
  {name: 'one backend not ready', opts: () => ({pods: notReady('web-b2')}), expect: ['KPD-ENDPOINT-NOT-READY@node-b'], silent: ['KPD-NO-READY-ENDPOINTS', 'KPD-SEP-STALE']},
  {
    name: 'selector matches nothing',
    opts: () => ({pods: labPods().map((p) => (p.kind === 'web' ? {...p, labels: {app: 'webb'}} : p))}),
    expect: ['KPD-SELECTOR-NO-PODS@-'],
    silent: ['KPD-NO-READY-ENDPOINTS'],
  },
  {name: 'named targetPort missing on pods', opts: () => ({pods: labPods().map((p) => (p.name === 'web-a1' ? {...p, portName: 'web'} : p))}), expect: ['KPD-TARGETPORT-NOT-EXPOSED@-']},
  {name: 'DNS answers NXDOMAIN on one node', opts: () => ({dns: {'node-b': {addresses: [], rcode: 'NXDOMAIN'}}}), expect: ['KPD-DNS-NO-ANSWER@node-b']},
  {name: 'DNS answers the wrong address', opts: () => ({dns: {'node-a': {addresses: ['10.96.99.99']}}}), expect: ['KPD-DNS-NO-ANSWER@node-a']},
  {
    name: 'IPVS node: not judged as iptables, said so',
    opts: () => ({
      dumpFor: {
        'node-b': [
          '*nat',
          ':PREROUTING ACCEPT [0:0]',
          ':KUBE-SERVICES - [0:0]',
          ':KUBE-NODE-PORT - [0:0]',
          ':KUBE-MARK-MASQ - [0:0]',
          '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
          '-A KUBE-SERVICES -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP src,dst -j KUBE-MARK-MASQ',
          '-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT',
          'COMMIT',
          '',
        ].join('\n'),
      },
    }),
    expect: ['KPD-MODE-UNSUPPORTED@node-b'],
    silent: ['KPD-SVC-RULE-MISSING', 'KPD-HOOK-MISSING', 'KPD-MASQ-MISSING'],
  },
  {
    name: 'externalTrafficPolicy Local: a local endpoint missing from KUBE-SVL',
    opts: () => ({web: {externalTrafficPolicy: 'Local'}, faults: {'node-b': {omitEndpoint: '10.244.2.11'}}}),
    expect: ['KPD-SEP-MISSING@node-b'],
  },
  {name: 'ClientIP affinity asked for but not programmed', opts: () => ({web: {affinitySeconds: 10800}, faults: {'node-a': {omitAffinity: true}}}), expect: ['KPD-AFFINITY-MISMATCH@node-a']},
  {name: 'DNS pods not ready', opts: () => ({pods: notReady('coredns-a')}), expect: ['KPD-DNS-NO-ENDPOINTS@-']},
]

const found = (opts: OfflineOptions) => {
  const {cluster, observations} = offlineCluster(opts)
  return diagnose(cluster, observations).findings
}

describe('checks', () => {
  test('healthy lab: no finding at all', () => {
    assert.deepEqual(
      found({}).map((f) => `${f.code}@${f.node}`),
      [],
    )
  })

  for (const c of CASES) {
    test(c.name, () => {
      const findings = found(c.opts())
      const got = findings.map((f) => `${f.code}@${f.node ?? '-'}`)
      for (const want of c.expect) assert.ok(got.includes(want), `expected ${want}, got ${got.join(', ')}`)
      for (const code of c.silent ?? []) assert.ok(!findings.some((f) => f.code === code), `${code} must stay silent, got ${got.join(', ')}`)
      for (const f of findings) {
        assert.ok(f.message.length > 0 && f.hint.length > 0, `${f.code} needs a message and a hint`)
        if (f.node) assert.ok(['node-a', 'node-b'].includes(f.node))
      }
    })
  }

  test('externalTrafficPolicy Local, healthy: local endpoints only, no masquerade, a node without endpoints drops by design', () => {
    const pods = labPods().map((p) => (p.name === 'web-a1' ? {...p, ready: false} : p))
    const {cluster, observations} = offlineCluster({web: {externalTrafficPolicy: 'Local'}, pods})
    const d = diagnose(cluster, observations)
    assert.deepEqual(
      d.findings.filter((f) => f.severity === 'error').map((f) => f.code),
      [],
    )
    const b = d.paths.find((p) => p.node === 'node-b' && p.entry === 'outside→NodePort')!
    assert.equal(b.ok, true, b.detail)
    assert.deepEqual(b.trace.destinations, ['10.244.2.10:8080', '10.244.2.11:8080'])
    assert.ok(
      b.trace.outcomes.every((o) => !o.masquerade),
      'the client address is kept',
    )
    const a = d.paths.find((p) => p.node === 'node-a' && p.entry === 'outside→NodePort')!
    assert.equal(a.ok, null)
    assert.match(a.detail, /by design/)
    assert.equal(a.trace.verdict, 'DROP')
  })

  test('ClientIP affinity programmed as asked: silent, and traces say later packets stick', () => {
    const {cluster, observations} = offlineCluster({web: {affinitySeconds: 10800}})
    const d = diagnose(cluster, observations)
    assert.deepEqual(
      d.findings.map((f) => f.code),
      [],
    )
    const p = d.paths.find((x) => x.node === 'node-a' && x.entry === 'pod→ClusterIP')!
    assert.equal(p.ok, true)
    assert.ok(p.trace.outcomes.every((o) => o.sticky === true))
  })

  test('every check has a stable code, a severity, a title and a hint; codes are unique', () => {
    const codes = CHECKS.map((c) => c.meta.code)
    assert.equal(new Set(codes).size, codes.length)
    for (const c of CHECKS) {
      assert.match(c.meta.code, /^KPD-[A-Z]+(-[A-Z]+)*$/)
      assert.ok(['error', 'warning', 'info'].includes(c.meta.severity))
      assert.ok(c.meta.title && c.meta.hint)
    }
  })

  test('--ignore silences a code', () => {
    const {cluster, observations} = offlineCluster({faults: {'node-a': {omitMasquerade: true}}})
    const d = (ignore: string[]) => diagnose(cluster, observations, {ignore}).findings.map((f) => f.code)
    assert.ok(d([]).includes('KPD-MASQ-MISSING'))
    assert.ok(!d(['KPD-MASQ-MISSING']).includes('KPD-MASQ-MISSING'))
  })
})
