import {vsKey} from '../../parse/ipvsadm.js'
import type {Check, CheckContext, FindingDraft, NodeView} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand} from '../../model/reach.js'
import {restartKubeProxy, restartServiceProxy} from './kube-proxy-pod.js'
import {ipvsSetName} from '../../model/chain-names.js'
import {familyOf} from '../../net/address.js'

function ipvsNodes(views: NodeView[]) {
  return views.filter((n) => n.mode.mode === 'ipvs' && n.obs.ipvs)
}

/** The nodes whose virtual servers were read: kube-proxy's in IPVS mode, and kube-router's. */
const virtualServerNodes = (ctx: CheckContext) => [...ipvsNodes(ctx.nodes), ...ctx.kubeRouter]

export const ipvsWeightZero: Check = {
  meta: codeEntry('KPD-IPVS-WEIGHT-ZERO'),
  run(ctx) {
    const out: FindingDraft[] = []
    for (const n of virtualServerNodes(ctx)) {
      for (const p of n.programmed) {
        for (const e of p.endpoints) {
          const ep = p.expected.allEndpoints.find((x) => x.address === e.backend?.address)
          if (e.weight === 0 && ep?.ready && !ep.terminating)
            out.push({
              node: n.name,
              message: `${n.name}: real server ${e.backend?.address}${ep.podName ? ` (pod ${ep.podName})` : ''} of ${'by' in n ? `${n.by}'s ` : ''}${p.chain.replace(/^VS /, '')} has weight 0 although the endpoint is ready: it gets no new connections`,
              evidence: [`ipvs line ${e.jump.line}: ${e.jump.text}`],
              check: nodeCommand(ctx.reach, n.name, n.dataplane.show(p.chain), p.chain.split(' ')),
              fix: restartServiceProxy(ctx, n.name),
            })
        }
      }
    }
    return out
  },
}

export const ipvsVipUnbound: Check = {
  meta: codeEntry('KPD-IPVS-VIP-UNBOUND'),
  run(ctx) {
    const out: FindingDraft[] = []
    for (const n of ipvsNodes(ctx.nodes)) {
      const vips = n.obs.ipvs!.vips
      if (!vips) continue
      for (const ip of [n.expected.clusterIP!, ...n.expected.externalIPs, ...n.expected.loadBalancerIPs]) {
        if (!vips.includes(ip))
          out.push({
            node: n.name,
            message: `${n.name}: ${ip} is not on kube-ipvs0 (it holds ${vips.length} address(es))`,
            check: nodeCommand(ctx.reach, n.name, {argv: ['ip', '-o', 'addr', 'show', 'dev', 'kube-ipvs0']}),
            fix: restartKubeProxy(ctx, n.name),
          })
      }
    }
    return out
  },
}

export const ipvsIpsetMissing: Check = {
  meta: codeEntry('KPD-IPVS-IPSET-MISSING'),
  run(ctx) {
    const out: FindingDraft[] = []
    for (const n of ipvsNodes(ctx.nodes)) {
      const sets = n.obs.ipvs!.ipsets
      const svc = n.expected
      const family = familyOf(svc.clusterIP!) ?? 4
      for (const p of svc.ports) {
        if (!p.hasEndpoints) continue
        const want: Array<[string, string, string]> = [
          [
            'KUBE-CLUSTER-IP',
            `${svc.clusterIP},${p.protocol}:${p.port}`,
            'ClusterIP traffic is not marked and accepted for IPVS',
          ],
        ]
        for (const ip of svc.externalIPs)
          want.push(['KUBE-EXTERNAL-IP', `${ip},${p.protocol}:${p.port}`, 'externalIP traffic is not handled'])
        for (const ip of svc.loadBalancerIPs)
          want.push(['KUBE-LOAD-BALANCER', `${ip},${p.protocol}:${p.port}`, 'LoadBalancer traffic is not handled'])
        if (p.nodePort && (p.protocol === 'tcp' || p.protocol === 'udp'))
          want.push([
            `KUBE-NODE-PORT-${p.protocol.toUpperCase()}`,
            String(p.nodePort),
            'NodePort traffic is not marked for masquerade',
          ])
        for (const [name, member, effect] of want) {
          const set = ipvsSetName(name, family)
          if (!sets.sets.has(set))
            out.push({
              node: n.name,
              message: `${n.name}: ipset ${set} does not exist: ${effect}`,
              check: nodeCommand(ctx.reach, n.name, {argv: ['ipset', 'list', '-n'], sudo: true}),
              fix: restartKubeProxy(ctx, n.name),
            })
          else if (!sets.has(set, member))
            out.push({
              node: n.name,
              message: `${n.name}: ipset ${set} lacks ${member} (${p.svcPortName}): ${effect}`,
              check: nodeCommand(
                ctx.reach,
                n.name,
                {argv: ['ipset', 'list', set], sudo: true, filter: ['grep', '--', member.split(',')[0]]},
                [set, member.split(',')[0]],
              ),
              fix: restartKubeProxy(ctx, n.name),
            })
        }
      }
    }
    return out
  },
}

