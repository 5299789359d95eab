import type {Check, CheckContext, Finding, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {explainsBreak} from '../break-explained.js'
import {addEvidence, causeOnWay} from './path-causes.js'
import type {ArrivalWalk} from '../../model/paths.js'
import {kubectlCommand, nodeCommand} from '../../model/reach.js'
import {canonicalIp, familyOf} from '../../net/address.js'

export const dnsServiceMissing: Check = {
  meta: codeEntry('KPD-DNS-SERVICE-MISSING'),
  run: (ctx) =>
    ctx.cluster.dns.service
      ? []
      : [
          {
            node: null,
            message: ctx.cluster.dns.error
              ? `the cluster DNS Service could not be read: ${ctx.cluster.dns.error}`
              : 'no cluster DNS Service in kube-system (looked for kube-dns, coredns): names of Services do not resolve',
            check: kubectlCommand(ctx.reach, 'kube-system', ['get', 'svc', '-l', 'k8s-app=kube-dns']),
            text: 'Redeploy CoreDNS if it is gone.',
          },
        ],
}

export const dnsNoEndpoints: Check = {
  meta: codeEntry('KPD-DNS-NO-ENDPOINTS'),
  run(ctx) {
    const dns = ctx.cluster.dns
    if (!dns.service) return []
    const ready = dns.slices.flatMap((s) => s.endpoints ?? []).filter((e) => e.conditions?.ready ?? true)
    return ready.length > 0
      ? []
      : [
          {
            node: null,
            message: `cluster DNS Service kube-system/${dns.service.metadata?.name} has no ready endpoints: no name resolves in the cluster`,
            check: kubectlCommand(ctx.reach, 'kube-system', ['get', 'pods', '-l', 'k8s-app=kube-dns']),
            text: 'Then read their events (kubectl describe) and logs.',
          },
        ]
  },
}

/** DnsAnswer.method when the question could not be put to the server from the node. */
const NOT_ASKED = 'none'

/**
 * The static finding that explains a DNS question from `node` going unanswered: the path to a ready DNS endpoint breaks
 * (its node does not forward, a route or a filter rule on the way, named by a finding; or the question's own walk on the
 * endpoint's node breaks where a finding there explains). Else the walk that breaks, if one does, for the evidence.
 */
function dnsPathCause(
  ctx: CheckContext,
  node: string,
): {finding: Finding; endpoint: string} | {finding?: undefined; walk: ArrivalWalk} | undefined {
  let walk: ArrivalWalk | undefined
  for (const e of ctx.cluster.dns.slices.flatMap((s) => s.endpoints ?? [])) {
    if (!(e.conditions?.ready ?? true)) continue
    for (const ip of e.addresses) {
      const pod = e.targetRef?.kind === 'Pod' ? ` (pod ${e.targetRef.name})` : ''
      const endpoint = `${ip}${pod}${e.nodeName ? ` on ${e.nodeName}` : ''}`
      const finding = causeOnWay(ctx, node, {ip, node: e.nodeName})
      if (finding) return {finding, endpoint}
      const broken = ctx.dnsArrivals.find((a) => a.from === node && a.endpoint.ip === ip && a.ok === false)
      if (!broken?.breaksAt) continue
      const at = {step: broken.breaksAt, node: broken.node, outcomes: () => broken.trace.outcomes}
      const explained = ctx.findings.find((f) => f.node === broken.node && explainsBreak(ctx, f, at))
      if (explained) return {finding: explained, endpoint}
      walk ??= broken
    }
  }
  return walk === undefined ? undefined : {walk}
}

/**
 * Each family's ClusterIP against the answer of its own record type (A for IPv4, AAAA for IPv6): the checks run once
 * per family, and diagnose labels a finding only one family gives with it ("node-b (IPv6): …"). A question that got no
 * answer because the path to the DNS endpoints breaks is evidence on the finding of that break, not a finding of its own
 * (it runs after the path checks for that).
 */
export const dnsNoAnswer: Check = {
  meta: codeEntry('KPD-DNS-NO-ANSWER'),
  run(ctx) {
    const out: FindingDraft[] = []
    const clusterIP = ctx.service.clusterIP
    if (!clusterIP || ctx.service.notProxied) return out
    const type = familyOf(clusterIP) === 6 ? 'AAAA' : 'A'
    const wanted = canonicalIp(clusterIP)
    for (const o of ctx.observations) {
      const d = o.dns
      // A node's DNS answer is for one name: a recorded answer for another Service says nothing about this one.
      if (!o.reachable || !d || !d.name.startsWith(`${ctx.service.name}.${ctx.service.namespace}.svc.`)) continue
      // Not asked at all (no way to open TCP to the server from the node, and no dig/nslookup there, as in kube-proxy's
      // image), or this type not asked (a bundle from before AAAA questions): nothing learnt, so no verdict; the report's
      // not-checked list says why.
      const a = d.answers.find((x) => x.type === type)
      if (d.method === NOT_ASKED || !a) continue
      const cmd = nodeCommand(ctx.reach, o.name, {argv: ['dig', '+tcp', d.name, type, `@${d.server}`]}, [
        d.name,
        d.server,
      ])
      const cause = a.error ? dnsPathCause(ctx, o.name) : undefined
      if (cause?.finding)
        addEvidence(
          ctx,
          cause.finding,
          `${o.name}: asking ${d.server} for the ${type} record of ${d.name} failed (${a.error}): its DNS endpoint ${cause.endpoint} is behind this fault`,
        )
      else if (cause)
        // No finding names the break, but the walk shows where: the finding goes on that node.
        out.push({
          node: cause.walk.node,
          message: `${cause.walk.node}: the DNS questions of ${o.name} get no answer: asking ${d.server} for the ${type} record of ${d.name} failed (${a.error}), and their walk on ${cause.walk.node} breaks at ${cause.walk.breaksAt}: ${cause.walk.detail}`,
          evidence: [`method: ${d.method}`],
          check: cmd,
        })
      else if (a.error)
        out.push({
          node: o.name,
          message: `${o.name}: asking ${d.server} for the ${type} record of ${d.name} failed: ${a.error}`,
          evidence: [`method: ${d.method}`],
          check: cmd,
        })
      else if (a.rcode && a.rcode !== 'NOERROR')
        out.push({
          node: o.name,
          message: `${o.name}: ${d.server} answers ${a.rcode} for the ${type} record of ${d.name}`,
          check: cmd,
        })
      else if (!a.addresses.map(canonicalIp).includes(wanted))
        out.push({
          node: o.name,
          message: `${o.name}: ${d.name} ${type} resolves to ${a.addresses.join(', ') || 'nothing'}, not the ClusterIP ${clusterIP}`,
          check: cmd,
        })
    }
    return out
  },
}
