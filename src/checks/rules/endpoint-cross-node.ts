import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand} from '../../model/reach.js'
import {
  answered,
  describeTally,
  endpointName,
  endpointProbes,
  endpointVerdict,
  failed,
  probesRan,
  staticCause,
} from './probe-evidence.js'

/**
 * An endpoint that answers from its own node but not from another: the path between the two nodes breaks, on the
 * probing node (its route to the pod network, filter OUTPUT) or on the endpoint's node (ip_forward, filter FORWARD,
 * the pod's bridge port). One finding per failing node, unless a static finding (forwarding off, a missing route, a
 * drop) on either node already names the cause: the probe table still shows the failure.
 */
export const endpointCrossNode: Check = {
  meta: codeEntry('KPD-ENDPOINT-CROSS-NODE'),
  run(ctx) {
    const run = probesRan(ctx)
    if (!run) return []
    const out: FindingDraft[] = []
    for (const e of endpointProbes(run)) {
      if (endpointVerdict(e) !== 'cross-node') continue
      const t = e.target
      const own = e.byNode.find((b) => b.node === t.podNode && answered(b.tally))!
      const podNode = ctx.cluster.nodes.find((n) => n.metadata?.name === t.podNode)
      const podCidr = podNode?.spec?.podCIDR
      for (const b of e.byNode.filter((x) => failed(x.tally) && !staticCause(ctx, [x.node, t.podNode!], t.host)))
        out.push({
          node: b.node,
          message:
            `${endpointName(t)} answers from ${t.podNode} (${describeTally(own.tally)}) but not from ${b.node} (${describeTally(b.tally)}): ` +
            `the path from ${b.node} to ${t.podNode}'s pods breaks (on ${b.node}: its route to ${podCidr ?? t.host}, filter OUTPUT; on ${t.podNode}: ip_forward, filter FORWARD, the pod's bridge port)`,
          check: nodeCommand(ctx.reach, b.node, {argv: ['ip', 'route', 'get', t.host]}, [t.host]),
          text: `Then look at ${t.podNode}'s filter table (iptables-save -t filter on that node), its ip_forward and the pod's bridge port.`,
        })
    }
    return out
  },
}
