import {showChain, type Check, type FindingDraft} from '../check.js'

export const rejectStale: Check = {
  meta: {
    code: 'KPD-REJECT-STALE',
    severity: 'error',
    title: 'A "no endpoints" REJECT/DROP rule is still present although the Service has endpoints',
    hint: 'kube-proxy on this node did not pick up the endpoints: restart it and check its logs.',
  },
  run(ctx) {
    const out: FindingDraft[] = []
    for (const n of ctx.nodes) {
      for (const p of n.programmed) {
        const r = p.clusterIPFilterRule
        if (r && p.expected.internal.endpoints.length > 0)
          out.push({node: n.name, message: `${n.name}: filter KUBE-SERVICES ${r.target}s ${n.expected.clusterIP}:${p.expected.port} although ${p.expected.internal.endpoints.length} endpoint(s) are ready`, evidence: [`filter line ${r.line}: ${r.text}`], hint: showChain(n.name, 'filter', n.expected.clusterIP!)})
        const np = p.nodePortFilterRule
        if (np && p.expected.external.endpoints.length > 0)
          out.push({node: n.name, message: `${n.name}: filter KUBE-EXTERNAL-SERVICES ${np.target}s node port ${p.expected.nodePort} although endpoints are ready`, evidence: [`filter line ${np.line}: ${np.text}`], hint: showChain(n.name, 'filter', `--dport ${p.expected.nodePort}`)})
      }
    }
    return out
  },
}
