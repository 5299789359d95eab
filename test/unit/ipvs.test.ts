import assert from 'node:assert/strict'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {describe, test} from 'node:test'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {parseDeviceAddresses, parseIpvsadm} from '../../src/parse/ipvsadm.js'
import {offlineCluster, type OfflineOptions} from '../helpers/offline-cluster.js'
import {runCli} from '../helpers/run-cli.js'
import {kubeProxyIpvsTexts} from '../fixtures/kube-proxy-ipvs.js'
import {NODES, SERVICES, dualStackNode, dualStackPods, dualStackService, labPods} from '../fixtures/lab-cluster.js'

const run = (opts: OfflineOptions) => {
  const {cluster, observations} = offlineCluster(opts)
  return diagnose(cluster, observations)
}

describe('IPVS mode (recorded ipvsadm, ipset, ip addr, sysctl output)', () => {
  test('ipvsadm -Sn and -Ln give the same virtual and real servers', () => {
    const t = kubeProxyIpvsTexts(NODES[0], SERVICES, labPods())
    const strip = (x: ReturnType<typeof parseIpvsadm>) =>
      x.map((v) => ({...v, line: 0, text: '', reals: v.reals.map((r) => ({...r, line: 0, text: ''}))}))
    assert.deepEqual(strip(parseIpvsadm(t.ipvsadmList)), strip(parseIpvsadm(t.ipvsadmSave)))
    const web = parseIpvsadm(t.ipvsadmList).find((v) => v.address === '10.96.10.10')!
    assert.deepEqual(
      web.reals.map((r) => `${r.address}:${r.port} ${r.forward} ${r.weight}`),
      ['10.244.1.10:8080 Masq 1', '10.244.2.10:8080 Masq 1', '10.244.2.11:8080 Masq 1'],
    )
    assert.deepEqual(parseDeviceAddresses(t.kubeIpvs0), ['10.96.10.10', '10.96.0.10'])
    const persistent = parseIpvsadm(
      'TCP  10.0.0.1:80 rr persistent 10800\n  -> 10.1.1.1:80                  Masq    0      3          1\n',
    )[0]
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
    assert.equal(
      self.trace.outcomes.find((o) => o.destination === '10.244.2.10:8080')?.masquerade,
      true,
      'KUBE-LOOP-BACK masquerades hairpin',
    )
  })

  const CASES: Array<{name: string; opts: OfflineOptions; expect: string[]; breaks?: [string, string]}> = [
    {
      name: 'real server missing',
      opts: {ipvs: {'node-b': {omitRealServer: '10.244.1.10'}}},
      expect: ['KPD-SEP-MISSING@node-b'],
      breaks: ['pod→ClusterIP', 'service'],
    },
    {
      name: 'stale real server',
      opts: {ipvs: {'node-b': {staleRealServer: {ip: '10.244.9.9', port: 8080}, list: true}}},
      expect: ['KPD-SEP-STALE@node-b'],
      breaks: ['pod→ClusterIP', 'DNAT'],
    },
    {
      name: 'weight stuck at 0',
      opts: {ipvs: {'node-b': {weightZeroFor: '10.244.2.11'}}},
      expect: ['KPD-IPVS-WEIGHT-ZERO@node-b'],
      breaks: ['pod→ClusterIP', 'service'],
    },
    {
      name: 'real server on the wrong port',
      opts: {ipvs: {'node-b': {wrongPortFor: {ip: '10.244.2.10', port: 9999}}}},
      expect: ['KPD-DNAT-WRONG@node-b'],
    },
    {
      name: 'ClusterIP virtual server missing',
      opts: {ipvs: {'node-b': {omitClusterVs: true}}},
      expect: ['KPD-SVC-RULE-MISSING@node-b'],
    },
    {
      name: 'NodePort virtual server missing',
      opts: {ipvs: {'node-b': {omitNodePortVs: true}}},
      expect: ['KPD-NODEPORT-MISSING@node-b'],
    },
    {
      name: 'VIP not on kube-ipvs0',
      opts: {ipvs: {'node-b': {unbindVip: '10.96.10.10'}}},
      expect: ['KPD-IPVS-VIP-UNBOUND@node-b'],
    },
    {
      name: 'KUBE-CLUSTER-IP lacks the service',
      opts: {ipvs: {'node-b': {omitIpsetMember: {set: 'KUBE-CLUSTER-IP', member: '10.96.10.10,tcp:80'}}}},
      expect: ['KPD-IPVS-IPSET-MISSING@node-b'],
    },
    {
      name: 'KUBE-NODE-PORT-TCP lacks the node port',
      opts: {ipvs: {'node-b': {omitIpsetMember: {set: 'KUBE-NODE-PORT-TCP', member: '30080'}}}},
      expect: ['KPD-IPVS-IPSET-MISSING@node-b'],
      breaks: ['outside→NodePort', 'masquerade'],
    },
    {
      name: 'KUBE-LOOP-BACK empty: hairpin unmasqueraded',
      opts: {ipvs: {'node-b': {omitLoopBack: true}}},
      expect: ['KPD-MASQ-MISSING@node-b'],
      breaks: ['pod→itself', 'masquerade'],
    },
    {
      name: 'vs.conntrack off',
      opts: {ipvs: {'node-b': {sysctl: {'net.ipv4.vs.conntrack': '0'}}}},
      expect: ['KPD-IPVS-SYSCTL@node-b'],
    },
    {
      name: 'strictARP without arp_ignore',
      opts: {strictARP: true, ipvs: {'node-b': {}}},
      expect: ['KPD-IPVS-SYSCTL@node-b'],
    },
  ]
  for (const c of CASES) {
    test(c.name, () => {
      const d = run(c.opts)
      const got = d.findings.map((f) => `${f.code}@${f.node ?? '-'}`)
      for (const want of c.expect) assert.ok(got.includes(want), `expected ${want}, got ${got.join(', ')}`)
      assert.ok(
        !got.some((g) => g.endsWith('@node-a') && !g.startsWith('KPD-NODE-DIVERGES')),
        `node-a is healthy: ${got}`,
      )
      if (c.breaks) {
        const p = d.paths.find((x) => x.node === 'node-b' && x.entry === c.breaks![0])!
        assert.equal(p.breaksAt, c.breaks[1], p.detail)
      }
      for (const f of d.findings.filter((x) => x.node === 'node-b' && x.severity === 'error'))
        assert.ok(
          f.evidence.length > 0 || /ipvsadm|ipset|kube-ipvs0|sysctl/.test(f.check?.command ?? ''),
          `${f.code} shows its evidence or where to look`,
        )
    })
  }

  test('a real server on the wrong port is one finding, with its line in each virtual server (ClusterIP, NodePort) as evidence', () => {
    const d = run({ipvs: {'node-b': {wrongPortFor: {ip: '10.244.2.10', port: 9999}}}})
    const wrong = d.findings.filter((f) => f.code === 'KPD-DNAT-WRONG')
    assert.deepEqual(
      wrong.map((f) => [f.node, f.message]),
      [
        [
          'node-b',
          'node-b: RS 10.244.2.10:9999 DNATs to 10.244.2.10:9999, but the endpoint (pod web-b1) is 10.244.2.10:8080 (targetPort http)',
        ],
      ],
    )
    assert.equal(wrong[0].evidence.length, 2, wrong[0].evidence.join('\n'))
    assert.ok(
      wrong[0].evidence.every((e) => /^ipvs line \d+: .*10\.244\.2\.10:9999/.test(e)),
      wrong[0].evidence.join('\n'),
    )
  })
})

