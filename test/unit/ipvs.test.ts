import assert from 'node:assert/strict'
import {describe, test} from 'node:test'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {parseDeviceAddresses, parseIpvsadm} from '../../src/parse/ipvsadm.js'
import {offlineCluster, type OfflineOptions} from '../helpers/offline-cluster.js'
import {kubeProxyIpvsTexts} from '../lab/kube-proxy-ipvs.js'
import {NODES, SERVICES, labPods} from '../lab/lab-cluster.js'

const run = (opts: OfflineOptions) => {
  const {cluster, observations} = offlineCluster(opts)
  return diagnose(cluster, observations)
}

describe('IPVS mode (recorded ipvsadm, ipset, ip addr, sysctl output)', () => {
  test('ipvsadm -Sn and -Ln give the same virtual and real servers', () => {
    const t = kubeProxyIpvsTexts(NODES[0], SERVICES, labPods())
    const strip = (x: ReturnType<typeof parseIpvsadm>) => x.map((v) => ({...v, line: 0, text: '', reals: v.reals.map((r) => ({...r, line: 0, text: ''}))}))
    assert.deepEqual(strip(parseIpvsadm(t.ipvsadmList)), strip(parseIpvsadm(t.ipvsadmSave)))
    const web = parseIpvsadm(t.ipvsadmList).find((v) => v.address === '10.96.10.10')!
    assert.deepEqual(
      web.reals.map((r) => `${r.address}:${r.port} ${r.forward} ${r.weight}`),
      ['10.244.1.10:8080 Masq 1', '10.244.2.10:8080 Masq 1', '10.244.2.11:8080 Masq 1'],
    )
    assert.deepEqual(parseDeviceAddresses(t.kubeIpvs0), ['10.96.10.10', '10.96.0.10'])
    const persistent = parseIpvsadm('TCP  10.0.0.1:80 rr persistent 10800\n  -> 10.1.1.1:80                  Masq    0      3          1\n')[0]
    assert.equal(persistent.persistent, 10800)
    assert.equal(persistent.reals[0].weight, 0)
    assert.throws(() => parseIpvsadm('hello\n'), /line 1: not ipvsadm output/)
  })

  test('healthy IPVS node: no finding, every path ✓ through IPVS, mode reported', () => {
    const d = run({ipvs: {'node-b': {}}})
    assert.deepEqual(
      d.findings.map((f) => `${f.code}@${f.node}`),
      ['KPD-MODE-MIXED@node-b', 'KPD-MODE-MISMATCH@node-b'],
    )
    const b = d.context.nodes.find((n) => n.name === 'node-b')!
    assert.equal(b.mode.mode, 'ipvs')
    const paths = d.paths.filter((p) => p.node === 'node-b')
    assert.ok(paths.length >= 4)
    for (const p of paths) assert.equal(p.ok, true, `${p.entry}: ${p.breaksAt} ${p.detail}`)
    const cluster = paths.find((p) => p.entry === 'pod→ClusterIP')!
    assert.deepEqual(cluster.trace.destinations, ['10.244.1.10:8080', '10.244.2.10:8080', '10.244.2.11:8080'])
    assert.ok(cluster.trace.outcomes.every((o) => o.steps.some((s) => s.table === 'ipvs')))
    const nodePort = paths.find((p) => p.entry === 'outside→NodePort')!
    assert.ok(
      nodePort.trace.outcomes.every((o) => o.masquerade),
      'NodePort traffic is marked (KUBE-NODE-PORT-TCP) and masqueraded',
    )
    const self = paths.find((p) => p.entry === 'pod→itself')!
    assert.equal(self.trace.outcomes.find((o) => o.destination === '10.244.2.10:8080')?.masquerade, true, 'KUBE-LOOP-BACK masquerades hairpin')
  })

  const CASES: Array<{name: string; opts: OfflineOptions; expect: string[]; breaks?: [string, string]}> = [
    {name: 'real server missing', opts: {ipvs: {'node-b': {omitRealServer: '10.244.1.10'}}}, expect: ['KPD-SEP-MISSING@node-b'], breaks: ['pod→ClusterIP', 'KUBE-SVC']},
    {name: 'stale real server', opts: {ipvs: {'node-b': {staleRealServer: {ip: '10.244.9.9', port: 8080}, list: true}}}, expect: ['KPD-SEP-STALE@node-b'], breaks: ['pod→ClusterIP', 'DNAT']},
    {name: 'weight stuck at 0', opts: {ipvs: {'node-b': {weightZeroFor: '10.244.2.11'}}}, expect: ['KPD-IPVS-WEIGHT-ZERO@node-b'], breaks: ['pod→ClusterIP', 'KUBE-SVC']},
    {name: 'real server on the wrong port', opts: {ipvs: {'node-b': {wrongPortFor: {ip: '10.244.2.10', port: 9999}}}}, expect: ['KPD-DNAT-WRONG@node-b']},
    {name: 'ClusterIP virtual server missing', opts: {ipvs: {'node-b': {omitClusterVs: true}}}, expect: ['KPD-SVC-RULE-MISSING@node-b']},
    {name: 'NodePort virtual server missing', opts: {ipvs: {'node-b': {omitNodePortVs: true}}}, expect: ['KPD-NODEPORT-MISSING@node-b']},
    {name: 'VIP not on kube-ipvs0', opts: {ipvs: {'node-b': {unbindVip: '10.96.10.10'}}}, expect: ['KPD-IPVS-VIP-UNBOUND@node-b']},
    {name: 'KUBE-CLUSTER-IP lacks the service', opts: {ipvs: {'node-b': {omitIpsetMember: {set: 'KUBE-CLUSTER-IP', member: '10.96.10.10,tcp:80'}}}}, expect: ['KPD-IPVS-IPSET-MISSING@node-b']},
    {
      name: 'KUBE-NODE-PORT-TCP lacks the node port',
      opts: {ipvs: {'node-b': {omitIpsetMember: {set: 'KUBE-NODE-PORT-TCP', member: '30080'}}}},
      expect: ['KPD-IPVS-IPSET-MISSING@node-b'],
      breaks: ['outside→NodePort', 'POSTROUTING'],
    },
    {name: 'KUBE-LOOP-BACK empty: hairpin unmasqueraded', opts: {ipvs: {'node-b': {omitLoopBack: true}}}, expect: ['KPD-MASQ-MISSING@node-b'], breaks: ['pod→itself', 'POSTROUTING']},
    {name: 'vs.conntrack off', opts: {ipvs: {'node-b': {sysctl: {'net.ipv4.vs.conntrack': '0'}}}}, expect: ['KPD-IPVS-SYSCTL@node-b']},
    {name: 'strictARP without arp_ignore', opts: {strictARP: true, ipvs: {'node-b': {}}}, expect: ['KPD-IPVS-SYSCTL@node-b']},
  ]
  for (const c of CASES) {
    test(c.name, () => {
      const d = run(c.opts)
      const got = d.findings.map((f) => `${f.code}@${f.node ?? '-'}`)
      for (const want of c.expect) assert.ok(got.includes(want), `expected ${want}, got ${got.join(', ')}`)
      assert.ok(!got.some((g) => g.endsWith('@node-a') && !g.startsWith('KPD-NODE-DIVERGES')), `node-a is healthy: ${got}`)
      if (c.breaks) {
        const p = d.paths.find((x) => x.node === 'node-b' && x.entry === c.breaks![0])!
        assert.equal(p.breaksAt, c.breaks[1], p.detail)
      }
      for (const f of d.findings.filter((x) => x.node === 'node-b' && x.severity === 'error'))
        assert.ok(f.evidence.length > 0 || /ipvsadm|ipset|kube-ipvs0|sysctl/.test(f.command ?? ''), `${f.code} shows its evidence or where to look`)
    })
  }
})
