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
  type EndpointProbes,
} from './probe-evidence.js'
import {addEvidence, causeOnWay} from './path-causes.js'

/**
 * Endpoints that answer from their own node but not from another: the path between the two nodes breaks. Both halves
 * are walked (the probing node's route and filter OUTPUT; the endpoint node's ip_forward, filter FORWARD and the second
 * half of the Service's paths there): when one of them breaks, the probe is evidence on that finding, on the node where
 * it breaks. When neither does, nobody can tell which node: one warning per pair of nodes, blaming neither.
 */
export const endpointCrossNode: Check = {
  meta: codeEntry('KPD-ENDPOINT-CROSS-NODE'),
  run(ctx) {
    const run = probesRan(ctx)
    if (!run) return []
    const unexplained = new Map<string, {from: string; home: string; endpoints: EndpointProbes[]}>()
    for (const e of endpointProbes(run)) {
      if (endpointVerdict(e) !== 'cross-node') continue
      const t = e.target
      const home = t.podNode!
      const own = e.byNode.find((b) => b.node === home && answered(b.tally))!
      for (const b of e.byNode.filter((x) => failed(x.tally))) {
        const cause = causeOnWay(ctx, b.node, {ip: t.host, node: home})
        if (cause) {
          addEvidence(
            ctx,
            cause,
            `live probe: ${endpointName(t)} answers from ${home} (${describeTally(own.tally)}) but not from ${b.node} (${describeTally(b.tally)})`,
          )
          continue
        }
        const key = `${b.node}\0${home}`
        const pair = unexplained.get(key) ?? {from: b.node, home, endpoints: []}
        pair.endpoints.push(e)
        unexplained.set(key, pair)
      }
    }
    const out: FindingDraft[] = []
    for (const {from, home, endpoints} of unexplained.values()) {
      const homeNode = ctx.cluster.nodes.find((n) => n.metadata?.name === home)
      const podCidr = homeNode?.spec?.podCIDR
      const tally = (e: EndpointProbes, node: string) => describeTally(e.byNode.find((b) => b.node === node)!.tally)
      const listed = endpoints.map(
        (e) => `${endpointName(e.target)}: ${tally(e, home)} from ${home}, ${tally(e, from)} from ${from}`,
      )
      // svc --from POD: the probing node is no source, so no walk of its own could show the cause.
      const client = ctx.paths.find((p) => p.source !== undefined)?.source
      const walked = !client || ctx.paths.some((p) => p.node === from)
      out.push({
        node: null,
        message:
          `${endpoints.length === 1 ? 'an endpoint answers' : `${endpoints.length} endpoints answer`} from ${home} but not from ${from} (${listed.join('; ')}), ` +
          (walked
            ? `and neither node's walk breaks in what was read`
            : `and ${from}'s own packets were not walked (--from: the walks start from ${client} only; the live probes start from the nodes)`) +
          `: the path from ${from} to ${home}'s pods breaks where the rules and settings read do not show (on ${from}: its route to ${podCidr ?? endpoints[0].target.host}, filter OUTPUT; on ${home}: filter FORWARD, the pod's bridge port, a CNI or cloud firewall between them)`,
        check: nodeCommand(ctx.reach, from, {argv: ['ip', 'route', 'get', endpoints[0].target.host]}, [
          endpoints[0].target.host,
        ]),
        text: `Then look at ${home}'s filter table (iptables-save -t filter on that node) and the pod's bridge port, and at any firewall between the two nodes.`,
      })
    }
    return out
  },
}
