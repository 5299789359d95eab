import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand} from '../../model/reach.js'
import {restartKubeProxy} from './kube-proxy-pod.js'

export const masqueradeMissing: Check = {
  meta: codeEntry('KPD-MASQ-MISSING'),
  run(ctx) {
    const out: FindingDraft[] = []
    const want = ctx.service.masqueradeMark
    const hex = `0x${want.toString(16)}`
    for (const n of ctx.nodes) {
      if (!n.infra.hasServicesChain) continue
      const i = n.infra
      const v = n.dataplane.vocab
      if (!i.markMasqRule)
        out.push({
          node: n.name,
          message: `${n.name}: ${v.markChain} does not set the masquerade mark ${hex}`,
          check: nodeCommand(ctx.reach, n.name, n.dataplane.show(v.markChain), [v.markChain]),
          fix: restartKubeProxy(ctx, n.name),
        })
      else if (i.markMasqValue !== want)
        out.push({
          node: n.name,
          message: `${n.name}: ${v.markChain} sets mark 0x${(i.markMasqValue ?? 0).toString(16)}, expected ${hex} (masqueradeBit ${Math.log2(want)})`,
          evidence: [`${i.markMasqRule.table} line ${i.markMasqRule.line}: ${i.markMasqRule.text}`],
          check: nodeCommand(ctx.reach, n.name, n.dataplane.show(v.markChain), [v.markChain]),
          fix: restartKubeProxy(ctx, n.name),
        })
      if (!i.masqueradeRule)
        out.push({
          node: n.name,
          message: `${n.name}: ${v.masqChain} has no masquerade rule: marked traffic leaves with its original source`,
          check: nodeCommand(ctx.reach, n.name, n.dataplane.show(v.masqChain), [v.masqChain]),
          fix: restartKubeProxy(ctx, n.name),
        })
      else if (i.postroutingMark !== undefined && i.postroutingMark !== want)
        out.push({
          node: n.name,
          message: `${n.name}: ${v.masqChain} tests mark 0x${i.postroutingMark.toString(16)}, expected ${hex}`,
          check: nodeCommand(ctx.reach, n.name, n.dataplane.show(v.masqChain), [v.masqChain]),
          fix: restartKubeProxy(ctx, n.name),
        })
      for (const p of n.programmed)
        for (const e of p.endpoints)
          if (e.dnatRule && !e.hairpinMasq)
            out.push({
              node: n.name,
              message: `${n.name}: ${e.chain} does not mark traffic from ${e.backend?.ip} for masquerade: the pod ${e.backend?.address} cannot reach itself through the Service`,
              evidence: [`${e.dnatRule.table} line ${e.dnatRule.line}: ${e.dnatRule.text}`],
              check: nodeCommand(ctx.reach, n.name, n.dataplane.show(e.chain), e.chain.split(' ')),
              fix: restartKubeProxy(ctx, n.name),
            })
    }
    return out
  },
}
