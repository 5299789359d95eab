import {isKnownCode} from '../checks/catalogue.js'
import type {Finding} from '../checks/check.js'
import {DiagnosisError} from '../errors.js'

/** One silenced code, optionally scoped to a namespace, a Service and a node, with the reason someone gave. */
export interface IgnoreRule {
  code: string
  namespace?: string
  service?: string
  node?: string
  reason?: string
  /** Where the rule came from: `--ignore`, or the config file and its entry number. */
  source: string
}

/** The rules `--ignore A,B` stands for: each code everywhere. */
export function rulesFromCodes(codes: string[] | undefined): IgnoreRule[] {
  return (codes ?? []).map((code) => ({code, source: '--ignore'}))
}

/** Refuses rules for codes the catalogue does not have: a typo must not silence nothing quietly. */
export function checkIgnoreRules(rules: IgnoreRule[]): void {
  const unknown = rules.filter((r) => !isKnownCode(r.code))
  if (unknown.length > 0)
    throw new DiagnosisError(
      `${unknown[0].source}: unknown finding code(s) ${[...new Set(unknown.map((r) => r.code))].join(', ')} (see the README's code table)`,
    )
}

/**
 * The rule that silences a finding of the Service namespace/name, if any. A node-scoped rule silences only findings
 * on that node, never the cluster-wide ones.
 */
export function silencingRule(
  rules: IgnoreRule[],
  finding: Finding,
  namespace: string,
  service: string,
): IgnoreRule | undefined {
  return rules.find(
    (r) =>
      r.code === finding.code &&
      (r.namespace === undefined || r.namespace === namespace) &&
      (r.service === undefined || r.service === service) &&
      (r.node === undefined || r.node === finding.node),
  )
}
