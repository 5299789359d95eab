import type {CheckContext, Finding} from '../check.js'
import {explainsBreak} from '../break-explained.js'
import {policyCause} from './policy-dataplane.js'
import {splitHostPort} from '../../net/host-port.js'

/** Findings on an endpoint's node that break every connection from another node to its pods. */
const NODE_WIDE_CAUSES = new Set(['KPD-NODE-FORWARDING-OFF'])
/** Findings on either node that break connections to the addresses they name. */
const PER_ADDRESS_CAUSES = new Set(['KPD-ROUTE-MISSING', 'KPD-FILTER-DROP'])

/** Whether a finding's message names `address` (as a word, or as the host of "address:port"). */
function names(message: string, address: string): boolean {
  return message
    .split(/[^0-9A-Fa-f.:]+/)
    .some((w) => w.replace(/[.:]+$/, '') === address || w.startsWith(`${address}:`))
}

/**
 * The static finding that explains why connections from node `from` to a pod at `endpoint.ip` (an address, no port:
 * a probe's host or a DNS server's) on `endpoint.node` fail, walking both halves: on `from` (its route to the pod, its
 * filter OUTPUT), then on the endpoint's node when it is another (ip_forward, its filter FORWARD, a policy engine's
 * drop the API's NetworkPolicies agree with, and the second half of any of the Service's paths from `from` that DNATs
 * to the endpoint, whatever its port, and breaks there). Undefined when neither half breaks in what was read: nobody
 * can tell which node.
 */
export function causeOnWay(
  ctx: CheckContext,
  from: string,
  endpoint: {ip: string; node?: string},
): Finding | undefined {
  const errors = ctx.findings.filter((f) => f.severity === 'error' && f.node !== null)
  const onSource = errors.find(
    (f) => f.node === from && PER_ADDRESS_CAUSES.has(f.code) && names(f.message, endpoint.ip),
  )
  if (onSource || !endpoint.node || endpoint.node === from) return onSource
  const home = endpoint.node
  const onHome = errors.find(
    (f) =>
      f.node === home &&
      (NODE_WIDE_CAUSES.has(f.code) || (PER_ADDRESS_CAUSES.has(f.code) && names(f.message, endpoint.ip))),
  )
  if (onHome) return onHome
  const policy = policyCause(ctx, [from, home], endpoint.ip)
  if (policy) return policy
  for (const p of ctx.paths) {
    if (p.node !== from) continue
    // A half names its endpoint host:port; the pod is the same whatever port was probed.
    const half = p.remote.find(
      (h) => splitHostPort(h.endpoint)?.host === endpoint.ip && h.node === home && h.ok === false,
    )
    if (!half?.breaksAt) continue
    const at = {step: half.breaksAt, node: home, outcomes: () => half.trace?.outcomes ?? []}
    const f = errors.find((x) => x.node === home && explainsBreak(ctx, x, at))
    if (f) return f
  }
  return undefined
}

/**
 * Adds a symptom (a failed probe, a DNS question without answer) to the finding of its cause, once: the symptom is
 * evidence of the cause, never a second finding.
 */
export function addEvidence(ctx: CheckContext, cause: Finding, line: string): void {
  const i = ctx.findings.indexOf(cause)
  if (i < 0 || cause.evidence.includes(line)) return
  ctx.findings[i] = {...cause, evidence: [...cause.evidence, line]}
}
