/**
 * A fragment is never judged as a whole dump: whatever chain a packet's walk needs is removed from a whole dump (one at
 * a time, and seeded random subsets), the walk of that packet never gives ACCEPT, DROP or REJECT, and an outcome
 * names a removed chain; a dump cut after any rule of its last table, without its COMMIT, never gives ACCEPT, DROP or
 * REJECT for a packet whose walk entered a chain that lost rules. The dumps are the lab's (test/fixtures generators), in
 * the order iptables-save prints them (each chain's rules together, chains in the order declared); the packets are
 * those of the packet-flow table's rows at node-a.
 */
import assert from 'node:assert/strict'
import {test} from 'node:test'
import {BufferSource} from '../../src/parse/dump-source.js'
import {IptablesSave} from '../../src/parse/iptables-save.js'
import {normaliseIptablesPaste} from '../../src/parse/paste-normalise.js'
import {IptablesTracer} from '../../src/trace/iptables-tracer.js'
import type {Packet, TraceResult} from '../../src/trace/types.js'
import {kubeProxyRules} from '../fixtures/kube-proxy-rules.js'
import {DNS, NODES, OUTSIDE_IP, WEB, labPods} from '../fixtures/lab-cluster.js'
import {Prng} from '../helpers/seeded.js'

const SEED = 20261126
const NODE = NODES[0]
const CLIENT = '10.244.1.100'

const PACKETS: Array<{name: string; packet: Packet; fromNode?: boolean}> = [
  {name: 'pod→ClusterIP', packet: tcp(CLIENT, WEB.clusterIP, 80, 'cbr0')},
  {name: 'node→ClusterIP', packet: tcp(NODE.ip, WEB.clusterIP, 80), fromNode: true},
  {name: 'outside→NodePort', packet: tcp(OUTSIDE_IP, NODE.ip, 30080, 'eth0')},
  {name: 'outside→ClusterIP routed to the node', packet: tcp(OUTSIDE_IP, WEB.clusterIP, 80, 'eth0')},
  {name: 'pod→itself (hairpin)', packet: tcp('10.244.1.10', WEB.clusterIP, 80, 'cbr0')},
  {
    name: 'pod→DNS over UDP',
    packet: {src: CLIENT, dst: DNS.clusterIP, proto: 'udp', dport: 53, sport: 40000, inIface: 'cbr0'},
  },
  {name: 'pod→ClusterIP on a port it lacks', packet: tcp(CLIENT, WEB.clusterIP, 81, 'cbr0')},
  {name: 'outside→a node port no Service has', packet: tcp(OUTSIDE_IP, NODE.ip, 30081, 'eth0')},
  {name: 'node→localhost NodePort', packet: tcp('127.0.0.1', '127.0.0.1', 30080), fromNode: true},
]

function tcp(src: string, dst: string, dport: number, inIface?: string): Packet {
  return {src, dst, proto: 'tcp', dport, sport: 40000, ...(inIface ? {inIface} : {})}
}

interface Table {
  name: string
  declarations: string[]
  rules: string[]
}

/** The generator's restore input as iptables-save prints it: per table, the declarations, then each chain's rules in declaration order. */
function asSaved(text: string): Table[] {
  const tables: Table[] = []
  for (const line of text.split('\n')) {
    const start = /^\*(\S+)/.exec(line)
    if (start) tables.push({name: start[1], declarations: [], rules: []})
    else if (line.startsWith(':')) tables[tables.length - 1].declarations.push(line)
    else if (line.startsWith('-A ')) tables[tables.length - 1].rules.push(line)
  }
  for (const t of tables) {
    const order = t.declarations.map((d) => d.slice(1).split(' ')[0])
    const chainOf = (rule: string) => rule.split(' ')[1]
    t.rules = order.flatMap((chain) => t.rules.filter((r) => chainOf(r) === chain))
  }
  return tables
}

function print(tables: Table[], commitLast = true): string {
  return tables
    .map((t, i) =>
      [`*${t.name}`, ...t.declarations, ...t.rules, ...(commitLast || i < tables.length - 1 ? ['COMMIT'] : [])].join(
        '\n',
      ),
    )
    .join('\n')
}

