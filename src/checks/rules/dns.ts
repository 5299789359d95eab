import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
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
 * Each family's ClusterIP against the answer of its own record type (A for IPv4, AAAA for IPv6): the checks run once
 * per family, and diagnose labels a finding only one family gives with it ("node-b (IPv6): …").
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
      if (a.error)
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
