import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand} from '../../model/reach.js'
import {forwardingSettings} from '../../parse/sysctl.js'

export const nodeForwardingOff: Check = {
  meta: codeEntry('KPD-NODE-FORWARDING-OFF'),
  run(ctx) {
    const out: FindingDraft[] = []
    for (const obs of ctx.observations) {
      const sysctls = obs.reachable ? obs.path?.sysctls : undefined
      if (sysctls?.status !== 'read' || forwardingSettings(sysctls.value).ipForward !== false) continue
      out.push({
        node: obs.name,
        message: `${obs.name}: net.ipv4.ip_forward = 0: the node forwards no packet, so its pods reach no Service and no pod on another node, pods on other nodes cannot reach its pods, and NodePorts on ${obs.name} reach no endpoint`,
        evidence: [`sysctl net.ipv4.ip_forward = ${sysctls.value.values.get('net.ipv4.ip_forward')}`],
        command: nodeCommand(ctx.reach, obs.name, {argv: ['sysctl', '-w', 'net.ipv4.ip_forward=1'], sudo: true}),
        text: 'Then find what set it to 0 (ip_forward in /etc/sysctl.conf and /etc/sysctl.d).',
      })
    }
    return out
  },
}
