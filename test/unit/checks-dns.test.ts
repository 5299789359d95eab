import assert from 'node:assert/strict'
import {describe, test} from 'node:test'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {offlineCluster, type OfflineOptions} from '../helpers/offline-cluster.js'
import {notReady} from '../helpers/check-states.js'
import {checkFamily, checkTester} from '../helpers/check-tester.js'
import {withPath} from '../helpers/path-states.js'
import {buildReport} from '../../src/report/report.js'
import {renderHuman} from '../../src/report/human.js'
import {Chalk} from 'chalk'

/** node-a, where CoreDNS runs, with net.ipv4.ip_forward = 0 (the other path reads healthy). */
const FORWARDING_OFF_ON_A = withPath({'node-a': {sysctl: {'net.ipv4.ip_forward': '0'}}})

checkFamily('dns', () => {
  checkTester('cluster DNS (dns.ts)', [
    {
      name: 'no DNS Service',
      state: {editCluster: (c) => void (c.dns = {slices: []})},
      findings: [['KPD-DNS-SERVICE-MISSING', '-', 'error']],
    },
    {
      name: 'DNS pods not ready',
      state: {pods: notReady('coredns-a')},
      findings: [['KPD-DNS-NO-ENDPOINTS', '-', 'error']],
    },
    {
      name: 'NXDOMAIN on one node',
      state: {dns: {'node-b': {addresses: [], rcode: 'NXDOMAIN'}}},
      findings: [['KPD-DNS-NO-ANSWER', 'node-b', 'error']],
    },
    {
      name: 'the wrong address on one node',
      state: {dns: {'node-a': {addresses: ['10.96.99.99']}}},
      findings: [['KPD-DNS-NO-ANSWER', 'node-a', 'error']],
    },
    {
      name: 'the query failed on one node',
      state: {dns: {'node-a': {addresses: [], error: 'connection refused'}}},
      findings: [['KPD-DNS-NO-ANSWER', 'node-a', 'error']],
    },
    {
      name: "node-b's question unanswered while CoreDNS's node-a forwards nothing: one finding, the cause on node-a (the symptom is its evidence)",
      state: {...FORWARDING_OFF_ON_A, dns: {'node-b': {addresses: [], error: 'no DNS answer within 3s'}}},
      findings: [['KPD-NODE-FORWARDING-OFF', 'node-a', 'error']],
    },
    {
      name: "node-a's own question unanswered although node-a only stops forwarding: its host reaches its own CoreDNS without forwarding, so forwarding does not explain it",
      state: {...FORWARDING_OFF_ON_A, dns: {'node-a': {addresses: [], error: 'no DNS answer within 3s'}}},
      findings: [
        ['KPD-NODE-FORWARDING-OFF', 'node-a', 'error'],
        ['KPD-DNS-NO-ANSWER', 'node-a', 'error'],
      ],
    },
    {
      name: 'node-b gets NXDOMAIN while node-a forwards nothing: an answer came, so the path does not explain it',
      state: {...FORWARDING_OFF_ON_A, dns: {'node-b': {addresses: [], rcode: 'NXDOMAIN'}}},
      findings: [
        ['KPD-NODE-FORWARDING-OFF', 'node-a', 'error'],
        ['KPD-DNS-NO-ANSWER', 'node-b', 'error'],
      ],
    },
    {
      name: 'not asked on one node (no TCP to the server from the node, no dig there): no verdict',
      state: {
        dns: {
          'node-a': {
            addresses: [],
            method: 'none',
            error: 'port forward refused; and the node has neither dig nor nslookup',
          },
        },
      },
      findings: [],
    },
  ])

  const RIGHT_A = {type: 'A' as const, rcode: 'NOERROR', addresses: ['10.96.10.10']}
  const RIGHT_AAAA = {type: 'AAAA' as const, rcode: 'NOERROR', addresses: ['fd00:10:96::10:10']}
  /** A dual-stack web Service, both nodes answered `answers` (node-b the right A and AAAA). */
  const dualStackDns = (
    answers: Array<{type: 'A' | 'AAAA'; rcode?: string; addresses: string[]; error?: string}>,
  ): OfflineOptions => ({dualStack: true, dns: {'node-a': {answers}}})

  /** Each family's ClusterIP against the answer of its own type: [case, state, findings as "CODE node: message", DNS not-checked entries]. */
  const DUAL_STACK_DNS: Array<[string, OfflineOptions, string[], string[]]> = [
    ['A and AAAA both right', dualStackDns([RIGHT_A, RIGHT_AAAA]), [], []],
    [
      'AAAA missing (NOERROR, no address): an IPv6 finding only',
      dualStackDns([RIGHT_A, {type: 'AAAA', rcode: 'NOERROR', addresses: []}]),
      [
        'KPD-DNS-NO-ANSWER node-a: node-a (IPv6): web.shop.svc.cluster.local AAAA resolves to nothing, not the ClusterIP fd00:10:96::10:10',
      ],
      [],
    ],
    [
      'AAAA wrong: an IPv6 finding only',
      dualStackDns([RIGHT_A, {type: 'AAAA', rcode: 'NOERROR', addresses: ['fd00:10:96::99:99']}]),
      [
        'KPD-DNS-NO-ANSWER node-a: node-a (IPv6): web.shop.svc.cluster.local AAAA resolves to fd00:10:96::99:99, not the ClusterIP fd00:10:96::10:10',
      ],
      [],
    ],
    [
      'A wrong, AAAA right: an IPv4 finding only',
      dualStackDns([{type: 'A', rcode: 'NOERROR', addresses: ['10.96.99.99']}, RIGHT_AAAA]),
      [
        'KPD-DNS-NO-ANSWER node-a: node-a (IPv4): web.shop.svc.cluster.local A resolves to 10.96.99.99, not the ClusterIP 10.96.10.10',
      ],
      [],
    ],
    [
      'the AAAA question failed: an IPv6 finding naming the failure',
      dualStackDns([RIGHT_A, {type: 'AAAA', addresses: [], error: 'no DNS answer within 3s'}]),
      [
        'KPD-DNS-NO-ANSWER node-a: node-a (IPv6): asking 10.96.0.10 for the AAAA record of web.shop.svc.cluster.local failed: no DNS answer within 3s',
      ],
      [],
    ],
    [
      'A right, AAAA not asked (a bundle from before AAAA questions): no finding, IPv6 DNS not checked',
      dualStackDns([RIGHT_A]),
      [],
      [
        'node-a dns-from-node false: IPv6 DNS: the AAAA record of web.shop.svc.cluster.local was not asked of 10.96.0.10 (recorded by a version that asked A only)',
      ],
    ],
  ]

  test("the DNS symptom of node-a's forwarding: evidence on KPD-NODE-FORWARDING-OFF, and the headline and next step lead with the cause", () => {
    const {cluster, observations} = offlineCluster({
      ...FORWARDING_OFF_ON_A,
      dns: {'node-b': {addresses: [], error: 'no DNS answer within 3s'}},
    })
    const d = diagnose(cluster, observations)
    assert.deepEqual(
      d.findings.map((f) => [f.code, f.node, f.evidence]),
      [
        [
          'KPD-NODE-FORWARDING-OFF',
          'node-a',
          [
            'sysctl net.ipv4.ip_forward = 0',
            'node-b: asking 10.96.0.10 for the A record of web.shop.svc.cluster.local failed (no DNS answer within 3s): its DNS endpoint 10.244.1.53 (pod coredns-a) on node-a is behind this fault',
          ],
        ],
      ],
    )
    const r = buildReport(d)
    assert.deepEqual(r.next, {
      check: {
        command: 'ssh -- node-a sysctl net.ipv4.ip_forward',
        argv: [['ssh', '--', 'node-a', 'sysctl', 'net.ipv4.ip_forward']],
      },
      fix: {
        command: 'ssh -- node-a sudo sysctl -w net.ipv4.ip_forward=1',
        argv: [['ssh', '--', 'node-a', 'sudo', 'sysctl', '-w', 'net.ipv4.ip_forward=1']],
        text: null,
        changes: 'node',
        node: 'node-a',
      },
      text: 'Then find what set it to 0 (net.ipv4.ip_forward in /etc/sysctl.conf and /etc/sysctl.d).',
    })
    assert.equal(
      r.summary,
      '✗ shop/web: node-a: net.ipv4.ip_forward = 0: the node forwards no IPv4 packet, so its pods reach no Service and no pod on another node, pods on other nodes cannot reach its pods, and NodePorts on node-a reach no endpoint',
    )
    const first = renderHuman(r, new Chalk({level: 0}), 120).split('\n')[0]
    assert.match(first, /^✗ shop\/web: node-a: net\.ipv4\.ip_forward = 0: /)
    assert.ok(r.summary.startsWith(first), first)
  })

  describe('cluster DNS of a dual-stack Service: A for the IPv4 ClusterIP, AAAA for the IPv6 one', () => {
    for (const [name, state, findings, notChecked] of DUAL_STACK_DNS) {
      test(name, () => {
        const {cluster, observations} = offlineCluster(state)
        const d = diagnose(cluster, observations)
        assert.deepEqual(
          d.findings.map((f) => `${f.code} ${f.node}: ${f.message}`),
          findings,
        )
        assert.deepEqual(
          d.notChecked
            .filter((n) => n.check === 'dns-from-node')
            .map((n) => `${n.node} ${n.check} ${n.required}: ${n.reason}`),
          notChecked,
        )
      })
    }
    test("the finding's command asks the failing family's record type", () => {
      const {cluster, observations} = offlineCluster(DUAL_STACK_DNS[2][1])
      assert.deepEqual(diagnose(cluster, observations).findings[0].check?.argv, [
        ['ssh', '--', 'node-a', 'dig', '+tcp', 'web.shop.svc.cluster.local', 'AAAA', '@10.96.0.10'],
      ])
    })
  })
})
