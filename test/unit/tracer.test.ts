import assert from 'node:assert/strict'
import {describe, test} from 'node:test'
import {IpsetState} from '../../src/parse/ipset-save.js'
import {BufferSource} from '../../src/parse/dump-source.js'
import {IptablesSave} from '../../src/parse/iptables-save.js'
import {IptablesTracer, type TraceOptions} from '../../src/trace/iptables-tracer.js'
import {parseNftDump} from '../../src/parse/nft-dump.js'
import {NftTracer} from '../../src/trace/nft-tracer.js'
import type {Packet} from '../../src/trace/types.js'
import {Chalk} from 'chalk'
import {renderWalk} from '../../src/report/trace-walk.js'

const NODE = '192.168.1.10'

function dump(nat: string[], filter: string[] = [], natPolicies = 'ACCEPT', filterForward = 'ACCEPT'): IptablesSave {
  const builtin = ['PREROUTING', 'INPUT', 'OUTPUT', 'POSTROUTING', 'FORWARD']
  const chainsOf = (rules: string[]) => [
    ...new Set(
      rules
        .flatMap((r) => [r.split(' ')[1], /-[jg] (KUBE-\S+)/.exec(r)?.[1]])
        .filter((c): c is string => !!c && !builtin.includes(c)),
    ),
  ]
  const text = [
    '*nat',
    `:PREROUTING ${natPolicies} [0:0]`,
    ':INPUT ACCEPT [0:0]',
    ':OUTPUT ACCEPT [0:0]',
    ':POSTROUTING ACCEPT [0:0]',
    ...chainsOf(nat).map((c) => `:${c} - [0:0]`),
    ...nat,
    'COMMIT',
    '*filter',
    ':INPUT ACCEPT [0:0]',
    `:FORWARD ${filterForward} [0:0]`,
    ':OUTPUT ACCEPT [0:0]',
    ...chainsOf(filter).map((c) => `:${c} - [0:0]`),
    ...filter,
    'COMMIT',
    '',
  ].join('\n')
  return IptablesSave.parse(new BufferSource(Buffer.from(text)))
}

const pkt = (over: Partial<Packet> = {}): Packet => ({
  src: '10.244.1.5',
  dst: '10.96.0.10',
  proto: 'tcp',
  dport: 80,
  sport: 40000,
  inIface: 'cbr0',
  outIface: 'eth0',
  ...over,
})
const trace = (d: IptablesSave, p: Packet, o: Partial<TraceOptions> = {}) =>
  new IptablesTracer(d, {localAddresses: [NODE], ...o}).trace(p)

const KUBE = [
  '-A PREROUTING -j KUBE-SERVICES',
  '-A OUTPUT -j KUBE-SERVICES',
  '-A POSTROUTING -j KUBE-POSTROUTING',
  '-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000',
  '-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN',
  '-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0',
  '-A KUBE-POSTROUTING -j MASQUERADE --random-fully',
  '-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment "ns/web cluster IP" -m tcp --dport 80 -j KUBE-SVC-W',
  '-A KUBE-SVC-W ! -s 10.244.0.0/16 -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j KUBE-MARK-MASQ',
  '-A KUBE-SVC-W -m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-1',
  '-A KUBE-SVC-W -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-2',
  '-A KUBE-SVC-W -j KUBE-SEP-3',
  '-A KUBE-SEP-1 -s 10.244.1.5/32 -j KUBE-MARK-MASQ',
  '-A KUBE-SEP-1 -p tcp -m tcp -j DNAT --to-destination 10.244.1.5:8080',
  '-A KUBE-SEP-2 -s 10.244.2.5/32 -j KUBE-MARK-MASQ',
  '-A KUBE-SEP-2 -p tcp -m tcp -j DNAT --to-destination 10.244.2.5:8080',
  '-A KUBE-SEP-3 -s 10.244.3.5/32 -j KUBE-MARK-MASQ',
  '-A KUBE-SEP-3 -p tcp -m tcp -j DNAT --to-destination 10.244.3.5:8080',
  '-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS',
  '-A KUBE-NODEPORTS -p tcp -m tcp --dport 30080 -j KUBE-EXT-W',
  '-A KUBE-EXT-W -j KUBE-MARK-MASQ',
  '-A KUBE-EXT-W -j KUBE-SVC-W',
]

