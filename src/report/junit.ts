import {CATALOGUE, codeEntry} from '../checks/catalogue.js'
import type {FailOn} from './report.js'
import {groupFindings, type ScanSummary} from './scan-report.js'
import {fixText} from './fix-lines.js'

const FAMILIES = [...new Set(CATALOGUE.map((e) => e.family))]
const checkFamily = (code: string) => codeEntry(code).family
/** Families scan does not judge, and why: their testcase is skipped, never a pass. */
const NOT_JUDGED_BY_SCAN: Partial<Record<string, string>> = {
  policy:
    'scan does not judge NetworkPolicies (they depend on the client): svc NAME --from POD or --from-namespace NS judges them',
}

/**
 * XML 1.0 text: escaped, with characters XML cannot hold removed (its Char production: tab, line feed, carriage
 * return, U+0020-U+D7FF, U+E000-U+FFFD, U+10000-U+10FFFF; a lone surrogate is none of them).
 */
function xml(text: string): string {
  return text
    .replace(/[^\t\n\r\x20-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, '')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
}

/**
 * JUnit XML for CI: one testsuite per Service, one testcase per check family (skipped, with the reason, for a family
 * scan does not judge); a family fails when it has a finding at or above --fail-on, carrying the findings' text.
 * Skipped Services are one skipped testcase with the reason. Required checks that could not run are one more testcase,
 * "not checked": an error (the run is incomplete, exit 3), or skipped when --fail-on leaves `incomplete` out.
 */
export function renderJunit(r: ScanSummary, failOn: FailOn): string {
  const fails = (severity: string) =>
    (failOn.severity !== 'none' && severity === 'error') || (failOn.severity === 'warning' && severity === 'warning')
  const suites: string[] = []
  let total = 0
  let failures = 0
  let skippedTotal = 0
  let errors = 0
  for (const s of r.services) {
    const id = `${s.service.namespace}/${s.service.name}`
    const groups = groupFindings(s.findings)
    const cases = FAMILIES.map((family) => {
      const found = groups.filter((g) => checkFamily(g.code) === family)
      const failing = found.filter((g) => fails(g.severity))
      const text = found
        .map(
          (g) =>
            `${g.severity} ${g.code}: ${g.message}${g.nodes.length ? ` [nodes: ${g.nodes.join(', ')}]` : ''}\n${fixText(g)}`,
        )
        .join('\n\n')
      const notJudged = found.length === 0 ? NOT_JUDGED_BY_SCAN[family] : undefined
      const body =
        notJudged !== undefined
          ? `<skipped message="${xml(notJudged)}"/>`
          : failing.length > 0
            ? `<failure type="${xml(failing[0].code)}" message="${xml(failing.map((g) => g.code).join(', '))}">${xml(text)}</failure>`
            : found.length > 0
              ? `<system-out>${xml(text)}</system-out>`
              : ''
      return {
        failed: failing.length > 0,
        skipped: notJudged !== undefined,
        xml: `    <testcase classname="${xml(id)}" name="${xml(family)}">${body}</testcase>`,
      }
    })
    const notRun = s.notChecked.filter((n) => n.required)
    let suiteSkipped = cases.filter((c) => c.skipped).length
    let suiteErrors = 0
    if (notRun.length > 0) {
      const text = notRun.map((n) => `${n.node ?? 'all nodes'}: ${n.check}: ${n.reason}`).join('\n')
      const message = `${notRun.length} required check(s) could not run: the run is incomplete`
      // An incomplete run is an error testcase (exit 3), never a pass; skipped only where --fail-on leaves it out.
      if (failOn.incomplete) {
        suiteErrors = 1
        cases.push({
          failed: false,
          skipped: false,
          xml: `    <testcase classname="${xml(id)}" name="not checked"><error type="incomplete" message="${xml(message)}">${xml(text)}</error></testcase>`,
        })
      } else {
        suiteSkipped += 1
        cases.push({
          failed: false,
          skipped: true,
          xml: `    <testcase classname="${xml(id)}" name="not checked"><skipped message="${xml(message)}"/><system-out>${xml(text)}</system-out></testcase>`,
        })
      }
    }
    const suiteFailures = cases.filter((c) => c.failed).length
    total += cases.length
    failures += suiteFailures
    skippedTotal += suiteSkipped
    errors += suiteErrors
    suites.push(
      `  <testsuite name="${xml(id)}" tests="${cases.length}" failures="${suiteFailures}" errors="${suiteErrors}" skipped="${suiteSkipped}">\n${cases.map((c) => c.xml).join('\n')}\n  </testsuite>`,
    )
  }
  for (const s of r.skipped) {
    const id = `${s.namespace}/${s.name}`
    total += 1
    skippedTotal += 1
    suites.push(
      `  <testsuite name="${xml(id)}" tests="1" failures="0" errors="0" skipped="1">\n    <testcase classname="${xml(id)}" name="service"><skipped message="${xml(s.reason)}"/></testcase>\n  </testsuite>`,
    )
  }
  return `<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="kproxy-doctor scan" tests="${total}" failures="${failures}" errors="${errors}" skipped="${skippedTotal}">\n${suites.join('\n')}\n</testsuites>\n`
}
