import type {Check} from '../check.js'

export const notProxied: Check = {
  meta: {
    code: 'KPD-NOT-PROXIED',
    severity: 'info',
    title: 'kube-proxy programs no rules for this Service by design',
    hint: 'Nothing to fix in kube-proxy: check DNS and the Pods instead.',
  },
  run: (ctx) => (ctx.service.notProxied ? [{node: null, message: ctx.service.notProxied}] : []),
}
