import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand} from '../../model/reach.js'
import {effectiveRouteLocalnet} from '../../parse/sysctl.js'

const KEY = 'net.ipv4.conf.all.route_localnet'

/**
 * iptables mode answers NodePorts on 127.0.0.1 (localhostNodePorts) and sets conf.all.route_localnet=1 at start for
 * it: a packet from 127.0.0.1 DNATed to a pod is routed out of the pod's interface, and the kernel drops it as a
 * martian unless route_localnet is on for that interface (conf.all or conf.IFACE). Judged on the interfaces the
 * node's routes to the endpoints use (local traffic takes the ClusterIP chain, internalTrafficPolicy applies).
 */
export const routeLocalnetOff: Check = {
  meta: codeEntry('KPD-ROUTE-LOCALNET-OFF'),
  run(ctx) {
    if (!ctx.cluster.proxyConfig.localhostNodePorts) return []
    const out: FindingDraft[] = []
    for (const view of ctx.nodes) {
      if (view.mode.mode !== 'iptables') continue
      const nodePorts = [
        ...new Set(view.expected.ports.filter((p) => p.nodePort && !p.clusterIP.includes(':')).map((p) => p.nodePort!)),
      ]
      const sysctls = view.obs.path?.sysctls
      if (nodePorts.length === 0 || sysctls?.status !== 'read') continue
      const endpoints = new Set(view.expected.ports.flatMap((p) => p.internal.endpoints.map((e) => e.ip)))
      const offOn = new Map<string, string[]>()
      for (const lookup of view.obs.path?.routeLookups ?? []) {
        if (!endpoints.has(lookup.address) || lookup.result.status !== 'read' || lookup.result.value.kind !== 'route')
          continue
        const dev = lookup.result.value.route.dev
        if (!dev || effectiveRouteLocalnet(sysctls.value, dev) !== false) continue
        offOn.set(dev, [...(offOn.get(dev) ?? []), lookup.address])
      }
      if (offOn.size === 0) continue
      const devs = [...offOn.keys()].sort()
      const reached = devs.map((dev) => `${offOn.get(dev)!.join(', ')} (out of ${dev})`).join('; ')
      const ports = nodePorts.map((p) => `127.0.0.1:${p}`).join(', ')
      out.push({
        node: view.name,
        message: `${view.name}: route_localnet is off on ${devs.join(', ')}: connections to ${ports} (localhost NodePorts of ${ctx.service.namespace}/${ctx.service.name}) on ${view.name} fail: the kernel drops a packet from 127.0.0.1 routed to endpoint ${reached} as a martian`,
        evidence: [KEY, ...devs.map((dev) => `net.ipv4.conf.${dev.replaceAll('.', '/')}.route_localnet`)].flatMap(
          (key) => {
            const value = sysctls.value.values.get(key)
            return value === undefined ? [] : [`sysctl ${key} = ${value}`]
          },
        ),
        check: nodeCommand(ctx.reach, view.name, {argv: ['sysctl', KEY]}),
        fix: {
          changes: 'node',
          command: nodeCommand(ctx.reach, view.name, {argv: ['sysctl', '-w', `${KEY}=1`], sudo: true}),
        },
        text: `kube-proxy sets it only when it starts: find what reset it on ${view.name} (a sysctl.d file re-applied, a hardening script). To turn localhost NodePorts off instead, set iptables.localhostNodePorts: false in kube-proxy's configuration.`,
      })
    }
    return out
  },
}
