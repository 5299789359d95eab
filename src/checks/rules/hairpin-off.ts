import type {Check, FindingDraft} from '../check.js'

export const hairpinOff: Check = {
  meta: {
    code: 'KPD-HAIRPIN-OFF',
    severity: 'error',
    title: "Hairpin is off on a backend Pod's bridge port",
    hint: 'Run the kubelet with --hairpin-mode=hairpin-veth (or promiscuous-bridge), or set it on the port: echo 1 > /sys/class/net/BRIDGE/brif/PORT/hairpin_mode',
  },
  run(ctx) {
    const out: FindingDraft[] = []
    for (const n of ctx.nodes) {
      const net = n.obs.network
      if (!net) continue
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
            evidence: [`/sys/class/net/${bp.bridge}/brif/${bp.port}/hairpin_mode = 0`],
            hint: `ssh ${n.name} cat /sys/class/net/${bp.bridge}/brif/${bp.port}/hairpin_mode; check the kubelet's --hairpin-mode`,
          })
        }
      }
    }
    return out
  },
}
