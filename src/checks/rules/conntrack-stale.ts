import type {Check, FindingDraft} from '../check.js'
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

interface StaleGroup {
  node: string
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
    const groups = new Map<string, StaleGroup>()
    for (const obs of ctx.observations) {
      if (!obs.reachable || !obs.path) continue
      for (const read of obs.path.conntrack) {
        if (read.result.status !== 'read') continue
        for (const entry of read.result.value) {
          const dnat = entry.dnatTarget
          if (!dnat || canonicalIp(entry.original.dst) !== canonicalIp(read.address)) continue
          if (!STICKY_PROTOCOLS.has(read.protocol)) continue
          const port = ctx.service.ports.find((p) => p.protocol === read.protocol && p.port === entry.original.dport)
          if (!port) continue
          const current = new Set(port.allEndpoints.map((e) => joinHostPort(e.ip, e.port)))
          const target = dnat.port === undefined ? dnat.address : joinHostPort(dnat.address, dnat.port)
          if (dnat.port === undefined ? port.allEndpoints.some((e) => e.ip === dnat.address) : current.has(target))
            continue
          const key = [obs.name, read.protocol, read.address, port.port, target].join(' ')
          const group = groups.get(key) ?? {
            node: obs.name,
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
        message: `${g.node}: ${count} for ${ctx.service.namespace}/${ctx.service.name}:${g.portName} (${proto} ${joinHostPort(g.serviceAddress, g.servicePort)}) still DNAT to ${g.target}, which is no endpoint of the Service: ${clients.slice(0, 4).join(', ')}${clients.length > 4 ? ` and ${clients.length - 4} more` : ''} get no answer${g.protocol === 'udp' ? ' (each new packet refreshes a UDP entry, so a client that keeps asking from the same port never recovers)' : ''}`,
        evidence: g.entries.slice(0, 4).map((e) => `conntrack: ${e.text}`),
        check: conntrackCommand('-L'),
        fix: {changes: 'node', command: conntrackCommand('-D')},
      })
    }
    return out
  },
}
