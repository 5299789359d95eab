import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand} from '../../model/reach.js'
import {conntrackTableUsage} from '../../parse/sysctl.js'

/** Warned from this share of nf_conntrack_max on: busy nodes sit far below it, and a burst fills the rest quickly. */
const FULL_FRACTION = 0.9

export const conntrackFull: Check = {
  meta: codeEntry('KPD-CONNTRACK-FULL'),
  run(ctx) {
    const out: FindingDraft[] = []
    for (const obs of ctx.observations) {
      const sysctls = obs.reachable ? obs.path?.sysctls : undefined
      const usage = sysctls?.status === 'read' ? conntrackTableUsage(sysctls.value) : undefined
      if (!usage || usage.fraction < FULL_FRACTION) continue
      const percent = Math.floor(usage.fraction * 100)
      out.push({
        node: obs.name,
        message: `${obs.name}: the conntrack table is ${percent}% full (nf_conntrack_count ${usage.count} of nf_conntrack_max ${usage.max}; warned from ${FULL_FRACTION * 100}%): when it is full the kernel drops the packets of new connections ("nf_conntrack: table full, dropping packet")`,
        evidence: [
          `sysctl net.netfilter.nf_conntrack_count = ${usage.count}`,
          `sysctl net.netfilter.nf_conntrack_max = ${usage.max}`,
        ],
        check: nodeCommand(ctx.reach, obs.name, {argv: ['conntrack', '-S'], sudo: true}),
        fix: {
          changes: 'node',
          command: nodeCommand(ctx.reach, obs.name, {
            argv: ['sysctl', '-w', `net.netfilter.nf_conntrack_max=${usage.max * 2}`],
            sudo: true,
          }),
        },
        text: `To keep it, raise kube-proxy's conntrack.maxPerCore (kube-proxy sets nf_conntrack_max when it starts) or set it in /etc/sysctl.d on ${obs.name}.`,
      })
    }
    return out
  },
}