describe('iptables tracer', () => {
  test('statistic branches: three endpoints, a third each, every branch listed', () => {
    const r = trace(dump(KUBE), pkt())
    assert.equal(r.verdict, 'DNAT')
    assert.deepEqual(r.destinations, ['10.244.1.5:8080', '10.244.2.5:8080', '10.244.3.5:8080'])
    for (const o of r.outcomes) assert.ok(Math.abs(o.probability - 1 / 3) < 1e-6, String(o.probability))
    assert.ok(Math.abs(r.outcomes.reduce((a, o) => a + o.probability, 0) - 1) < 1e-9)
  })

  test('an IPv6 -d ADDRESS/32 is a network, not one address: a packet inside it matches, in a short chain and a long one', () => {
    const v6 = (extra: number) =>
      dump([
        '-A PREROUTING -j KUBE-SERVICES',
        ...Array.from(
          {length: extra},
          (_, i) => `-A KUBE-SERVICES -d fd00::${(i + 100).toString(16)}/128 -p tcp -m tcp --dport 80 -j KUBE-SVC-W`,
        ),
        '-A KUBE-SERVICES -d 2001:db8::/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-W',
        '-A KUBE-SVC-W -j KUBE-SEP-1',
        '-A KUBE-SEP-1 -p tcp -m tcp -j DNAT --to-destination [fd00:10::5]:8080',
      ])
    for (const extra of [0, 70]) {
      const r = trace(v6(extra), pkt({src: 'fd00:10::9', dst: '2001:db8::5'}), {localAddresses: ['fd00:1::10']})
      assert.equal(r.verdict, 'DNAT', `${extra} rules before it`)
      assert.deepEqual(r.destinations, ['[fd00:10::5]:8080'])
    }
  })

  test('hairpin: the pod choosing itself is masqueraded through the mark, the others are not', () => {
    const r = trace(dump(KUBE), pkt())
    const self = r.outcomes.find((o) => o.destination === '10.244.1.5:8080')!
    assert.equal(self.masquerade, true)
    assert.ok(self.steps.some((s) => s.chain === 'KUBE-POSTROUTING' && /MASQUERADE/.test(s.rule)))
    assert.equal(r.outcomes.find((o) => o.destination === '10.244.2.5:8080')!.masquerade, false)
  })

  test('from outside the cluster CIDR the service chain marks for masquerade', () => {
    const r = trace(dump(KUBE), pkt({src: '172.16.0.9'}))
    assert.ok(r.outcomes.every((o) => o.masquerade))
  })

  test('NodePort: addrtype LOCAL leads to KUBE-NODEPORTS, then EXT masquerades', () => {
    const r = trace(dump(KUBE), pkt({src: '203.0.113.1', dst: NODE, dport: 30080}))
    assert.equal(r.verdict, 'DNAT')
    assert.equal(r.destinations.length, 3)
    assert.ok(r.outcomes.every((o) => o.masquerade))
    const miss = trace(dump(KUBE), pkt({src: '203.0.113.1', dst: '192.168.1.99', dport: 30080}))
    assert.equal(miss.verdict, 'ACCEPT', 'not a local address: no NodePort')
  })

  test('locally generated: OUTPUT path from the node address', () => {
    const r = trace(dump(KUBE), pkt({src: NODE, inIface: undefined}))
    assert.equal(r.verdict, 'DNAT')
    assert.ok(r.outcomes.every((o) => o.steps[0].chain === 'OUTPUT'))
  })

  test('filter REJECT for a service without endpoints', () => {
    const r = trace(
      dump(
        ['-A PREROUTING -j KUBE-SERVICES'],
        [
          '-A FORWARD -m conntrack --ctstate NEW -j KUBE-SERVICES',
          '-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable',
        ],
      ),
      pkt(),
    )
    assert.equal(r.verdict, 'REJECT')
    assert.equal(r.outcomes[0].steps.at(-1)!.table, 'filter')
  })

  test('chain policy DROP applies when no rule accepts', () => {
    assert.equal(trace(dump([], [], 'ACCEPT', 'DROP'), pkt()).verdict, 'DROP')
  })

  test('goto returns to the caller of the chain that jumped', () => {
    const d = dump([
      '-A PREROUTING -j A',
      '-A PREROUTING -j DNAT --to-destination 1.1.1.1:1',
      '-A A -g B',
      '-A A -j DNAT --to-destination 2.2.2.2:2',
      '-A B -j RETURN',
    ])
    assert.deepEqual(trace(d, pkt()).destinations, ['1.1.1.1:1'])
  })

  test('recent: first packets do not match --rcheck; the outcome is marked sticky', () => {
    const d = dump([
      '-A PREROUTING -m recent --name S1 --rcheck --seconds 10800 --reap -j DNAT --to-destination 9.9.9.9:9',
      '-A PREROUTING -m recent --name S1 --set -j DNAT --to-destination 1.1.1.1:1',
    ])
    const r = trace(d, pkt())
    assert.deepEqual(r.destinations, ['1.1.1.1:1'])
    assert.equal(r.outcomes[0].sticky, true)
  })

  test('multiport, ports ranges and negated protocol', () => {
    const d = dump([
      '-A PREROUTING -p tcp -m multiport --dports 10,70:90 -j DNAT --to-destination 1.1.1.1:1',
      '-A PREROUTING ! -p udp -j DNAT --to-destination 2.2.2.2:2',
    ])
    assert.deepEqual(trace(d, pkt()).destinations, ['1.1.1.1:1'])
    assert.deepEqual(trace(d, pkt({dport: 91})).destinations, ['2.2.2.2:2'])
  })

  test('an unknown interface, match or target gives UNKNOWN naming the rule, never a guess', () => {
    const cases = [
      ['-A PREROUTING -i docker0 -j DROP', /input interface/],
      ['-A PREROUTING -m physdev --physdev-is-bridged -j DROP', /physdev/],
      ['-A PREROUTING -j TPROXY --on-port 1', /TPROXY/],
      ['-A PREROUTING -m set --match-set X src -j DROP', /needs the ipsets/],
    ] as const
    for (const [rule, why] of cases) {
      const r = trace(dump([rule]), pkt({inIface: undefined}))
      assert.equal(r.verdict, 'UNKNOWN', rule)
      assert.match(r.outcomes[0].reason!, why)
      assert.equal(r.outcomes[0].steps.at(-1)!.rule, rule)
    }
  })

  test('ipset matches with --ipset-save data', () => {
    const sets = IpsetState.parse(
      'create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536\nadd KUBE-CLUSTER-IP 10.96.0.10,tcp:80\n',
    )
    const d = dump(['-A PREROUTING -m set --match-set KUBE-CLUSTER-IP dst,dst -j DNAT --to-destination 1.1.1.1:1'])
    assert.deepEqual(trace(d, pkt(), {ipsets: sets}).destinations, ['1.1.1.1:1'])
    assert.deepEqual(trace(d, pkt({dport: 81}), {ipsets: sets}).destinations, [])
  })

  test('one tracer, the same packet from other sources: a walk that read the source is walked again, one that did not is the same', () => {
    const sets = IpsetState.parse('create FROM hash:ip family inet hashsize 1024 maxelem 65536\nadd FROM 10.244.1.5\n')
    const ruleOf = (test: string) => [`-A PREROUTING ${test} -j DNAT --to-destination 1.1.1.1:1`]
    const cases = [
      '-s 10.244.1.5/32',
      '-p tcp -m tcp --sport 40000',
      '-p tcp -m multiport --sports 40000',
      '-p tcp -m multiport --ports 40000',
      '-m addrtype --src-type MULTICAST',
      '-m set --match-set FROM src',
    ]
    const matching = pkt({src: '10.244.1.5', sport: 40000})
    const other = pkt({src: '10.244.1.6', sport: 40001})
    for (const test of cases) {
      const first = test.includes('MULTICAST') ? {...matching, src: '224.0.0.1'} : matching
      const tracer = new IptablesTracer(dump(ruleOf(test)), {localAddresses: [NODE], ipsets: sets})
      assert.deepEqual(tracer.trace(first).destinations, ['1.1.1.1:1'], test)
      assert.deepEqual(tracer.trace(other).destinations, [], test)
      assert.deepEqual(tracer.trace(first).destinations, ['1.1.1.1:1'], test)
    }
    const tracer = new IptablesTracer(dump(ruleOf('-d 10.96.0.10/32')), {localAddresses: [NODE]})
    const walked = tracer.trace(matching)
    assert.deepEqual(walked.destinations, ['1.1.1.1:1'])
    assert.equal(tracer.trace(other), walked)
    assert.deepEqual(tracer.trace({...other, dport: 81}).destinations, ['1.1.1.1:1'])
    assert.notEqual(tracer.trace({...other, dport: 81}), walked)
  })

  test('the nftables tracer likewise: a walk that read the source is walked again for another source', () => {
    const ruleset = (test: string) =>
      `table ip t {\n\tchain pre {\n\t\ttype nat hook prerouting priority dstnat; policy accept;\n\t\t${test} dnat to 1.1.1.1:1\n\t}\n}\n`
    const matching = pkt({src: '10.244.1.5', sport: 40000})
    const other = pkt({src: '10.244.1.6', sport: 40001})
    for (const test of ['ip saddr 10.244.1.5', 'tcp sport 40000', 'th sport 40000']) {
      const tracer = new NftTracer(parseNftDump(ruleset(test)), {localAddresses: [NODE]})
      assert.deepEqual(tracer.trace(matching).destinations, ['1.1.1.1:1'], test)
      assert.deepEqual(tracer.trace(other).destinations, [], test)
      assert.deepEqual(tracer.trace(matching).destinations, ['1.1.1.1:1'], test)
    }
    const tracer = new NftTracer(parseNftDump(ruleset('ip daddr 10.96.0.10')), {localAddresses: [NODE]})
    const walked = tracer.trace(matching)
    assert.deepEqual(walked.destinations, ['1.1.1.1:1'])
    assert.equal(tracer.trace(other), walked)
  })

  test('a jump loop ends as UNKNOWN instead of running forever', () => {
    const r = trace(dump(['-A PREROUTING -j A', '-A A -j B', '-A B -j A']), pkt())
    assert.equal(r.verdict, 'UNKNOWN')
    assert.match(r.outcomes[0].reason!, /loop/)
  })
})

