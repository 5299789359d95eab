import type {IptablesSave} from '../parse/iptables-save.js'
import type {IpsetState} from '../parse/ipset-save.js'
import {vsKey, type VirtualServer} from '../parse/ipvsadm.js'
import {IptablesTracer} from './iptables-tracer.js'
import {summarize, type Packet, type TraceOutcome, type TraceResult, type TraceStep, type Tracer} from './types.js'
import {joinHostPort} from '../net/host-port.js'
import {isLocalAddress} from './walk.js'

const LOOP_BACK_MATCH = /--match-set (KUBE-(?:6-)?LOOP-BACK) /

export interface IpvsTraceOptions {
  localAddresses: string[]
  /** Addresses bound to kube-ipvs0: local to the node, so service traffic is delivered to IPVS. */
  vips: string[]
  ipsets: IpsetState
  locallyGenerated?: boolean
  /** The node's bridges (for `-m physdev --physdev-is-in`). */
  bridges?: string[]
}

/**
 * kube-proxy's IPVS mode: the iptables glue first (marks, ipset matches), then, for a packet delivered locally to a
 * virtual server, IPVS picks a real server (every one with weight > 0, in proportion to its weight) and rewrites the
 * destination; POSTROUTING then masquerades marked traffic and KUBE-LOOP-BACK (hairpin) traffic.
 */
export class IpvsTracer implements Tracer {
  private readonly iptables: IptablesTracer
  private readonly local: Set<string>

  constructor(
    private readonly dump: IptablesSave,
    private readonly servers: VirtualServer[],
    private readonly opts: IpvsTraceOptions,
  ) {
    this.iptables = new IptablesTracer(dump, {
      localAddresses: [...opts.localAddresses, ...opts.vips],
      ipsets: opts.ipsets,
      locallyGenerated: opts.locallyGenerated,
      bridges: opts.bridges,
    })
    this.local = new Set([...opts.localAddresses, ...opts.vips])
  }

  trace(packet: Packet): TraceResult {
    const base = this.iptables.trace(packet)
    const key = vsKey(packet.proto, packet.dst, packet.dport)
    const vs = this.servers.find((v) => vsKey(v.proto, v.address, v.port) === key)
    const out: TraceOutcome[] = []
    for (const o of base.outcomes) {
      if (o.verdict !== 'ACCEPT' || !vs || !isLocalAddress(this.local, packet.dst)) {
        out.push(o)
        continue
      }
      const vsStep: TraceStep = {table: 'ipvs', chain: `VS ${key}`, line: vs.line, rule: vs.text}
      const reals = vs.reals.filter((r) => r.weight > 0)
      const total = reals.reduce((a, r) => a + r.weight, 0)
      if (reals.length === 0) {
        out.push({
          ...o,
          verdict: 'DROP',
          steps: [...o.steps, vsStep],
          reason: `virtual server ${key} has no real server with weight > 0`,
        })
        continue
      }
      const marked = o.steps.some((s) => /-j KUBE-MARK-MASQ\b/.test(s.rule)) && this.masqueradesMarked()
      for (const r of reals) {
        const hairpin = r.address === packet.src && this.loopBack(r.address, packet.proto, r.port)
        out.push({
          verdict: 'DNAT',
          destination: joinHostPort(r.address, r.port),
          masquerade: o.masquerade || marked || hairpin,
          probability: (o.probability * r.weight) / total,
          steps: [
            ...o.steps,
            vsStep,
            {table: 'ipvs', chain: `RS ${joinHostPort(r.address, r.port)}`, line: r.line, rule: r.text},
          ],
          ...(vs.persistent ? {sticky: true} : {}),
        })
      }
    }
    return summarize(out)
  }

  private masqueradesMarked(): boolean {
    return this.dump
      .rules('nat', 'KUBE-POSTROUTING')
      .some((r) => r.target === 'MASQUERADE' && !LOOP_BACK_MATCH.test(r.text))
  }

  /** Hairpin traffic masqueraded by the loop-back set the MASQUERADE rule names (KUBE-LOOP-BACK; KUBE-6-LOOP-BACK in ip6tables). */
  private loopBack(ip: string, proto: string, port: number): boolean {
    const set = this.dump
      .rules('nat', 'KUBE-POSTROUTING')
      .filter((r) => r.target === 'MASQUERADE')
      .map((r) => LOOP_BACK_MATCH.exec(r.text)?.[1])
      .find((name) => name !== undefined)
    return !!set && this.opts.ipsets.has(set, `${ip},${proto}:${port},${ip}`)
  }
}
