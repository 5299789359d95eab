import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand, type Reach} from '../../model/reach.js'
import type {EmptyRulesRead, NodeObservation} from '../../node/observation.js'

/**
 * A rules read that printed nothing: what to run next. Where another read shows kube-proxy's rules in one iptables
 * backend, that backend's save; else `iptables -V`, which names the backend the node's iptables-save reads.
 */
function emptyReadNext(reach: Reach, node: string, e: EmptyRulesRead): Pick<FindingDraft, 'check' | 'text'> {
  if (e.rulesIn) {
    const save = `iptables-${e.rulesIn}-save`
    return {
      check: nodeCommand(reach, node, {argv: [save], sudo: true, filter: ['head']}),
      text: `kube-proxy's rules are in the iptables-${e.rulesIn} backend, which the node's ${e.command} does not read: run ${save} to see them, and read the node with it (or make ${e.command} that backend's).`,
    }
  }
  return {
    check: nodeCommand(reach, node, {argv: ['iptables', '-V']}),
    text: `An empty read is no evidence of what kube-proxy programmed (a node it never programmed still has tables). Likely: the read ran without root (sudo -n ${e.command} by hand), or ${e.command} is not the backend kube-proxy writes to: iptables -V names the backend; if it says (legacy), run iptables-nft-save, if (nf_tables), iptables-legacy-save.`,
  }
}

function unreadable(reach: Reach, o: NodeObservation): FindingDraft {
  const message = `${o.name} could not be read: ${o.error ?? 'unknown error'}`
  if (o.emptyRead) return {node: o.name, message, ...emptyReadNext(reach, o.name, o.emptyRead)}
  return {
    node: o.name,
    message,
    check: nodeCommand(reach, o.name, {argv: ['iptables-save'], sudo: true, filter: ['head']}),
    text: 'Run it by hand to see why the doctor could not read the node.',
  }
}

export const nodeUnreadable: Check = {
  meta: codeEntry('KPD-NODE-UNREADABLE'),
  run: (ctx) => ctx.observations.filter((o) => !o.reachable).map((o) => unreadable(ctx.reach, o)),
}