export const ipvsSysctl: Check = {
  meta: codeEntry('KPD-IPVS-SYSCTL'),
  run(ctx) {
    const out: FindingDraft[] = []
    const want: Array<[string, string, string]> = [
      [
        'net.ipv4.vs.conntrack',
        '1',
        'IPVS connections bypass conntrack, so masquerading (KUBE-POSTROUTING) never happens',
      ],
      ['net.ipv4.ip_forward', '1', 'the node does not forward to pods on other nodes'],
    ]
    if (ctx.cluster.proxyConfig.ipvsStrictARP)
      want.push(
        ['net.ipv4.conf.all.arp_ignore', '1', 'strictARP is on, but the node answers ARP for kube-ipvs0 addresses'],
        ['net.ipv4.conf.all.arp_announce', '2', 'strictARP is on, but the node announces kube-ipvs0 addresses'],
      )
    for (const n of ipvsNodes(ctx.nodes)) {
      const got = n.obs.ipvs!.sysctls
      if (Object.keys(got).length === 0) continue
      for (const [key, value, effect] of want) {
        if (got[key] !== value)
          out.push({
            node: n.name,
            message: `${n.name}: ${key} = ${got[key] ?? 'missing'}, expected ${value}: ${effect}`,
            check: nodeCommand(ctx.reach, n.name, {argv: ['sysctl', key]}, [key]),
            fix: {
              changes: 'node',
              command: nodeCommand(ctx.reach, n.name, {argv: ['sysctl', '-w', `${key}=${value}`], sudo: true}, [key]),
            },
          })
      }
    }
    return out
  },
}

export const ipvsScheduler: Check = {
  meta: codeEntry('KPD-IPVS-SCHEDULER'),
  run(ctx) {
    const out: FindingDraft[] = []
    const scheduler = ctx.cluster.proxyConfig.ipvsScheduler || 'rr'
    for (const n of ipvsNodes(ctx.nodes)) {
      const affinity = n.expected.sessionAffinitySeconds
      for (const p of n.expected.ports) {
        const vs = n.obs.ipvs!.virtualServers.find(
          (v) => vsKey(v.proto, v.address, v.port) === vsKey(p.protocol, n.expected.clusterIP!, p.port),
        )
        if (!vs) continue
        if (vs.scheduler !== scheduler)
          out.push({
            node: n.name,
            message: `${n.name}: ${vs.text} uses scheduler ${vs.scheduler}, kube-proxy is configured for ${scheduler}`,
            evidence: [`ipvs line ${vs.line}: ${vs.text}`],
          })
        if ((vs.persistent ?? undefined) !== affinity)
          out.push({
            node: n.name,
            message: `${n.name}: ${vsKey(vs.proto, vs.address, vs.port)} has ${vs.persistent ? `persistence ${vs.persistent}s` : 'no persistence'}, the Service asks for ${affinity ? `ClientIP affinity ${affinity}s` : 'none'}`,
            evidence: [`ipvs line ${vs.line}: ${vs.text}`],
          })
      }
    }
    return out
  },
}
