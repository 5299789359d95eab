import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {
  addressOf,
  answered,
  describeTally,
  endpointName,
  endpointProbes,
  endpointVerdict,
  failed,
  probesRan,
  staticPathFor,
  staticWorkingShare,
} from './probe-evidence.js'

/**
 * What the probes show that no other finding states, never dropped: a Service address the static trace says fails
 * for every new connection, yet the probe connected (the rules read are not the rules in force, or the tracer
 * misreads one); and an endpoint whose failures fit neither a backend fault nor a cross-node one.
 */
export const probeContradicts: Check = {
  meta: codeEntry('KPD-PROBE-CONTRADICTS'),
  run(ctx) {
    const run = probesRan(ctx)
    if (!run) return []
    const out: FindingDraft[] = []
    for (const n of run.nodes)
      for (const t of n.tallies) {
        if (t.target.kind !== 'ClusterIP' || t.connected === 0) continue
        const path = staticPathFor(ctx, n.node, t.target)
        if (!path || path.ok === true || staticWorkingShare(ctx, path) > 0) continue
        out.push({
          node: n.node,
          message: `${n.node}: the static trace says no new connection to ${addressOf(t.target)} (${t.target.servicePort}) from ${n.node} works (${path.entry}: ${path.breaksAt ? `breaks at ${path.breaksAt}: ` : ''}${path.detail}), but the live probe got ${describeTally(t)}`,
          text: `Run the diagnosis again: kube-proxy may have rewritten the rules since they were read. If it persists, compare the node's rules with the walk (kproxy-doctor svc … --explain) and report the rule the tracer misreads.`,
        })
      }
    for (const e of endpointProbes(run)) {
      if (endpointVerdict(e) !== 'unexplained') continue
      const failing = e.byNode.filter((b) => failed(b.tally))
      const answering = e.byNode.filter((b) => answered(b.tally))
      const own = e.target.podNode
      const ownNote = own && !e.byNode.some((b) => b.node === own) ? `; its own node ${own} was not probed` : ''
      out.push({
        node: own ?? null,
        message:
          `${endpointName(e.target)} fails from ${failing.map((b) => `${b.node} (${describeTally(b.tally)})`).join(', ')} ` +
          `but answers from ${answering.length ? answering.map((b) => `${b.node} (${describeTally(b.tally)})`).join(', ') : 'no node fully'}${ownNote}: neither a backend fault nor a path between nodes explains it`,
        text: `Probe it again by hand from each node (nc -zv -w 2 ${e.target.host} ${e.target.port}): an intermittent backend, or a filter rule on ${own ?? 'its node'} that treats sources differently.`,
      })
    }
    return out
  },
}
