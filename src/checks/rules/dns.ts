import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {kubectlCommand, nodeCommand} from '../../model/reach.js'
import {familyOf} from '../../net/address.js'

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
            command: kubectlCommand(ctx.reach, 'kube-system', ['get', 'svc', '-l', 'k8s-app=kube-dns']),
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
            command: kubectlCommand(ctx.reach, 'kube-system', ['get', 'pods', '-l', 'k8s-app=kube-dns']),
            text: 'Then read their events (kubectl describe) and logs.',
          },
        ]
  },
}

/** DnsAnswer.method when the question could not be put to the server from the node. */
const NOT_ASKED = 'none'

export const dnsNoAnswer: Check = {
  meta: codeEntry('KPD-DNS-NO-ANSWER'),
  run(ctx) {
    const out: FindingDraft[] = []
    const clusterIP = ctx.service.clusterIP
    if (!clusterIP || ctx.service.notProxied) return out
    for (const o of ctx.observations) {
      const d = o.dns
      // A node's DNS answer is for one name: a recorded answer for another Service says nothing about this one.
      if (!o.reachable || !d || !d.name.startsWith(`${ctx.service.name}.${ctx.service.namespace}.svc.`)) continue
      // Not asked at all (no way to open TCP to the server from the node, and no dig/nslookup there, as in kube-proxy's
      // image): nothing was learnt about DNS, so no verdict; the report's DNS section says why it was not asked.
      if (d.method === NOT_ASKED) continue
      const cmd = nodeCommand(ctx.reach, o.name, {argv: ['dig', '+tcp', d.name, `@${d.server}`]}, [d.name, d.server])
      if (d.error) out.push({node: o.name, message: `${o.name}: asking ${d.server} for ${d.name} failed: ${d.error}`, evidence: [`method: ${d.method}`], command: cmd})
      else if (d.rcode && d.rcode !== 'NOERROR') out.push({node: o.name, message: `${o.name}: ${d.server} answers ${d.rcode} for ${d.name}`, command: cmd})
      // The node asks for A records: an IPv6 ClusterIP is judged only against IPv6 addresses in the answer (AAAA).
      else if (familyOf(clusterIP) === 6 && !d.addresses.some((a) => familyOf(a) === 6)) continue
      else if (!d.addresses.includes(clusterIP)) out.push({node: o.name, message: `${o.name}: ${d.name} resolves to ${d.addresses.join(', ') || 'nothing'}, not the ClusterIP ${clusterIP}`, command: cmd})
    }
    return out
  },
}