describe("IPVS mode, IPv6: a dual-stack Service's IPv6 virtual servers, KUBE-6-* ipsets and ip6tables glue (recorded output)", () => {
  const both = {'node-a': {}, 'node-b': {}}
  const v6Path = (p: {packet: {dst: string}}) => p.packet.dst.includes(':')
  const CLUSTER_IP6 = 'fd00:10:96::10:10'
  const findings = (d: ReturnType<typeof run>) => d.findings.map((f) => [f.node, f.code, f.message])
  const MISMATCH = ['node-a', 'node-b'].map((n) => [
    n,
    'KPD-MODE-MISMATCH',
    `${n} runs ipvs mode (kube-proxy's /proxyMode on the node) but test says mode iptables`,
  ])

  test('ipvsadm -Ln prints IPv6 virtual and real servers bracketed; -Sn gives the same; kube-ipvs0 holds the inet6 VIPs', () => {
    const t = kubeProxyIpvsTexts(
      dualStackNode(NODES[1]),
      [dualStackService(SERVICES[0]), SERVICES[1]],
      dualStackPods(labPods()),
      {},
      6,
    )
    assert.match(
      t.ipvsadmList,
      /^TCP {2}\[fd00:10:96::10:10\]:80 rr\n {2}-> \[fd00:10:244:1::10\]:8080 {4}Masq {4}1 {6}0 {10}0$/m,
    )
    const web = parseIpvsadm(t.ipvsadmList).find((v) => v.address === CLUSTER_IP6)!
    assert.deepEqual(
      web.reals.map((r) => `${r.address} ${r.port} ${r.forward} ${r.weight}`),
      ['fd00:10:244:1::10 8080 Masq 1', 'fd00:10:244:2::10 8080 Masq 1', 'fd00:10:244:2::11 8080 Masq 1'],
    )
    const strip = (x: ReturnType<typeof parseIpvsadm>) =>
      x.map((v) => ({...v, line: 0, text: '', reals: v.reals.map((r) => ({...r, line: 0, text: ''}))}))
    assert.deepEqual(strip(parseIpvsadm(t.ipvsadmList)), strip(parseIpvsadm(t.ipvsadmSave)))
    assert.deepEqual(parseDeviceAddresses(t.kubeIpvs0), [CLUSTER_IP6])
    assert.match(t.ipsetSave, /^create KUBE-6-CLUSTER-IP hash:ip,port family inet6 /m)
  })

  test('trace --ipvsadm of an IPv6 packet: the IPv6 virtual server, its real servers, through the ip6tables glue and KUBE-6-* ipsets', async () => {
    const t = kubeProxyIpvsTexts(
      dualStackNode(NODES[1]),
      [dualStackService(SERVICES[0]), SERVICES[1]],
      dualStackPods(labPods()),
      {},
      6,
    )
    const dir = mkdtempSync(join(tmpdir(), 'kpd-ipvs6-'))
    try {
      for (const [file, text] of [
        ['ip6tables-save.txt', t.iptablesSave],
        ['ipvsadm.txt', t.ipvsadmSave],
        ['ipset.txt', t.ipsetSave],
      ])
        writeFileSync(join(dir, file), text)
      const trace = (dst: string, ...more: string[]) =>
        runCli([
          'trace',
          '--iptables-save',
          join(dir, 'ip6tables-save.txt'),
          '--ipvsadm',
          join(dir, 'ipvsadm.txt'),
          '--ipset-save',
          join(dir, 'ipset.txt'),
          '--src',
          'fd00:10:244:2::20',
          '--dst',
          dst,
          '--dport',
          '80',
          '-o',
          'json',
          ...more,
        ])
      const r = await trace(CLUSTER_IP6)
      assert.equal(r.code, 0, r.stderr)
      assert.equal(r.json.verdict, 'DNAT')
      assert.deepEqual(r.json.destinations, [
        '[fd00:10:244:1::10]:8080',
        '[fd00:10:244:2::10]:8080',
        '[fd00:10:244:2::11]:8080',
      ])
      // An address no virtual server has: not translated (the glue lets it through, IPVS does not take it).
      const none = await trace('fd00:10:96::99:99')
      assert.equal(none.code, 0, none.stderr)
      assert.deepEqual(none.json.destinations, [])
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })

  test('healthy dual-stack IPVS nodes: both families judged, every IPv6 path ✓ through an IPv6 virtual server, no proxy-rules entry in notChecked', () => {
    const d = run({dualStack: true, ipvs: both})
    assert.deepEqual(findings(d), MISMATCH)
    const v6 = d.paths.filter((p) => v6Path(p))
    assert.deepEqual(
      v6.map((p) => [p.node, p.entry, p.ok]),
      ['node-a', 'node-b'].flatMap((n) =>
        ['pod→ClusterIP', 'node→ClusterIP', 'outside→NodePort', 'pod→itself'].map((e) => [n, e, true]),
      ),
    )
    const cluster = v6.find((p) => p.node === 'node-b' && p.entry === 'pod→ClusterIP')!
    assert.deepEqual(cluster.trace.destinations, [
      '[fd00:10:244:1::10]:8080',
      '[fd00:10:244:2::10]:8080',
      '[fd00:10:244:2::11]:8080',
    ])
    assert.ok(
      cluster.trace.outcomes.every((o) =>
        o.steps.some((s) => s.table === 'ipvs' && s.chain === `VS TCP [${CLUSTER_IP6}]:80`),
      ),
    )
    const self = v6.find((p) => p.node === 'node-b' && p.entry === 'pod→itself')!
    assert.equal(
      self.trace.outcomes.find((o) => o.destination === '[fd00:10:244:2::10]:8080')?.masquerade,
      true,
      'KUBE-6-LOOP-BACK masquerades hairpin',
    )
    assert.deepEqual(
      d.notChecked.filter((n) => n.check === 'proxy-rules'),
      [],
    )
  })

  const CASES: Array<{name: string; ipvs6: OfflineOptions['ipvs6']; expect: string[][]}> = [
    {
      name: "node-b's IPv6 virtual server lacks web-a1's real server",
      ipvs6: {'node-b': {omitRealServer: 'fd00:10:244:1::10'}},
      expect: [
        [
          'node-b',
          'KPD-SEP-MISSING',
          'node-b (IPv6): endpoint [fd00:10:244:1::10]:8080 (pod web-a1 on node-a) of shop/web:http is missing from VS TCP [fd00:10:96::10:10]:80',
        ],
        [
          'node-b',
          'KPD-SEP-MISSING',
          'node-b (IPv6): endpoint [fd00:10:244:1::10]:8080 (pod web-a1 on node-a) of shop/web:http is missing from VS TCP [fd00:10:200::12]:30080',
        ],
        [
          'node-b',
          'KPD-NODE-DIVERGES',
          'IPv6: node-b sends shop/web:http to {[fd00:10:244:2::10]:8080, [fd00:10:244:2::11]:8080} while 1 other node(s) (node-a) send it to {[fd00:10:244:1::10]:8080, [fd00:10:244:2::10]:8080, [fd00:10:244:2::11]:8080}',
        ],
      ],
    },
    {
      name: "node-b's IPv6 real server of web-b1 on the wrong port",
      ipvs6: {'node-b': {wrongPortFor: {ip: 'fd00:10:244:2::10', port: 9999}}},
      // The same findings as the IPv4 case of this fault gives, each labelled (IPv6).
      expect: [
        [
          'node-b',
          'KPD-SEP-MISSING',
          'node-b (IPv6): endpoint [fd00:10:244:2::10]:8080 (pod web-b1 on node-b) of shop/web:http is missing from VS TCP [fd00:10:96::10:10]:80',
        ],
        [
          'node-b',
          'KPD-SEP-MISSING',
          'node-b (IPv6): endpoint [fd00:10:244:2::10]:8080 (pod web-b1 on node-b) of shop/web:http is missing from VS TCP [fd00:10:200::12]:30080',
        ],
        [
          'node-b',
          'KPD-DNAT-WRONG',
          'node-b (IPv6): RS [fd00:10:244:2::10]:9999 DNATs to [fd00:10:244:2::10]:9999, but the endpoint (pod web-b1) is [fd00:10:244:2::10]:8080 (targetPort http)',
        ],
        [
          'node-b',
          'KPD-MASQ-MISSING',
          'node-b (IPv6): RS [fd00:10:244:2::10]:9999 does not mark traffic from fd00:10:244:2::10 for masquerade: the pod [fd00:10:244:2::10]:9999 cannot reach itself through the Service',
        ],
        [
          'node-b',
          'KPD-NODE-DIVERGES',
          'IPv6: node-b sends shop/web:http to {[fd00:10:244:1::10]:8080, [fd00:10:244:2::10]:9999, [fd00:10:244:2::11]:8080} while 1 other node(s) (node-a) send it to {[fd00:10:244:1::10]:8080, [fd00:10:244:2::10]:8080, [fd00:10:244:2::11]:8080}',
        ],
      ],
    },
    {
      name: 'KUBE-6-CLUSTER-IP lacks the IPv6 ClusterIP',
      ipvs6: {'node-b': {omitIpsetMember: {set: 'KUBE-CLUSTER-IP', member: `${CLUSTER_IP6},tcp:80`}}},
      expect: [
        [
          'node-b',
          'KPD-IPVS-IPSET-MISSING',
          `node-b (IPv6): ipset KUBE-6-CLUSTER-IP lacks ${CLUSTER_IP6},tcp:80 (shop/web:http): ClusterIP traffic is not marked and accepted for IPVS`,
        ],
      ],
    },
  ]
  for (const c of CASES) {
    test(`${c.name}: exactly that finding, for the IPv6 family only; every IPv4 path still ✓`, () => {
      const d = run({dualStack: true, ipvs: both, ipvs6: c.ipvs6})
      assert.deepEqual(
        findings(d).filter((f) => f[1] !== 'KPD-MODE-MISMATCH'),
        c.expect,
      )
      assert.ok(d.paths.filter((p) => !v6Path(p)).every((p) => p.ok))
      assert.ok(
        d.paths.some((p) => v6Path(p) && p.node === 'node-b' && p.ok === false) ||
          c.expect[0][1] === 'KPD-IPVS-IPSET-MISSING',
      )
    })
  }
})
