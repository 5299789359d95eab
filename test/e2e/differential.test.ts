import assert from 'node:assert/strict'
import {after, describe, test} from 'node:test'
import {BufferSource} from '../../src/parse/dump-source.js'
import {IptablesSave} from '../../src/parse/iptables-save.js'
import {NftRuleset} from '../../src/parse/nft-ruleset.js'
import {nftRulesetFromJson} from '../../src/parse/nft-json.js'
import {IptablesTracer} from '../../src/trace/iptables-tracer.js'
import {NftTracer} from '../../src/trace/nft-tracer.js'
import type {Packet, TraceResult} from '../../src/trace/types.js'
import {labGuard} from '../helpers/lab-guard.js'
import type {RuleFaults} from '../fixtures/kube-proxy-rules.js'
import {NODES, OUTSIDE_IP} from '../fixtures/lab-cluster.js'
import type {NetnsLab} from '../lab/netns-lab.js'
import {withLab} from '../helpers/lab-suite.js'
import {inNs} from '../lab/sh.js'
import {Prng} from '../helpers/seeded.js'

/**
 * Differential test: the tracer's prediction against what the kernel does. Rule sets (kube-proxy shaped, in
 * iptables and nftables mode, with random endpoint readiness and random faults) are loaded on node-a; real
 * connections are sent from a pod, from the node itself and from outside; every observed result must be one the
 * tracer predicted, every predicted backend with at least a 20% share must be reached, and the source address the backend saw must
 * show masquerading exactly when the tracer says so.
 */
const why = labGuard()
const RULE_SETS = Number(process.env.KPD_DIFF_RULE_SETS ?? 24)
const MAX_TRIES = 40
const NODE_A = NODES[0]
const CLUSTER_IP = '10.96.10.10'
const CLIENT_A = '10.244.1.100'

type Observed = string // "backend:web-a1" | "refused" | "timeout"

interface Scenario {
  name: string
  fromNs: string
  packet: Packet
  local: boolean
}

