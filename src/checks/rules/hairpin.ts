import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand} from '../../model/reach.js'
import {linksRead} from '../../parse/bridge-state.js'
import {notReadReason} from '../../node/read/path-reads.js'

export const hairpinOff: Check = {
  meta: codeEntry('KPD-HAIRPIN-OFF'),
  run(ctx) {
    const out: FindingDraft[] = []
    for (const n of ctx.nodes) {
      const net = n.obs.network
      // Without the links, whether a bridge is promiscuous (hairpin not needed) is unknown: not checked (coverage).
      if (!net || !linksRead(net)) continue
      const seen = new Set<string>()
      for (const p of n.expected.ports) {
        for (const e of p.allEndpoints) {
          if (e.nodeName !== n.name || seen.has(e.ip)) continue
          seen.add(e.ip)
          const portName = net.portOfIp.get(e.ip)
          const bp = portName ? net.ports.find((x) => x.port === portName) : undefined
          if (!bp || bp.hairpin || net.promiscuousBridges.has(bp.bridge)) continue
          out.push({
            node: n.name,
            message: `${n.name}: pod ${e.podName ?? e.ip} sits on ${bp.bridge} port ${bp.port} with hairpin_mode 0 (bridge not promiscuous): it cannot reach itself through the Service`,
            evidence: [
              `/sys/class/net/${bp.bridge}/brif/${bp.port}/hairpin_mode = 0`,
              `pod ${net.mappedBy.get(e.ip) ?? `${e.ip} → ${bp.port}`}`,
            ],
            check: nodeCommand(
              ctx.reach,
              n.name,
              {argv: ['cat', `/sys/class/net/${bp.bridge}/brif/${bp.port}/hairpin_mode`]},
              [bp.bridge, bp.port],
            ),
            fix: {
              changes: 'node',
              command: nodeCommand(
                ctx.reach,
                n.name,
                {argv: ['bridge', 'link', 'set', 'dev', bp.port, 'hairpin', 'on'], sudo: true},
                [bp.port],
              ),
            },
            text: "It is reset when the pod is re-created: set the kubelet's --hairpin-mode=hairpin-veth (or the CNI's hairpinMode: true) on the node.",
          })
        }
      }
    }
    return out
  },
}

export const hairpinUnmapped: Check = {
  meta: codeEntry('KPD-HAIRPIN-UNMAPPED'),
  run(ctx) {
    const out: FindingDraft[] = []
    for (const n of ctx.nodes) {
      const net = n.obs.network
      if (!net || !linksRead(net)) continue
      const backends = n.expected.ports.flatMap((p) => p.allEndpoints).filter((e) => e.nodeName === n.name)
      const unmapped = backends.filter((e) => !net.portOfIp.has(e.ip))
      if (unmapped.length === 0) continue
      const mapped = new Set(net.portOfIp.values())
      const off = net.ports.filter((p) => !p.hairpin && !net.promiscuousBridges.has(p.bridge) && !mapped.has(p.port))
      if (off.length === 0) continue
      out.push({
        node: n.name,
        message: `${n.name}: ${off.length} bridge port(s) have hairpin_mode 0 (${off
          .slice(0, 4)
          .map((p) => `${p.bridge}/${p.port}`)
          .join(
            ', ',
          )}) and ${unmapped.map((e) => e.podName ?? e.ip).join(', ')} could not be matched to a port: if one of them sits there, it cannot reach itself through the Service`,
        evidence: [
          ...off.slice(0, 4).map((p) => `/sys/class/net/${p.bridge}/brif/${p.port}/hairpin_mode = 0`),
          ...(net.cniNotes ?? []).slice(0, 2),
          ...(net.failed ?? []).map((f) => notReadReason(f.command, f)),
        ],
        check: nodeCommand(ctx.reach, n.name, {argv: ['bridge', 'fdb', 'show'], filter: ['grep', '-v', 'permanent']}),
        text: 'Map each pod IP to its host veth (the CNI result cache in /var/lib/cni/results, as root), or to its MAC (ip neigh on the node) and the MAC to its bridge port (bridge fdb show).',
      })
    }
    return out
  },
}
