import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand} from '../../model/reach.js'
import {FORWARDING_KEYS, forwardingSettings} from '../../parse/sysctl.js'
import {familyOf} from '../../net/address.js'

export const nodeForwardingOff: Check = {
  meta: codeEntry('KPD-NODE-FORWARDING-OFF'),
  run(ctx) {
    const out: FindingDraft[] = []
    // The family this run judges: IPv6 packets are forwarded by net.ipv6.conf.all.forwarding, not ip_forward.
    const family = familyOf(ctx.service.clusterIP ?? '') === 6 ? 6 : 4
    const key = FORWARDING_KEYS[family].forward
    for (const obs of ctx.observations) {
      const sysctls = obs.reachable ? obs.path?.sysctls : undefined
      if (sysctls?.status !== 'read' || forwardingSettings(sysctls.value, family).ipForward !== false) continue
      out.push({
        node: obs.name,
        message: `${obs.name}: ${key} = 0: the node forwards no IPv${family} packet, so its pods reach no Service and no pod on another node, pods on other nodes cannot reach its pods, and NodePorts on ${obs.name} reach no endpoint`,
        evidence: [`sysctl ${key} = ${sysctls.value.values.get(key)}`],
        check: nodeCommand(ctx.reach, obs.name, {argv: ['sysctl', key]}, [key]),
        fix: {
          changes: 'node',
          command: nodeCommand(ctx.reach, obs.name, {argv: ['sysctl', '-w', `${key}=1`], sudo: true}),
        },
        text: `Then find what set it to 0 (${key} in /etc/sysctl.conf and /etc/sysctl.d).`,
      })
    }
    return out
  },
}
