import type {Check} from '../check.js'

export const pathBroken: Check = {
  meta: {
    code: 'KPD-PATH-BROKEN',
    severity: 'error',
    title: 'A filter rule outside kube-proxy drops or rejects the Service traffic',
    hint: 'Look at the rule in the evidence: a CNI, firewall or NetworkPolicy rule. kproxy-doctor trace shows the whole walk.',
  },
  run: (ctx) =>
    ctx.paths
      .filter((p) => p.ok === false && p.breaksAt === 'filter')
      .map((p) => ({node: p.node, message: `${p.node}: ${p.entry} (${p.port}) ${p.detail}`, hint: `ssh ${p.node} sudo iptables-save -t filter | less   # find the rule above`})),
}

export const pathUndecided: Check = {
  meta: {
    code: 'KPD-PATH-UNDECIDED',
    severity: 'warning',
    title: 'A rule on the path could not be evaluated',
    hint: 'The tracer never guesses: read the rule named and decide by hand; report it so the tracer learns it.',
  },
  run: (ctx) => ctx.paths.filter((p) => p.ok === null && p.breaksAt === 'unknown').map((p) => ({node: p.node, message: `${p.node}: ${p.entry} (${p.port}): ${p.detail}`})),
}
