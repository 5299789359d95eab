import type {Check, FindingDraft} from '../check.js'

export const nodeDiverges: Check = {
  meta: {
    code: 'KPD-NODE-DIVERGES',
    severity: 'warning',
    title: 'This node programs a different endpoint set than the other nodes',
    hint: 'A stuck or crashed kube-proxy on this node: compare its logs and sync metrics with a healthy node, then restart it.',
  },
  run(ctx) {
    const out: FindingDraft[] = []
    if (ctx.nodes.length < 2 || ctx.service.notProxied) return out
    ctx.service.ports.forEach((port, i) => {
      if (port.internal.local) return
      const sigs = new Map<string, string[]>()
      for (const n of ctx.nodes) {
        const p = n.programmed[i]
        if (!p) continue
        const sig =
          p.endpoints
            .map((e) => e.dnatTo ?? '?')
            .sort()
            .join(', ') || '(none)'
        sigs.set(sig, [...(sigs.get(sig) ?? []), n.name])
      }
      if (sigs.size < 2) return
      // The most common set wins; on a tie, the set the EndpointSlices ask for.
      const wanted =
        port.internal.endpoints
          .map((e) => e.address)
          .sort()
          .join(', ') || '(none)'
      const [majority, majorityNodes] = [...sigs.entries()].sort((a, b) => b[1].length - a[1].length || Number(b[0] === wanted) - Number(a[0] === wanted))[0]
      for (const [sig, nodes] of sigs) {
        if (sig === majority) continue
        for (const node of nodes)
          out.push({node, message: `${node} sends ${port.svcPortName} to [${sig}] while ${majorityNodes.length} other node(s) (${majorityNodes.slice(0, 3).join(', ')}) send it to [${majority}]`})
      }
    })
    return out
  },
}