describe('tracer vs kernel (differential)', {skip: why}, () => {
  let lab: NetnsLab
  let packets = 0
  let matched = 0
  withLab((l) => (lab = l))
  after(() =>
    process.stdout.write(
      `# differential: ${RULE_SETS} rule sets, ${packets} connections, ${matched} matched a predicted outcome\n`,
    ),
  )

  const webPods = () => lab.pods.filter((p) => p.kind === 'web')

  /** What a connection is expected to look like for one traced outcome. */
  function expectedClass(
    dest: string | null,
    verdict: string,
    packet: Packet,
    masquerade: boolean,
    scenario: Scenario,
  ): Observed {
    if (verdict === 'REJECT') return 'refused'
    if (verdict === 'DROP') return 'timeout'
    if (verdict === 'ACCEPT') return packet.dst === NODE_A.ip ? 'refused' : 'timeout'
    const [ip, port] = dest!.split(':')
    const pod = webPods().find((p) => p.ip === ip)
    if (!pod) return 'timeout'
    if (Number(port) !== pod.port) return 'refused'
    // Unmasqueraded traffic from outside to a pod on the other node: its reply skips node-a and is lost.
    if (!masquerade && !scenario.local && scenario.fromNs === lab.ns('outside') && pod.node !== NODE_A.name)
      return 'timeout'
    return `backend:${pod.name}`
  }

  /** nftables rule sets are read alternately from `nft list ruleset` text and `nft -j list ruleset` JSON. */
  function predict(mode: 'iptables' | 'nftables', packet: Packet, local: boolean, json: boolean): TraceResult {
    const ns = lab.nodeNs(NODE_A)
    if (mode === 'nftables') {
      const rs = json
        ? nftRulesetFromJson(inNs(ns, 'nft', ['-j', 'list', 'ruleset']))
        : NftRuleset.parse(inNs(ns, 'nft', ['list', 'ruleset']))
      return new NftTracer(rs, {localAddresses: [NODE_A.ip], locallyGenerated: local}).trace(packet)
    }
    const dump = IptablesSave.parse(new BufferSource(Buffer.from(inNs(ns, 'iptables-save', []))))
    return new IptablesTracer(dump, {localAddresses: [NODE_A.ip], locallyGenerated: local}).trace(packet)
  }

  for (let n = 0; n < RULE_SETS; n++) {
    const seed = 1000 + n
    test(`rule set ${n} (seed ${seed})`, () => {
      const rnd = new Prng(seed)
      const mode = n % 2 === 0 ? 'iptables' : 'nftables'
      for (const p of webPods()) p.ready = rnd.next() > 0.2
      const eps = webPods().filter((p) => p.ready)
      const faults: RuleFaults = {}
      if (eps.length && rnd.next() < 0.3) faults.dropDnatFor = rnd.pick(eps).ip
      if (rnd.next() < 0.3) faults.staleEndpoint = {ip: rnd.pick(['10.244.1.77', '10.244.2.77']), port: 8080}
      if (eps.length && rnd.next() < 0.25) faults.wrongPortFor = {ip: rnd.pick(eps).ip, port: 9999}
      if (rnd.next() < 0.2) faults.omitNodePorts = true
      if (rnd.next() < 0.15) faults.unhookPrerouting = true
      if (rnd.next() < 0.25) faults.omitMasquerade = true
      lab.services[0].externalTrafficPolicy = rnd.next() < 0.35 ? 'Local' : 'Cluster'
      lab.modes.set(NODE_A.name, mode)
      lab.applyRules(NODE_A.name, faults)
      const scenarios: Scenario[] = [
        {
          name: 'pod→ClusterIP',
          fromNs: lab.podNs('client-a'),
          local: false,
          packet: {src: CLIENT_A, dst: CLUSTER_IP, proto: 'tcp', dport: 80, sport: 40000, inIface: 'cbr0'},
        },
        {
          name: 'outside→NodePort',
          fromNs: lab.ns('outside'),
          local: false,
          packet: {src: OUTSIDE_IP, dst: NODE_A.ip, proto: 'tcp', dport: 30080, sport: 40000, inIface: 'eth0'},
        },
        {
          name: 'pod→ClusterIP:81',
          fromNs: lab.podNs('client-a'),
          local: false,
          packet: {src: CLIENT_A, dst: CLUSTER_IP, proto: 'tcp', dport: 81, sport: 40000, inIface: 'cbr0'},
        },
        {
          name: 'node→ClusterIP',
          fromNs: lab.nodeNs(NODE_A),
          local: true,
          packet: {src: NODE_A.ip, dst: CLUSTER_IP, proto: 'tcp', dport: 80, sport: 40000},
        },
      ]
      const context = `ETP ${lab.services[0].externalTrafficPolicy}, ${mode}${mode === 'nftables' && n % 4 === 3 ? ' (read as JSON)' : ''}, ready ${eps.map((p) => p.name).join(',') || 'none'}, faults ${JSON.stringify(faults)}`
      for (const sc of scenarios) {
        const trace = predict(mode, sc.packet, sc.local, n % 4 === 3)
        assert.notEqual(trace.verdict, 'UNKNOWN', `${sc.name}: the tracer must decide kube-proxy rules (${context})`)
        const predicted = new Map<Observed, {p: number; masquerade: Set<boolean>}>()
        for (const o of trace.outcomes) {
          const cls = expectedClass(o.destination, o.verdict, sc.packet, o.masquerade, sc)
          const cur = predicted.get(cls) ?? {p: 0, masquerade: new Set<boolean>()}
          cur.p += o.probability
          cur.masquerade.add(o.masquerade)
          predicted.set(cls, cur)
        }
        const seen = new Map<Observed, number>()
        const wanted = [...predicted.entries()].filter(([, v]) => v.p >= 0.2).map(([k]) => k)
        for (let t = 0; t < MAX_TRIES; t++) {
          const r = lab.probe(sc.fromNs, sc.packet.dst, sc.packet.dport, 0.6)
          packets++
          let cls: Observed
          if (r.kind === 'answer') {
            const [name, peer] = r.text.split(' ')
            cls = `backend:${name}`
            const pred = predicted.get(cls)
            if (pred && !sc.local && pred.masquerade.size === 1) {
              const masq = [...pred.masquerade][0]
              assert.equal(
                peer !== sc.packet.src,
                masq,
                `${sc.name}: ${name} saw source ${peer}; tracer said masquerade=${masq} (${context})`,
              )
            }
          } else cls = r.kind
          assert.ok(
            predicted.has(cls),
            `${sc.name}: kernel gave ${cls}, tracer predicted ${[...predicted.keys()].join(' | ')} (${context})`,
          )
          matched++
          seen.set(cls, (seen.get(cls) ?? 0) + 1)
          if (t >= 2 && wanted.every((w) => seen.has(w))) break
        }
        for (const w of wanted)
          assert.ok(
            seen.has(w),
            `${sc.name}: predicted ${w} (p=${predicted.get(w)!.p.toFixed(2)}) never happened in ${MAX_TRIES} tries (${context})`,
          )
      }
      for (const p of webPods()) p.ready = true
      lab.services[0].externalTrafficPolicy = 'Cluster'
      lab.modes.set(NODE_A.name, 'iptables')
      lab.applyRules(NODE_A.name, {})
    })
  }
})
