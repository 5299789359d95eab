import {programmedViews, type Check, type FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {restartServiceProxy} from './kube-proxy-pod.js'

export const nodeDiverges: Check = {
  meta: codeEntry('KPD-NODE-DIVERGES'),
  run(ctx) {
    const out: FindingDraft[] = []
    const views = programmedViews(ctx)
    if (views.length < 2 || ctx.service.notProxied) return out
    // Where another implementer programs the node (kube-router), the message names it.
    const byOf = (node: string) => {
      const by = views.find((v) => v.name === node)?.by
      return by ? ` (${by})` : ''
    }
    const signature = (addresses: string[]) => addresses.sort().join(', ') || '(none)'
    ctx.service.ports.forEach((port, i) => {
      if (port.internal.local) return
      // Nodes are compared only with nodes that should program the same set (topology hints differ by zone).
      const groups = new Map<string, Array<{node: string; sig: string}>>()
      for (const n of views) {
        const p = n.programmed[i]
        if (!p) continue
        const wanted = signature(p.expected.internal.endpoints.map((e) => e.address))
        groups.set(wanted, [
          ...(groups.get(wanted) ?? []),
          {node: n.name, sig: signature(p.endpoints.map((e) => e.backend?.address ?? '?'))},
        ])
      }
      for (const [wanted, members] of groups) {
        const sigs = new Map<string, string[]>()
        for (const m of members) sigs.set(m.sig, [...(sigs.get(m.sig) ?? []), m.node])
        if (sigs.size < 2) continue
        // The most common set wins; on a tie, the set the EndpointSlices ask for.
        const [majority, majorityNodes] = [...sigs.entries()].sort(
          (a, b) => b[1].length - a[1].length || Number(b[0] === wanted) - Number(a[0] === wanted),
        )[0]
        for (const [sig, nodes] of sigs) {
          if (sig === majority) continue
          for (const node of nodes)
            out.push({
              node,
              message: `${node}${byOf(node)} sends ${port.svcPortName} to {${sig}} while ${majorityNodes.length} other node(s) (${majorityNodes.slice(0, 3).join(', ')}) send it to {${majority}}`,
              fix: restartServiceProxy(ctx, node),
            })
        }
      }
    })
    return out
  },
}
