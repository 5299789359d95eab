import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand} from '../../model/reach.js'
import {familyOf} from '../../net/address.js'
import {USERSPACE_MODE_CHAINS} from '../../model/chain-names.js'
import {familySave} from '../../node/observation.js'

export const modeMixed: Check = {
  meta: codeEntry('KPD-MODE-MIXED'),
  run(ctx) {
    const byMode = new Map<string, string[]>()
    for (const n of ctx.nodes) byMode.set(n.mode.mode, [...(byMode.get(n.mode.mode) ?? []), n.name])
    if (byMode.size < 2) return []
    const [major] = [...byMode.entries()].sort((a, b) => b[1].length - a[1].length)[0]
    return [...byMode.entries()]
      .filter(([m]) => m !== major)
      .flatMap(([m, nodes]) =>
        nodes.map((node) => ({
          node,
          message: `${node} runs kube-proxy in ${m} mode (decided by ${ctx.nodes.find((n) => n.name === node)!.mode.source}), the other nodes in ${major} mode`,
        })),
      )
  },
}

export const modeMismatch: Check = {
  meta: codeEntry('KPD-MODE-MISMATCH'),
  run(ctx) {
    const wanted = ctx.cluster.proxyConfig.mode || 'iptables'
    if (!['iptables', 'nftables'].includes(wanted)) return []
    return ctx.nodes
      .filter(
        (n) =>
          n.mode.mode !== wanted &&
          n.mode.source !== ctx.cluster.proxyConfig.source &&
          n.mode.source !== '--proxy-mode',
      )
      .map((n) => ({
        node: n.name,
        message: `${n.name} runs ${n.mode.mode} mode (${n.mode.source}) but ${ctx.cluster.proxyConfig.source} says mode ${wanted}`,
      }))
  },
}

export const modeLeftover: Check = {
  meta: codeEntry('KPD-MODE-LEFTOVER'),
  run(ctx) {
    const out: FindingDraft[] = []
    for (const n of ctx.nodes) {
      for (const l of n.mode.leftovers)
        out.push({node: n.name, message: `${n.name} runs ${n.mode.mode} mode but still has ${l}`})
      const userspace = USERSPACE_MODE_CHAINS.filter((c) => n.obs.iptables?.hasChain('nat', c))
      if (userspace.length > 0)
        out.push({
          node: n.name,
          message: `${n.name} still has userspace-mode chains ${userspace.join(', ')} (that mode was removed in 1.26)`,
        })
      // The family judged here: its own save command shows one backend; kube-proxy rules in the other still apply.
      const family = familyOf(n.expected.clusterIP ?? '') ?? 4
      const tool = family === 6 ? 'ip6tables' : 'iptables'
      const main = familySave(n.obs, family)?.backend
      for (const b of (n.obs.backends ?? []).filter((x) => x.family === family)) {
        if (b.backend === main || !b.dump?.hasChain('nat', 'KUBE-SERVICES')) continue
        out.push({
          node: n.name,
          message: `${n.name}: ${tool}-${b.backend} also holds kube-proxy rules (nat KUBE-SERVICES, ${b.dump.ruleCount('nat', 'KUBE-SERVICES')} rules) while ${tool}-save shows the ${main} backend: both rewrite packets`,
          check: nodeCommand(ctx.reach, n.name, {
            argv: [`${tool}-${b.backend}-save`, '-t', 'nat'],
            sudo: true,
            filter: ['grep', '-c', 'KUBE-SEP'],
          }),
          fix: {
            changes: 'node',
            text: `Flush the unused ${tool}-${b.backend} backend's KUBE-* chains (kube-proxy --cleanup run with that backend, in a maintenance window).`,
          },
        })
      }
    }
    return out
  },
}

export const modeUnsupported: Check = {
  meta: codeEntry('KPD-MODE-UNSUPPORTED'),
  run: (ctx) =>
    ctx.modeNotRead.map((u) => ({
      node: u.node,
      message: `${u.node} runs kube-proxy in ${u.mode} mode (${u.source}): its rules were not judged; cluster-wide checks (endpoints, DNS, kube-proxy health) still ran`,
      check: ctx.service.clusterIP
        ? nodeCommand(ctx.reach, u.node, u.look(ctx.service.clusterIP), [ctx.service.clusterIP])
        : undefined,
    })),
}
