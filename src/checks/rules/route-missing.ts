import type {V1Node} from '@kubernetes/client-node'
import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand} from '../../model/reach.js'
import type {ExpectedEndpoint} from '../../model/expected.js'
import {canonicalIp, familyOf, inCidr} from '../../net/address.js'
import type {Route} from '../../parse/ip-route.js'
import type {RouteAnswer} from '../../node/read/path-reads.js'

const nodeAddresses = (node: V1Node | undefined) =>
  (node?.status?.addresses ?? [])
    .filter((a) => a.type === 'InternalIP' || a.type === 'ExternalIP')
    .map((a) => canonicalIp(a.address))
/** The node address of the endpoint's family: an IPv6 pod CIDR is routed via the node's IPv6 address. */
const sameFamily = (addresses: string[], ip: string) => addresses.find((a) => familyOf(a) === familyOf(ip))
const podCidrs = (node: V1Node | undefined) => node?.spec?.podCIDRs ?? (node?.spec?.podCIDR ? [node.spec.podCIDR] : [])

/**
 * Why the route a node picks for a remote endpoint cannot reach that endpoint's node, or undefined when it can (or
 * when nothing shows that it cannot: a route through a tunnel device, a gateway in the pod CIDR, another table).
 */
function brokenRoute(
  answer: RouteAnswer,
  table: Route[] | undefined,
  endpointIp: string,
  home: V1Node | undefined,
  nodes: V1Node[],
): string | undefined {
  if (answer.kind === 'no-route')
    return answer.type === 'none'
      ? `the kernel has no route ("${answer.message}")`
      : `the route is ${answer.type} ("${answer.message}")`
  const route = answer.route
  if (['unreachable', 'blackhole', 'prohibit'].includes(route.type)) return `the route is ${route.type}`
  const homeAddresses = nodeAddresses(home)
  if (route.via && homeAddresses.includes(route.via)) return undefined
  const other = route.via ? nodes.find((n) => n !== home && nodeAddresses(n).includes(route.via!)) : undefined
  if (other)
    return `the route goes via ${route.via}, the address of ${other.metadata?.name}, not of ${home?.metadata?.name}`
  // No route of the main table but the default one covers the address, and the kernel's answer is that default route.
  const fallback = table?.find((r) => r.destination === 'default' && r.type === 'unicast')
  const specific = table?.some((r) => r.destination !== 'default' && inCidr(r.destination, endpointIp))
  if (!table || specific || !fallback || podCidrs(home).length === 0) return undefined
  if (route.via !== fallback.via || route.dev !== fallback.dev) return undefined
  const homeAddress = sameFamily(homeAddresses, endpointIp)
  return `only the default route matches (${route.via ? `via ${route.via} ` : ''}dev ${route.dev}), not a route to ${home?.metadata?.name}${homeAddress ? ` (${homeAddress})` : ''}`
}

export const routeMissing: Check = {
  meta: codeEntry('KPD-ROUTE-MISSING'),
  run(ctx) {
    const out: FindingDraft[] = []
    const endpoints = new Map<string, ExpectedEndpoint>()
    for (const e of ctx.service.ports.flatMap((p) => p.allEndpoints))
      if (!endpoints.has(canonicalIp(e.ip))) endpoints.set(canonicalIp(e.ip), e)
    for (const obs of ctx.observations) {
      if (!obs.reachable || !obs.path) continue
      // Each endpoint against the main table of its own family: an IPv6 endpoint's default route is IPv6's.
      const tables = {4: obs.path.routeTable, 6: obs.path.routeTable6}
      // One finding per endpoint node and reason: the endpoints behind one missing route are listed together.
      const groups = new Map<
        string,
        {home: string; reason: string; cidr?: string; endpoints: ExpectedEndpoint[]; evidence: string[]}
      >()
      for (const lookup of obs.path.routeLookups) {
        const endpoint = endpoints.get(canonicalIp(lookup.address))
        if (!endpoint?.nodeName || endpoint.nodeName === obs.name || lookup.result.status !== 'read') continue
        const home = ctx.cluster.nodes.find((n) => n.metadata?.name === endpoint.nodeName)
        const table = tables[familyOf(endpoint.ip) ?? 4]
        const reason = brokenRoute(
          lookup.result.value,
          table?.status === 'read' ? table.value : undefined,
          endpoint.ip,
          home,
          ctx.cluster.nodes,
        )
        if (!reason) continue
        const key = `${endpoint.nodeName} ${reason}`
        const group = groups.get(key) ?? {
          home: endpoint.nodeName,
          reason,
          cidr: podCidrs(home).find((c) => inCidr(c, endpoint.ip)),
          endpoints: [],
          evidence: [],
        }
        group.endpoints.push(endpoint)
        const answer = lookup.result.value
        group.evidence.push(
          `ip route get ${endpoint.ip}: ${answer.kind === 'route' ? answer.route.text : answer.message}`,
        )
        groups.set(key, group)
      }
      for (const g of groups.values()) {
        const listed = g.endpoints.map((e) => `${e.ip} (pod ${e.podName ?? '?'})`).join(', ')
        const cidr = g.cidr ? `${g.home}'s pod CIDR ${g.cidr}` : `the pod addresses of ${g.home}`
        const home = ctx.cluster.nodes.find((n) => n.metadata?.name === g.home)
        const gateway = sameFamily(nodeAddresses(home), g.endpoints[0].ip)
        out.push({
          node: obs.name,
          message: `${obs.name}: no working route to ${cidr}: ${g.reason}, so ${obs.name} cannot reach endpoint${g.endpoints.length > 1 ? 's' : ''} ${listed} on ${g.home}`,
          evidence: g.evidence.slice(0, 4),
          check: nodeCommand(ctx.reach, obs.name, {argv: ['ip', 'route', 'get', g.endpoints[0].ip]}, [
            g.endpoints[0].ip,
          ]),
          fix: {
            changes: 'node',
            command:
              g.cidr && gateway
                ? nodeCommand(
                    ctx.reach,
                    obs.name,
                    {argv: ['ip', 'route', 'replace', g.cidr, 'via', gateway], sudo: true},
                    [g.cidr, gateway],
                  )
                : undefined,
            text: `Restart the CNI agent on ${obs.name}: it owns the route${g.cidr && gateway ? ' (the command adds it by hand until then)' : ''}.`,
          },
          text: `Expected: via ${g.home}${gateway ? ` (${gateway})` : ''} or the CNI's tunnel.`,
        })
      }
    }
    return out
  },
}
