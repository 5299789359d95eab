import {showChain, type Check, type FindingDraft} from '../check.js'

export const masqueradeMissing: Check = {
  meta: {
    code: 'KPD-MASQ-MISSING',
    severity: 'error',
    title: 'Masquerade mark or MASQUERADE rule missing',
    hint: 'Without it, NodePort/external traffic to other nodes and hairpin traffic lose their replies. Restart kube-proxy; check masqueradeBit in its config.',
  },
  run(ctx) {
    const out: FindingDraft[] = []
    const want = ctx.service.masqueradeMark
    const hex = `0x${want.toString(16)}`
    for (const n of ctx.nodes) {
      if (!n.infra.hasServicesChain) continue
      const i = n.infra
      if (!i.markMasqRule) out.push({node: n.name, message: `${n.name}: nat KUBE-MARK-MASQ does not set the masquerade mark ${hex}`, hint: showChain(n.name, 'nat', 'KUBE-MARK-MASQ')})
      else if (i.markMasqValue !== want)
        out.push({node: n.name, message: `${n.name}: KUBE-MARK-MASQ sets mark 0x${(i.markMasqValue ?? 0).toString(16)}, expected ${hex} (masqueradeBit ${Math.log2(want)})`, evidence: [`nat line ${i.markMasqRule.line}: ${i.markMasqRule.text}`], hint: showChain(n.name, 'nat', 'KUBE-MARK-MASQ')})
      if (!i.masqueradeRule) out.push({node: n.name, message: `${n.name}: nat KUBE-POSTROUTING has no MASQUERADE rule: marked traffic leaves with its original source`, hint: showChain(n.name, 'nat', 'KUBE-POSTROUTING')})
      else if (i.postroutingMark !== undefined && i.postroutingMark !== want)
        out.push({node: n.name, message: `${n.name}: KUBE-POSTROUTING tests mark 0x${i.postroutingMark.toString(16)}, expected ${hex}`, hint: showChain(n.name, 'nat', 'KUBE-POSTROUTING')})
      for (const p of n.programmed)
        for (const e of p.endpoints)
          if (e.dnatRule && !e.hairpinMasq)
            out.push({
              node: n.name,
              message: `${n.name}: ${e.sepChain} lacks "-s ${e.dnatIp}/32 -j KUBE-MARK-MASQ": the pod ${e.dnatTo} cannot reach itself through the Service`,
              evidence: [`nat line ${e.dnatRule.line}: ${e.dnatRule.text}`],
              hint: showChain(n.name, 'nat', e.sepChain),
            })
    }
    return out
  },
}