describe('iptables tracer: the filter path (raw, mangle, filter; every chain, whoever owns it)', () => {
  const FORWARD_NEW = '-A FORWARD -m conntrack --ctstate NEW -j KUBE-SERVICES'
  const share = (r: ReturnType<typeof trace>, verdict: string) =>
    r.outcomes.filter((o) => o.verdict === verdict).reduce((a, o) => a + o.probability, 0)

  test("the DNATed packet crosses filter FORWARD: another owner's chain drops only the endpoint it names", () => {
    const r = trace(
      dump(KUBE, [
        '-A FORWARD -j cali-FORWARD',
        FORWARD_NEW,
        '-A cali-FORWARD -d 10.244.2.5/32 -m conntrack --ctstate NEW -j DROP',
      ]),
      pkt(),
    )
    const dropped = r.outcomes.filter((o) => o.verdict === 'DROP')
    assert.deepEqual(
      dropped.map((o) => [o.destination, o.steps.at(-1)!.chain, o.steps.at(-1)!.rule, o.policy]),
      [
        [
          '10.244.2.5:8080',
          'cali-FORWARD',
          '-A cali-FORWARD -d 10.244.2.5/32 -m conntrack --ctstate NEW -j DROP',
          undefined,
        ],
      ],
    )
    assert.ok(Math.abs(share(r, 'DNAT') - 2 / 3) < 1e-6)
  })

  test("a base chain's DROP policy is the verdict's origin (policy), unless a rule of any chain accepts first", () => {
    const docker = ['-A FORWARD -j DOCKER-USER', '-A DOCKER-USER -j RETURN', FORWARD_NEW]
    const r = trace(dump(KUBE, docker, 'ACCEPT', 'DROP'), pkt())
    assert.equal(r.verdict, 'DROP')
    assert.ok(r.outcomes.every((o) => o.policy?.table === 'filter' && o.policy.chain === 'FORWARD'))
    const accepted = trace(
      dump(
        KUBE,
        [
          '-A FORWARD -j DOCKER-USER',
          '-A DOCKER-USER -s 10.244.0.0/16 -j ACCEPT',
          '-A DOCKER-USER -j RETURN',
          FORWARD_NEW,
        ],
        'ACCEPT',
        'DROP',
      ),
      pkt(),
    )
    assert.equal(accepted.verdict, 'DNAT')
    assert.ok(accepted.outcomes.every((o) => o.policy === undefined))
  })

  test('raw PREROUTING and mangle FORWARD are walked where the dump has them', () => {
    const withTables = (raw: string[], mangle: string[]) =>
      IptablesSave.parse(
        new BufferSource(
          Buffer.from(
            [
              '*raw',
              ':PREROUTING ACCEPT [0:0]',
              ':OUTPUT ACCEPT [0:0]',
              ...raw,
              'COMMIT',
              '*mangle',
              ':PREROUTING ACCEPT [0:0]',
              ':INPUT ACCEPT [0:0]',
              ':FORWARD ACCEPT [0:0]',
              ':OUTPUT ACCEPT [0:0]',
              ':POSTROUTING ACCEPT [0:0]',
              ...mangle,
              'COMMIT',
              '*nat',
              ':PREROUTING ACCEPT [0:0]',
              ':INPUT ACCEPT [0:0]',
              ':OUTPUT ACCEPT [0:0]',
              ':POSTROUTING ACCEPT [0:0]',
              'COMMIT',
              '',
            ].join('\n'),
          ),
        ),
      )
    const raw = trace(withTables(['-A PREROUTING -s 10.244.1.5/32 -j DROP'], []), pkt({dst: '10.244.2.5'}))
    assert.deepEqual([raw.verdict, raw.outcomes[0].steps.at(-1)!.table], ['DROP', 'raw'])
    const mangle = trace(withTables([], ['-A FORWARD -d 10.244.2.5/32 -j DROP']), pkt({dst: '10.244.2.5'}))
    assert.deepEqual([mangle.verdict, mangle.outcomes[0].steps.at(-1)!.table], ['DROP', 'mangle'])
    assert.equal(
      trace(withTables([], ['-A FORWARD -d 10.244.2.5/32 -j DROP']), pkt({dst: '10.244.2.6'})).verdict,
      'ACCEPT',
    )
  })

  test('the route after DNAT decides -o: a local pod leaves by its bridge, another node is reached by none of the node-local interfaces', () => {
    const route = (dst: string) =>
      dst.startsWith('10.244.1.') ? {outIface: 'cbr0'} : {outNotVia: new Set(['lo', 'cbr0', 'docker0'])}
    const d = dump(
      KUBE,
      ['-A FORWARD -o docker0 -j DROP', '-A FORWARD -o cbr0 -j ACCEPT', '-A FORWARD -o eth0 -j ACCEPT'],
      'ACCEPT',
      'DROP',
    )
    const r = trace(d, pkt({outIface: undefined}), {route})
    const byDestination = new Map(r.outcomes.map((o) => [o.destination, o]))
    assert.deepEqual([...byDestination].map(([dst, o]) => [dst, o.verdict]).sort(), [
      ['10.244.1.5:8080', 'DNAT'],
      ['10.244.2.5:8080', 'UNKNOWN'],
      ['10.244.3.5:8080', 'UNKNOWN'],
    ])
    assert.match(
      byDestination.get('10.244.2.5:8080')!.reason!,
      /output interface \(eth0\)/,
      '-o docker0 was decided (false); -o eth0 is what the route cannot tell',
    )
    assert.equal(trace(d, pkt({outIface: undefined})).verdict, 'UNKNOWN', 'without a route -o docker0 is undecided')
  })

  test('an input interface known not to be used: -i docker0 is false for a packet from another node, undecided without that knowledge', () => {
    const d = dump([], ['-A FORWARD -i docker0 ! -o docker0 -j ACCEPT'], 'ACCEPT', 'DROP')
    const fromNode = pkt({
      src: '10.200.0.12',
      dst: '10.244.1.5',
      inIface: undefined,
      outIface: 'cbr0',
      inNotVia: new Set(['lo', 'cbr0', 'docker0']),
    })
    const r = trace(d, fromNode)
    assert.deepEqual([r.verdict, r.outcomes[0].policy], ['DROP', {table: 'filter', chain: 'FORWARD'}])
    assert.equal(
      renderWalk(r, new Chalk({level: 0}), 80).join('\n'),
      '  ⇒   DROP (the policy of filter/FORWARD)',
      '--explain says the policy dropped it',
    )
    assert.equal(trace(d, {...fromNode, inNotVia: undefined}).verdict, 'UNKNOWN')
  })

  test('filter OUTPUT for the node itself, filter INPUT for a packet to the node', () => {
    const d = dump(KUBE, [
      '-A OUTPUT -j SITE-EGRESS',
      '-A SITE-EGRESS -d 10.244.0.0/16 -j REJECT',
      '-A INPUT -p tcp -m tcp --dport 22 -j DROP',
    ])
    const out = trace(d, pkt({src: NODE, inIface: undefined}), {locallyGenerated: true})
    assert.deepEqual([out.verdict, out.outcomes[0].steps.at(-1)!.chain], ['REJECT', 'SITE-EGRESS'])
    const input = trace(d, pkt({dst: NODE, dport: 22}))
    assert.deepEqual([input.verdict, input.outcomes[0].steps.at(-1)!.chain], ['DROP', 'INPUT'])
  })
})
