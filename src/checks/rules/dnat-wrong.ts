import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand} from '../../model/reach.js'
import {endpointChains} from '../../model/dataplane.js'

export const dnatWrong: Check = {
  meta: codeEntry('KPD-DNAT-WRONG'),
  run(ctx) {
    const out: FindingDraft[] = []
    for (const n of ctx.nodes) {
      for (const p of n.programmed) {
        const byIp = new Map(p.expected.allEndpoints.map((e) => [e.ip, e]))
        const bySep = new Map(p.expected.allEndpoints.map((e) => [p.want.endpoint(e), e]))
        for (const {endpoints} of endpointChains(p))
          for (const prog of endpoints) {
            if (!prog.backend?.address) continue
            const owner = bySep.get(prog.chain)
            const sameIp = prog.backend?.ip ? byIp.get(prog.backend?.ip) : undefined
            const expected = owner ?? sameIp
            if (!expected || expected.address === prog.backend?.address) continue
            out.push({
              node: n.name,
              message: `${n.name}: ${prog.chain} DNATs to ${prog.backend?.address}, but the endpoint${expected.podName ? ` (pod ${expected.podName})` : ''} is ${expected.address} (targetPort ${p.expected.targetPort})`,
              evidence: prog.dnatRule ? [`${prog.dnatRule.table} line ${prog.dnatRule.line}: ${prog.dnatRule.text}`] : [],
              command: nodeCommand(ctx.reach, n.name, n.dataplane.show(prog.chain), prog.chain.split(' ')),
            })
          }
      }
    }
    return out
  },
}
