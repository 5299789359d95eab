import {showChain, type Check, type FindingDraft} from '../check.js'

export const hookMissing: Check = {
  meta: {
    code: 'KPD-HOOK-MISSING',
    severity: 'error',
    title: "kube-proxy's chains are missing or not hooked into the nat table",
    hint: 'Is kube-proxy running on the node, in iptables mode? Check its logs and restart it: it re-creates the jumps on its next sync.',
  },
  run(ctx) {
    const out: FindingDraft[] = []
    for (const n of ctx.nodes) {
      if (n.expected.notProxied) continue
      if (!n.infra.hasServicesChain) {
        out.push({node: n.name, message: `${n.name} has no nat KUBE-SERVICES chain: kube-proxy (iptables mode) has not programmed this node`, hint: `ssh ${n.name} 'sudo crictl ps --name kube-proxy; sudo iptables-save -t nat | head -40'`})
        continue
      }
      const missing = [
        !n.infra.preroutingHook && 'PREROUTING → KUBE-SERVICES (traffic from pods and outside)',
        !n.infra.outputHook && 'OUTPUT → KUBE-SERVICES (traffic from the node itself)',
        !n.infra.postroutingHook && 'POSTROUTING → KUBE-POSTROUTING (masquerade)',
      ].filter((x): x is string => !!x)
      if (missing.length > 0)
        out.push({node: n.name, message: `${n.name}: nat ${missing.join(', ')} jump missing`, hint: `${showChain(n.name, 'nat', '-A PREROUTING\\|-A OUTPUT\\|-A POSTROUTING')}   # then restart kube-proxy on ${n.name}`})
    }
    return out
  },
}
