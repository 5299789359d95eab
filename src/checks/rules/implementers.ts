import type {Check} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {kubectlCommand} from '../../model/reach.js'

/** A node where neither kube-proxy nor a replacement was found, while the cluster shows no sign of running kube-proxy. */
export const noImplementer: Check = {
  meta: codeEntry('KPD-NO-IMPLEMENTER'),
  run(ctx) {
    if (ctx.service.notProxied) return []
    return ctx.implementers
      .filter((i) => i.name === 'none')
      .map((i) => ({
        node: i.node,
        message: `${i.node}: nothing implements Services: no kube-proxy (no Pod, no ConfigMap, no rules on the node) and no replacement (Cilium, Calico eBPF, kube-router, Antrea, OVN-Kubernetes)`,
        check: kubectlCommand(
          ctx.reach,
          null,
          ['get', 'pods', '-A', '-o', 'wide', '--field-selector', `spec.nodeName=${i.node}`],
          [i.node],
        ),
      }))
  },
}

/** kube-proxy's rules and another implementer (or two replacements) active on one node: they fight. */
export const twoImplementers: Check = {
  meta: codeEntry('KPD-TWO-IMPLEMENTERS'),
  run(ctx) {
    return ctx.implementers
      .filter((i) => i.active.length > 1)
      .map((i) => ({
        node: i.node,
        message: `${i.node}: ${i.active.map((a) => a.title).join(' and ')} both implement Services on the node`,
        text: `Keep one: with ${i.title} serving Services, remove kube-proxy's DaemonSet from the node and its rules (kube-proxy --cleanup), or turn ${i.title}'s Service implementation off.${i.look ? ` Look at ${i.title}'s Services: ${i.look}` : ''}`,
        evidence: i.active.flatMap((a) => a.evidence),
      }))
  },
}
