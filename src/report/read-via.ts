import type {NodeReadVia} from '../diagnosis/choose-transport.js'
import {wrapProse} from './width.js'
import {compareNames} from '../model/name-order.js'

/** What is not checked on a node that was not read: everything but the API-side checks. */
const NODE_CHECKS = "rules, packet paths, hairpin, kube-proxy's /healthz and /metrics, DNS from the node"

/** The note listing the nodes left API-only and why; undefined when every node was read (or tried). */
export function apiOnlyNote(readVia: Map<string, NodeReadVia>): string | undefined {
  const apiOnly = [...readVia].filter(([, v]) => v.transport === null).sort(([a], [b]) => compareNames(a, b))
  if (apiOnly.length === 0) return undefined
  const reasons = [...new Set(apiOnly.map(([, v]) => v.why))]
  return `node checks not done (${NODE_CHECKS}) on ${apiOnly.map(([name]) => name).join(', ')}: ${reasons.join(' / ')}; the API-side checks ran`
}

/**
 * The human report's "Nodes read via" block: per node, the way in, why, the ways not used, and what was not read.
 * Given printable text (report/output.ts).
 */
export function renderReadVia(
  readVia: Map<string, NodeReadVia>,
  order: string[],
  width = Number.POSITIVE_INFINITY,
): string {
  const lines = ['Nodes read via:']
  for (const name of order) {
    const v = readVia.get(name)
    if (!v) continue
    const way = v.transport ? `${v.transport}${v.address ? ` (${v.address})` : ''}` : 'not read (API-only)'
    // An API-only node's reason already names every way that was not used.
    const notUsed =
      v.transport && v.notUsed.length > 0
        ? `; not used: ${v.notUsed.map((n) => `${n.transport} (${n.reason})`).join(', ')}`
        : ''
    lines.push(...wrapProse(`${name}: ${way}: ${v.why}${notUsed}`, width, '  ', '      '))
    for (const what of v.notRead) lines.push(...wrapProse(`not read: ${what}`, width, '    ', '      '))
  }
  return lines.join('\n')
}
