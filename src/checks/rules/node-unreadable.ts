import type {Check} from '../check.js'

export const nodeUnreadable: Check = {
  meta: {
    code: 'KPD-NODE-UNREADABLE',
    severity: 'warning',
    title: 'Node could not be read',
    hint: 'Check SSH access to the node (ssh NODE true) and --ssh-config; the other nodes are still diagnosed.',
  },
  run: (ctx) =>
    ctx.observations
      .filter((o) => !o.reachable)
      .map((o) => ({node: o.name, message: `${o.name} could not be read: ${o.error ?? 'unknown error'}`, hint: `ssh ${o.name} sudo -n iptables-save | head   # see why the doctor could not`})),
}
