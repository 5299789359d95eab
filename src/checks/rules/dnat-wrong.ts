import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand} from '../../model/reach.js'
import {restartKubeProxy} from './kube-proxy-pod.js'
import {endpointChains} from '../../model/dataplane.js'

export const dnatWrong: Check = {
  meta: codeEntry('KPD-DNAT-WRONG'),
  run(ctx) {
    const out: FindingDraft[] = []
    // One finding per endpoint chain and wrong target: an IPVS real server sits in every virtual server of the port
    // (ClusterIP, NodePort…) and is one mistake, with each virtual server's line as evidence.
    const seen = new Map<string, FindingDraft>()
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
            const evidence = prog.dnatRule
              ? `${prog.dnatRule.table} line ${prog.dnatRule.line}: ${prog.dnatRule.text}`
              : undefined
            const key = `${n.name}\0${prog.chain}\0${prog.backend.address}\0${expected.address}`
            const same = seen.get(key)
            if (same) {
              if (evidence && !same.evidence?.includes(evidence)) same.evidence?.push(evidence)
              continue
            }
            const draft: FindingDraft = {
              node: n.name,
              message: `${n.name}: ${prog.chain} DNATs to ${prog.backend?.address}, but the endpoint${expected.podName ? ` (pod ${expected.podName})` : ''} is ${expected.address} (targetPort ${p.expected.targetPort})`,
              evidence: evidence ? [evidence] : [],
              check: nodeCommand(ctx.reach, n.name, n.dataplane.show(prog.chain), prog.chain.split(' ')),
              fix: restartKubeProxy(ctx, n.name),
            }
            seen.set(key, draft)
            out.push(draft)
          }
      }
    }
    return out
  },
}
