import type {Check, FindingDraft} from '../check.js'

export const dnsServiceMissing: Check = {
  meta: {
    code: 'KPD-DNS-SERVICE-MISSING',
    severity: 'error',
    title: 'Cluster DNS Service not found',
    hint: 'kubectl -n kube-system get svc -l k8s-app=kube-dns; redeploy CoreDNS if it is gone.',
  },
  run: (ctx) =>
    ctx.cluster.dns.service
      ? []
      : [
          {
            node: null,
            message: ctx.cluster.dns.error
              ? `the cluster DNS Service could not be read: ${ctx.cluster.dns.error}`
              : 'no cluster DNS Service in kube-system (looked for kube-dns, coredns): names of Services do not resolve',
          },
        ],
}

export const dnsNoEndpoints: Check = {
  meta: {
    code: 'KPD-DNS-NO-ENDPOINTS',
    severity: 'error',
    title: 'Cluster DNS has no ready endpoints',
    hint: 'kubectl -n kube-system get pods -l k8s-app=kube-dns; kubectl -n kube-system logs -l k8s-app=kube-dns',
  },
  run(ctx) {
    const dns = ctx.cluster.dns
    if (!dns.service) return []
    const ready = dns.slices.flatMap((s) => s.endpoints ?? []).filter((e) => e.conditions?.ready ?? true)
    return ready.length > 0 ? [] : [{node: null, message: `cluster DNS Service kube-system/${dns.service.metadata?.name} has no ready endpoints: no name resolves in the cluster`}]
  },
}

export const dnsNoAnswer: Check = {
  meta: {
    code: 'KPD-DNS-NO-ANSWER',
    severity: 'error',
    title: "The Service's name does not resolve to its ClusterIP through cluster DNS",
    hint: 'Check the DNS Pods and their logs; from a pod: nslookup NAME.NAMESPACE.svc.cluster.local',
  },
  run(ctx) {
    const out: FindingDraft[] = []
    const clusterIP = ctx.service.clusterIP
    if (!clusterIP || ctx.service.notProxied) return out
    for (const o of ctx.observations) {
      const d = o.dns
      // A node's DNS answer is for one name: a recorded answer for another Service says nothing about this one.
      if (!o.reachable || !d || !d.name.startsWith(`${ctx.service.name}.${ctx.service.namespace}.svc.`)) continue
      const cmd = `ssh ${o.name} dig +tcp ${d.name} @${d.server}`
      if (d.error) out.push({node: o.name, message: `${o.name}: asking ${d.server} for ${d.name} failed: ${d.error}`, evidence: [`method: ${d.method}`], hint: cmd})
      else if (d.rcode && d.rcode !== 'NOERROR') out.push({node: o.name, message: `${o.name}: ${d.server} answers ${d.rcode} for ${d.name}`, hint: cmd})
      else if (!d.addresses.includes(clusterIP)) out.push({node: o.name, message: `${o.name}: ${d.name} resolves to ${d.addresses.join(', ') || 'nothing'}, not the ClusterIP ${clusterIP}`, hint: cmd})
    }
    return out
  },
}
