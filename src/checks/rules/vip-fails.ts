import type {Check, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {nodeCommand} from '../../model/reach.js'
import {
  addressOf,
  answered,
  describeTally,
  endpointsBehind,
  failed,
  probesRan,
  staticExpectsFailure,
  staticPathFor,
} from './probe-evidence.js'

/** Below this probability, every probe missing the endpoints that answer is not taken for bad luck. */
const CHANCE = 0.01

/**
 * A Service address (ClusterIP, or the NodePort on the node's own address) that fails from a node while the static
 * trace of that node says it works and the endpoints behind it answer from that node directly: the break is in the
 * node's Service dataplane, somewhere the rules read do not show. Failures the static trace predicts are its
 * findings' (no second finding); failures the endpoints explain are the endpoint findings'.
 */
export const vipFails: Check = {
  meta: codeEntry('KPD-VIP-FAILS'),
  run(ctx) {
    const run = probesRan(ctx)
    if (!run) return []
    const out: FindingDraft[] = []
    for (const n of run.nodes)
      for (const t of n.tallies) {
        if (t.target.kind === 'endpoint' || !failed(t)) continue
        const path = staticPathFor(ctx, n.node, t.target)
        if (staticExpectsFailure(path)) continue
        const behind = new Set(endpointsBehind(ctx, n.node, t.target))
        const direct = n.tallies.filter(
          (x) => x.target.kind === 'endpoint' && behind.has(addressOf(x.target)) && x.attempts > 0,
        )
        if (direct.length === 0) continue
        const everyAnswers = direct.every(answered)
        // Nothing through the address while some endpoints answer is a dataplane fault only when landing every attempt
        // on the endpoints that do not answer is too unlikely to be chance (kube-proxy picks endpoints at random).
        const silentShare = direct.filter((x) => !answered(x)).length / direct.length
        const noneThrough = t.connected === 0 && direct.some(answered) && silentShare ** t.attempts < CHANCE
        if (!everyAnswers && !noneThrough) continue
        const what = `${t.target.kind} ${addressOf(t.target)} (${t.target.servicePort})`
        const endpoints = direct.map((x) => `${addressOf(x.target)} ${x.connected}/${x.attempts}`).join(', ')
        out.push({
          node: n.node,
          message:
            `${n.node}: ${what} from ${n.node}: ${describeTally(t)}, while ${everyAnswers ? 'every endpoint behind it answers' : 'endpoints behind it answer'} from ${n.node} directly (${endpoints}); ` +
            `${path ? `the static trace of ${path.entry} says it works` : 'its rules were not traced'}: the node's Service dataplane breaks where the rules read do not show`,
          check: nodeCommand(ctx.reach, n.node, {argv: ['conntrack', '-L', '-d', t.target.host], sudo: true}, [
            t.target.host,
          ]),
          text: 'Then run the diagnosis again: kube-proxy may have rewritten the rules since they were read.',
        })
      }
    return out
  },
}
