import {podsSelectedBy} from '../../cluster/pod-status.js'
import {editDistance} from '../../cluster/similar-names.js'
import type {Check, CheckContext} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {kubectlCommand} from '../../model/reach.js'

export function selectedPods(ctx: CheckContext) {
  const selector = ctx.cluster.service.spec?.selector ?? {}
  return podsSelectedBy(ctx.cluster.pods, selector)
}

/** Labels of Pods that almost match: same key with a close value, or a close key with the same value. */
function nearMisses(selector: Record<string, string>, ctx: CheckContext): string[] {
  const out: string[] = []
  for (const pod of ctx.cluster.pods) {
    const labels = pod.metadata?.labels ?? {}
    const misses: string[] = []
    let close = true
    for (const [k, v] of Object.entries(selector)) {
      if (labels[k] === v) continue
      const near = Object.entries(labels).find(
        ([lk, lv]) => (lk === k && editDistance(lv, v) <= 3) || (lv === v && editDistance(lk, k) <= 3),
      )
      if (!near) {
        close = false
        break
      }
      misses.push(`${near[0]}=${near[1]}`)
    }
    if (close && misses.length > 0) out.push(`pod ${pod.metadata?.name} has ${misses.join(',')}`)
  }
  return out.slice(0, 5)
}

export const selectorNoPods: Check = {
  meta: codeEntry('KPD-SELECTOR-NO-PODS'),
  run(ctx) {
    const selector = ctx.cluster.service.spec?.selector
    if (!selector || Object.keys(selector).length === 0 || ctx.service.notProxied?.startsWith('ExternalName')) return []
    if (selectedPods(ctx).length > 0) return []
    const text = Object.entries(selector)
      .map(([k, v]) => `${k}=${v}`)
      .join(',')
    const near = nearMisses(selector, ctx)
    return [
      {
        node: null,
        message: `selector ${text} matches no Pod in namespace ${ctx.service.namespace}${near.length > 0 ? `; close: ${near.join('; ')}` : ''}`,
        evidence: near,
        check: kubectlCommand(ctx.reach, ctx.service.namespace, ['get', 'pods', '--show-labels']),
        text: `Compare the Pods' labels with the selector ${text}.`,
      },
    ]
  },
}
