import type {Check} from '../check.js'
import {codeEntry} from '../catalogue.js'

export const notProxied: Check = {
  meta: codeEntry('KPD-NOT-PROXIED'),
  run: (ctx) => (ctx.service.notProxied ? [{node: null, message: ctx.service.notProxied}] : []),
}
