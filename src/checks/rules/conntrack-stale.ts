import type {V1EndpointSlice, V1Service} from '@kubernetes/client-node'
import type {Check, CheckContext, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand} from '../../model/reach.js'
import {canonicalIp, familyOf} from '../../net/address.js'
import {joinHostPort} from '../../net/host-port.js'
import type {ConntrackEntry} from '../../parse/conntrack.js'

/**
 * UDP and SCTP only: a client that keeps its source port keeps hitting the old entry. A new TCP connection takes a new
 * source port and a new entry, so an old TCP entry harms only its own connection (already failing, or closing).
 */
const STICKY_PROTOCOLS = new Set(['udp', 'sctp'])

/** A Service whose conntrack entries are judged: its ClusterIPs, and per port where an entry may still DNAT to. */
interface JudgedService {
  /** "shop/web", "the cluster DNS Service kube-system/kube-dns". */
  label: string
  /** What a stale target is not: "no endpoint of the Service". */
  notWhat: string
  /** What the stale entries break beyond their clients' packets, said after them. */
  consequence: string
  clusterIPs: Set<string>
  /** The port a packet to `dport` of `protocol` uses, with the addresses ("ip" and "ip:port") it may DNAT to now. */
  port(protocol: string, dport: number | undefined): {port: number; portName: string; targets: Set<string>} | undefined
}

function clusterIPsOf(svc: V1Service): Set<string> {
  const spec = svc.spec
  const ips = spec?.clusterIPs ?? (spec?.clusterIP ? [spec.clusterIP] : [])
  return new Set(ips.filter((ip) => ip !== 'None' && familyOf(ip) !== undefined).map(canonicalIp))
}

/** The diagnosed Service: any endpoint (ready or not) is a target kube-proxy may still send to. */
function ownService(ctx: CheckContext): JudgedService {
  return {
    label: `${ctx.service.namespace}/${ctx.service.name}`,
    notWhat: 'no endpoint of the Service',
    consequence: '',
    clusterIPs: clusterIPsOf(ctx.cluster.service),
    port(protocol, dport) {
      const port = ctx.service.ports.find((p) => p.protocol === protocol && p.port === dport)
      if (!port) return undefined
      const targets = new Set(port.allEndpoints.flatMap((e) => [canonicalIp(e.ip), joinHostPort(e.ip, e.port)]))
      return {port: port.port, portName: port.portName, targets}
    },
  }
}

/**
 * The cluster DNS Service, part of every Service's path (clients find the Service by its name): its ready endpoints
 * (cluster.dns.slices) are where its UDP entries may DNAT to.
 */
function dnsService(dns: V1Service, slices: V1EndpointSlice[]): JudgedService {
  const ready = slices.flatMap((s) =>
    (s.endpoints ?? []).filter((e) => e.conditions?.ready ?? true).map((e) => ({addresses: e.addresses, slice: s})),
  )
  return {
    label: `the cluster DNS Service ${dns.metadata?.namespace}/${dns.metadata?.name}`,
    notWhat: 'no ready DNS endpoint',
    consequence: ', so names do not resolve for them',
    clusterIPs: clusterIPsOf(dns),
    port(protocol, dport) {
      const port = (dns.spec?.ports ?? []).find(
        (p) => (p.protocol ?? 'TCP').toLowerCase() === protocol && p.port === dport,
      )
      if (!port) return undefined
      const targets = new Set<string>()
      for (const {addresses, slice} of ready) {
        const numbers = (slice.ports ?? [])
          .filter((sp) => (sp.name ?? '') === (port.name ?? '') && (sp.protocol ?? 'TCP').toLowerCase() === protocol)
          .flatMap((sp) => (sp.port === undefined ? [] : [sp.port]))
        for (const a of addresses) {
          targets.add(canonicalIp(a))
          for (const n of numbers) targets.add(joinHostPort(a, n))
        }
      }
      return {port: port.port, portName: port.name ?? String(port.port), targets}
    },
  }
}

/**
 * The Services whose entries this diagnosis judges: the diagnosed one, and the cluster DNS Service unless that is the
 * one diagnosed or the run judges it as a Service of its own (a scan).
 */
