import {showChain, type Check, type FindingDraft} from '../check.js'

export const nodePortMissing: Check = {
  meta: {
    code: 'KPD-NODEPORT-MISSING',
    severity: 'error',
    title: 'NodePort not programmed on the node',
    hint: 'kube-proxy on this node has not synced the NodePort: check its logs and nodePortAddresses, then restart it.',
  },
  run(ctx) {
    const out: FindingDraft[] = []
    for (const n of ctx.nodes) {
      if (!n.infra.hasServicesChain) continue
      const anyNodePort = n.programmed.some((p) => p.expected.nodePort && p.expected.hasEndpoints)
      if (anyNodePort && !n.infra.nodePortsJump)
        out.push({node: n.name, message: `${n.name}: nat KUBE-SERVICES has no jump to KUBE-NODEPORTS: no NodePort works on this node`, hint: showChain(n.name, 'nat', 'KUBE-NODEPORTS')})
      for (const p of n.programmed) {
        const e = p.expected
        if (!e.nodePort || !e.hasEndpoints) continue
        if (!p.nodePortRule) out.push({node: n.name, message: `${n.name}: node port ${e.nodePort}/${e.protocol} of ${e.svcPortName} is missing from nat KUBE-NODEPORTS`, hint: showChain(n.name, 'nat', `--dport ${e.nodePort}`)})
        else if (p.nodePortRule.target !== e.chains.ext)
          out.push({
            node: n.name,
            message: `${n.name}: node port ${e.nodePort} jumps to ${p.nodePortRule.target}, expected ${e.chains.ext}`,
            evidence: [`nat line ${p.nodePortRule.line}: ${p.nodePortRule.text}`],
            hint: showChain(n.name, 'nat', `--dport ${e.nodePort}`),
          })
      }
    }
    return out
  },
}
