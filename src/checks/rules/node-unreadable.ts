import type {Check} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand} from '../../model/reach.js'

export const nodeUnreadable: Check = {
  meta: codeEntry('KPD-NODE-UNREADABLE'),
  run: (ctx) =>
    ctx.observations
      .filter((o) => !o.reachable)
      .map((o) => ({
        node: o.name,
        message: `${o.name} could not be read: ${o.error ?? 'unknown error'}`,
        check: nodeCommand(ctx.reach, o.name, {argv: ['iptables-save'], sudo: true, filter: ['head']}),
        text: 'Run it by hand to see why the doctor could not read the node.',
      })),
}
