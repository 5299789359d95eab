import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand} from '../../model/reach.js'
import {FORWARDING_KEYS, forwardingSettings} from '../../parse/sysctl.js'
import {familyOf} from '../../net/address.js'

/** Fires where it breaks this Service: on a node that hosts one of its endpoints (a pod there may be DNATed to it). */
export const bridgeNetfilterOff: Check = {
  meta: codeEntry('KPD-BRIDGE-NF-OFF'),
  run(ctx) {
    const out: FindingDraft[] = []
    // IPv6 packets between pods on one bridge go to ip6tables only with bridge-nf-call-ip6tables.
    const family = familyOf(ctx.service.clusterIP ?? '') === 6 ? 6 : 4
    const KEY = FORWARDING_KEYS[family].bridge
    for (const obs of ctx.observations) {
      const sysctls = obs.reachable ? obs.path?.sysctls : undefined
      if (sysctls?.status !== 'read') continue
      const settings = forwardingSettings(sysctls.value, family)
      const notLoaded = settings.brNetfilterLoaded === false
      if (!notLoaded && settings.bridgeNfCallIptables !== false) continue
      const local = [
        ...new Map(
          ctx.service.ports
            .flatMap((p) => p.allEndpoints)
            .filter((e) => e.nodeName === obs.name)
            .map((e) => [e.ip, e]),
        ).values(),
      ]
      if (local.length === 0) continue
      const backends = local.map((e) => `${e.ip} (pod ${e.podName ?? '?'})`).join(', ')
      const what = notLoaded ? `br_netfilter is not loaded (no ${KEY})` : `${KEY} = 0`
      out.push({
        node: obs.name,
        message: `${obs.name}: ${what}: packets between pods on one bridge skip ${family === 6 ? 'ip6tables' : 'iptables'}, so a pod on ${obs.name} whose connection to ${ctx.service.namespace}/${ctx.service.name} is DNATed to ${backends} on the same node gets replies that are not un-NATed, and the connection fails`,
        evidence: [
          notLoaded
            ? `sysctl: cannot stat /proc/sys/${KEY.replaceAll('.', '/')}`
            : `sysctl ${KEY} = ${sysctls.value.values.get(KEY)}`,
        ],
        check: notLoaded
          ? nodeCommand(ctx.reach, obs.name, {argv: ['lsmod'], filter: ['grep', 'br_netfilter']})
          : nodeCommand(ctx.reach, obs.name, {argv: ['sysctl', KEY]}, [KEY]),
        fix: {
          changes: 'node',
          command: notLoaded
            ? nodeCommand(ctx.reach, obs.name, {argv: ['modprobe', 'br_netfilter'], sudo: true})
            : nodeCommand(ctx.reach, obs.name, {argv: ['sysctl', '-w', `${KEY}=1`], sudo: true}, [KEY]),
        },
        text: notLoaded
          ? `Then set ${KEY}=1 (sysctl -w on ${obs.name}), and load br_netfilter at boot (/etc/modules-load.d).`
          : `Make it persistent in /etc/sysctl.d on ${obs.name}.`,
      })
    }
    return out
  },
}
