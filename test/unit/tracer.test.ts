import assert from 'node:assert/strict'
import {describe, test} from 'node:test'
import {IpsetState} from '../../src/parse/ipset-save.js'
import {BufferSource} from '../../src/parse/dump-source.js'
import {IptablesSave} from '../../src/parse/iptables-save.js'
import {IptablesTracer, type TraceOptions} from '../../src/trace/iptables-tracer.js'
import type {Packet} from '../../src/trace/types.js'

const NODE = '192.168.1.10'

function dump(nat: string[], filter: string[] = [], natPolicies = 'ACCEPT', filterForward = 'ACCEPT'): IptablesSave {
  const builtin = ['PREROUTING', 'INPUT', 'OUTPUT', 'POSTROUTING', 'FORWARD']
  const chainsOf = (rules: string[]) => [...new Set(rules.flatMap((r) => [r.split(' ')[1], /-[jg] (KUBE-\S+)/.exec(r)?.[1]]).filter((c): c is string => !!c && !builtin.includes(c)))]
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

const pkt = (over: Partial<Packet> = {}): Packet => ({src: '10.244.1.5', dst: '10.96.0.10', proto: 'tcp', dport: 80, sport: 40000, inIface: 'cbr0', outIface: 'eth0', ...over})
const trace = (d: IptablesSave, p: Packet, o: Partial<TraceOptions> = {}) => new IptablesTracer(d, {localAddresses: [NODE], ...o}).trace(p)

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
        ['-A FORWARD -m conntrack --ctstate NEW -j KUBE-SERVICES', '-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable'],
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
    const d = dump(['-A PREROUTING -j A', '-A PREROUTING -j DNAT --to-destination 1.1.1.1:1', '-A A -g B', '-A A -j DNAT --to-destination 2.2.2.2:2', '-A B -j RETURN'])
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
    const d = dump(['-A PREROUTING -p tcp -m multiport --dports 10,70:90 -j DNAT --to-destination 1.1.1.1:1', '-A PREROUTING ! -p udp -j DNAT --to-destination 2.2.2.2:2'])
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
    const sets = IpsetState.parse('create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536\nadd KUBE-CLUSTER-IP 10.96.0.10,tcp:80\n')
    const d = dump(['-A PREROUTING -m set --match-set KUBE-CLUSTER-IP dst,dst -j DNAT --to-destination 1.1.1.1:1'])
    assert.deepEqual(trace(d, pkt(), {ipsets: sets}).destinations, ['1.1.1.1:1'])
    assert.deepEqual(trace(d, pkt({dport: 81}), {ipsets: sets}).destinations, [])
  })

  test('a jump loop ends as UNKNOWN instead of running forever', () => {
    const r = trace(dump(['-A PREROUTING -j A', '-A A -j B', '-A B -j A']), pkt())
    assert.equal(r.verdict, 'UNKNOWN')
    assert.match(r.outcomes[0].reason!, /loop/)
  })
})
