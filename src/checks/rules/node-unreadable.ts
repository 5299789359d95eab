import type {Check} from '../check.js'
import {codeEntry} from '../catalogue.js'

export const nodeUnreadable: Check = {
  meta: codeEntry('KPD-NODE-UNREADABLE'),
  run: (ctx) =>
    ctx.observations
      .filter((o) => !o.reachable)
      .map((o) => ({node: o.name, message: `${o.name} could not be read: ${o.error ?? 'unknown error'}`, hint: `ssh ${o.name} sudo -n iptables-save | head   # see why the doctor could not`})),
}