function judgedServices(ctx: CheckContext): JudgedService[] {
  const out = [ownService(ctx)]
  const dns = ctx.cluster.dns.service
  const same = dns?.metadata?.namespace === ctx.service.namespace && dns?.metadata?.name === ctx.service.name
  if (dns && !same && !ctx.dnsJudgedApart) out.push(dnsService(dns, ctx.cluster.dns.slices))
  return out
}

interface StaleGroup {
  node: string
  service: JudgedService
  protocol: string
  serviceAddress: string
  servicePort: number
  portName: string
  target: string
  targetIp: string
  entries: ConntrackEntry[]
}

export const conntrackStale: Check = {
  meta: codeEntry('KPD-CONNTRACK-STALE'),
  run(ctx) {
    const services = judgedServices(ctx)
    const groups = new Map<string, StaleGroup>()
    for (const obs of ctx.observations) {
      if (!obs.reachable || !obs.path) continue
      for (const read of obs.path.conntrack) {
        if (read.result.status !== 'read' || !STICKY_PROTOCOLS.has(read.protocol)) continue
        const address = canonicalIp(read.address)
        const service = services.find((s) => s.clusterIPs.has(address))
        if (!service) continue
        for (const entry of read.result.value) {
          const dnat = entry.dnatTarget
          if (!dnat || canonicalIp(entry.original.dst) !== address) continue
          const port = service.port(read.protocol, entry.original.dport)
          if (!port) continue
          const target = dnat.port === undefined ? dnat.address : joinHostPort(dnat.address, dnat.port)
          if (port.targets.has(dnat.port === undefined ? canonicalIp(dnat.address) : target)) continue
          const key = [obs.name, read.protocol, read.address, port.port, target].join(' ')
          const group = groups.get(key) ?? {
            node: obs.name,
            service,
            protocol: read.protocol,
            serviceAddress: read.address,
            servicePort: port.port,
            portName: port.portName,
            target,
            targetIp: dnat.address,
            entries: [],
          }
          group.entries.push(entry)
          groups.set(key, group)
        }
      }
    }
    const out: FindingDraft[] = []
    for (const g of groups.values()) {
      const clients = [
        ...new Set(
          g.entries.map((e) =>
            e.original.sport === undefined ? e.original.src : joinHostPort(e.original.src, e.original.sport),
          ),
        ),
      ]
      const count = g.entries.length === 1 ? '1 conntrack entry' : `${g.entries.length} conntrack entries`
      const proto = g.protocol.toUpperCase()
      const family = familyOf(g.serviceAddress) === 6 ? ['-f', 'ipv6'] : []
      // The exact tuple: the Service's address and port, DNATed to the gone endpoint.
      const conntrackCommand = (verb: '-L' | '-D') =>
        nodeCommand(
          ctx.reach,
          g.node,
          {
            argv: [
              'conntrack',
              verb,
              ...family,
              '-p',
              g.protocol,
              '--orig-dst',
              g.serviceAddress,
              '--orig-port-dst',
              String(g.servicePort),
              '--reply-src',
              g.targetIp,
            ],
            sudo: true,
          },
          [g.protocol, g.serviceAddress, g.targetIp],
        )
      out.push({
        node: g.node,
        message: `${g.node}: ${count} for ${g.service.label}:${g.portName} (${proto} ${joinHostPort(g.serviceAddress, g.servicePort)}) still DNAT to ${g.target}, which is ${g.service.notWhat}: ${clients.slice(0, 4).join(', ')}${clients.length > 4 ? ` and ${clients.length - 4} more` : ''} get no answer${g.service.consequence}${g.protocol === 'udp' ? ' (each new packet refreshes a UDP entry, so a client that keeps asking from the same port never recovers)' : ''}`,
        evidence: g.entries.slice(0, 4).map((e) => `conntrack: ${e.text}`),
        check: conntrackCommand('-L'),
        fix: {changes: 'node', command: conntrackCommand('-D')},
      })
    }
    return out
  },
}