/** The dump without these chains (their declarations and rules; rules that jump to them stay). */
function without(tables: Table[], chains: Set<string>): Table[] {
  const gone = (table: string, chain: string) => chains.has(`${table}/${chain}`)
  return tables.map((t) => ({
    name: t.name,
    declarations: t.declarations.filter((d) => !gone(t.name, d.slice(1).split(' ')[0])),
    rules: t.rules.filter((r) => !gone(t.name, r.split(' ')[1])),
  }))
}

/** The trace of the packet through the text read as a paste is read, and the chains its walk entered ("table/chain"). */
function trace(text: string, p: (typeof PACKETS)[number]): {result: TraceResult; entered: Set<string>} {
  const paste = normaliseIptablesPaste(text, 4)
  const dump = IptablesSave.parse(new BufferSource(Buffer.from(paste.text, 'latin1')), {acceptCut: true})
  const tracer = new IptablesTracer(dump, {localAddresses: [NODE.ip], locallyGenerated: p.fromNode})
  const entered = new Set<string>()
  const count = tracer.ruleCount.bind(tracer)
  tracer.ruleCount = (chain) => {
    entered.add(`${chain.table}/${chain.name}`)
    return count(chain)
  }
  return {result: tracer.trace(p.packet), entered}
}

const JUDGED = new Set(['ACCEPT', 'DROP', 'REJECT'])
const WHOLE = asSaved(kubeProxyRules(NODE, [WEB, DNS], labPods(), {}, 4))

/** Whether some UNKNOWN outcome names one of the chains ("table/chain": its chain's name is in the reason). */
function namesOne(result: TraceResult, chains: Set<string>): boolean {
  const names = [...chains].map((c) => c.split('/')[1])
  return result.outcomes.some(
    (o) => o.verdict === 'UNKNOWN' && names.some((n) => new RegExp(`(^|[^\\w-])${n}([^\\w-]|$)`).test(o.reason ?? '')),
  )
}

test('fragment property: removing any chain a walk entered never gives ACCEPT/DROP/REJECT, and names the chain', () => {
  const rand = new Prng(SEED)
  let checked = 0
  for (const p of PACKETS) {
    const whole = trace(print(WHOLE), p)
    assert.ok(!whole.result.outcomes.some((o) => o.verdict === 'UNKNOWN'), `${p.name}: the whole dump is judged`)
    const entered = [...whole.entered]
    const removals = entered.map((c) => new Set([c]))
    for (let i = 0; i < 4; i++) removals.push(new Set(entered.filter(() => rand.next() < 0.3)))
    for (const gone of removals) {
      if (gone.size === 0) continue
      const {result} = trace(print(without(WHOLE, gone)), p)
      const what = `${p.name} without ${[...gone].join(', ')} (seed ${SEED})`
      assert.ok(!JUDGED.has(result.verdict), `${what}: ${result.verdict}`)
      assert.ok(result.verdict !== 'DNAT', `${what}: DNAT as if whole`)
      assert.ok(namesOne(result, gone), `${what}: ${JSON.stringify(result.outcomes.map((o) => o.reason))}`)
      checked++
    }
  }
  assert.ok(checked > 50, `${checked} removals checked`)
})

test('fragment property: a dump cut after any rule of its last table, without COMMIT, never judges a packet that needs what was cut', () => {
  const last = WHOLE[WHOLE.length - 1]
  let judgedCut = 0
  for (const p of PACKETS) {
    for (let keep = 0; keep < last.rules.length; keep++) {
      const lost = new Set(last.rules.slice(keep).map((r) => `${last.name}/${r.split(' ')[1]}`))
      const cut = [...WHOLE.slice(0, -1), {...last, rules: last.rules.slice(0, keep)}]
      const {result, entered} = trace(print(cut, false), p)
      const needed = [...entered].some((c) => lost.has(c))
      if (needed) {
        assert.ok(!JUDGED.has(result.verdict), `${p.name}, cut after rule ${keep}: ${result.verdict}`)
        judgedCut++
      }
    }
  }
  assert.ok(judgedCut > 20, `${judgedCut} cuts that mattered checked`)
})
