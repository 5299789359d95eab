import type {Finding} from '../checks/check.js'
import type {Diagnosis} from '../diagnosis/diagnose.js'
import type {Keep, ScanResult} from '../diagnosis/scan.js'
import {buildReport, fails, type FailOn, type Report, type ReportOptions} from './report.js'
import {escapeJsonControls} from './json-writer.js'
import {API_VERSION, type DocumentMeta} from './document.js'

/** The JSON contract of `scan -o json|yaml`: per Service the same shape as `svc -o json`. */
interface ScanReport {
  apiVersion: typeof API_VERSION
  kind: 'ScanReport'
  toolVersion: string
  /** When the scan was made (ISO 8601, UTC). */
  time: string
  /** The kubeconfig context read; null for a snapshot. */
  context: string | null
  ok: boolean
  summary: string
  counts: {
    services: number
    diagnosed: number
    skipped: number
    withErrors: number
    withWarnings: number
    withChecksNotRun: number
  }
  services: Report[]
  skipped: Array<{namespace: string; name: string; type: string; reason: string}>
  nodes: Array<{name: string; reachable: boolean; error: string | null}>
  notes: string[]
}

/**
 * What a scan keeps of each Service's report, made as soon as it is judged: what the table, JUnit and --fail-on read,
 * and for `-o json` the whole report already written out (as UTF-8, outside the JavaScript heap). Keeping every
 * Service's report as objects until the end held gigabytes at 10,000 Services and slowed every garbage collection.
 */
export interface ScannedService extends Pick<Report, 'service' | 'endpoints' | 'findings' | 'notChecked' | 'ok'> {
  /** The Service's `svc -o json` report, indented for its place in the scan's document (-o json only). */
  json?: Uint8Array
}

/** The scan's report as the table and JUnit read it; `writeScanJson` writes it as the JSON contract, ScanReport. */
export type ScanSummary = Omit<ScanReport, 'services'> & {services: ScannedService[]}

/**
 * A Service's array element in the scan's document, indented as JSON.stringify(document, null, 2) would write it (two
 * levels deep): written as the element of an array in an array, whose first and last 6 bytes ("[\n  [\n", "\n  ]\n]")
 * are then left off. One pass over the text instead of re-indenting every line.
 */
function elementJson(r: Report): Uint8Array {
  return Buffer.from(escapeJsonControls(JSON.stringify([[r]], null, 2))).subarray(6, -6)
}

/** What a scan keeps of each Service's diagnosis (see ScannedService), on any of its threads; `withJson` for `-o json`. */
export function keepScannedServices(withJson: boolean, opts: ReportOptions): Keep<ScannedService> {
  return {
    summarise: scannedService(withJson, opts),
    // This file by its name: the same file compiled alone, and the file the bundle keeps beside itself (its own
    // import.meta.url is then the bundle's).
    recipe: {
      module: new URL('./scan-report.js', import.meta.url).href,
      name: scannedService.name,
      args: [withJson, opts],
    },
  }
}

/**
 * What a scan keeps of one Service's diagnosis; exported for the scan's worker threads, which import it by name (see
 * keepScannedServices).
 * @public
 */
export function scannedService(withJson: boolean, opts: ReportOptions): (d: Diagnosis) => ScannedService {
  return (d) => {
    const r = buildReport(d, opts)
    const kept: ScannedService = {
      service: r.service,
      endpoints: r.endpoints,
      findings: r.findings,
      notChecked: r.notChecked,
      ok: r.ok,
    }
    if (withJson) kept.json = elementJson(r)
    return kept
  }
}

/** Writes the scan's `-o json` document: exactly JSON.stringify(ScanReport, null, 2) and a newline, in pieces. */
export function writeScanJson(r: ScanSummary, write: (chunk: string | Uint8Array) => void): void {
  const placeholder = 'kproxy-doctor: the services go here'
  const [before, after] = escapeJsonControls(JSON.stringify({...r, services: placeholder}, null, 2)).split(
    `"${placeholder}"`,
  )
  write(before)
  if (r.services.length === 0) write('[]')
  else {
    write('[\n')
    r.services.forEach((s, i) => {
      if (!s.json) throw new Error(`the scan kept no JSON report of ${s.service.namespace}/${s.service.name}`)
      write(s.json)
      write(i < r.services.length - 1 ? ',\n' : '\n')
    })
    write('  ]')
  }
  write(after + '\n')
}

/** The scan's whole document as objects (-o yaml): each Service's report read back from its JSON. */
export function scanDocument(r: ScanSummary): ScanReport {
  return {
    ...r,
    services: r.services.map((s) => {
      if (!s.json) throw new Error(`the scan kept no report of ${s.service.namespace}/${s.service.name}`)
      return JSON.parse(Buffer.from(s.json).toString('utf8')) as Report
    }),
  }
}

/** Findings of one code on one Service, the nodes listed once. */
export interface FindingGroup {
  code: string
  severity: Finding['severity']
  title: string
  /** The first finding's message and fix: the others differ only by node. */
  message: string
  check: Finding['check']
  fix: Finding['fix']
  text: string | null
  nodes: string[]
}

/** The scan's report from what it kept of each Service's report. */
export function buildScanReport(
  scan: ScanResult<ScannedService>,
  scope: string,
  failOn: FailOn,
  meta: DocumentMeta,
): ScanSummary {
  const services = scan.outcomes.flatMap((o) => (o.diagnosis ? [o.diagnosis] : []))
  const skipped = scan.outcomes.flatMap((o) =>
    o.skipped ? [{namespace: o.namespace, name: o.name, type: o.type, reason: o.skipped}] : [],
  )
  const withErrors = services.filter((s) => s.findings.some((f) => f.severity === 'error')).length
  const withWarnings = services.filter((s) => s.findings.some((f) => f.severity === 'warning')).length
  const withChecksNotRun = services.filter((s) => s.notChecked.some((n) => n.required)).length
  const failing = services.filter((s) => fails(s, failOn)).length
  const readable = scan.observations.filter((o) => o.reachable).length
  const mark = failing > 0 ? '✗' : withChecksNotRun > 0 ? '?' : '✓'
  const what = failOn.severity === 'warning' ? 'have errors or warnings' : 'are broken'
  const verdict =
    failing > 0
      ? `${failing} of ${services.length} diagnosed Services ${what}`
      : withChecksNotRun > 0
        ? `no fault found in what was checked, but ${withChecksNotRun} of ${services.length} diagnosed Services have checks that could not run (see Not checked)`
        : `all ${services.length} diagnosed Services work`
  return {
    apiVersion: API_VERSION,
    kind: 'ScanReport',
    toolVersion: meta.toolVersion,
    time: meta.time,
    context: meta.context,
    ok: failing === 0,
    summary: `${mark} ${scope}: ${verdict} (${skipped.length} skipped; ${readable} of ${scan.observations.length} nodes read)`,
    counts: {
      services: scan.outcomes.length,
      diagnosed: services.length,
      skipped: skipped.length,
      withErrors,
      withWarnings,
      withChecksNotRun,
    },
    services,
    skipped,
    nodes: scan.observations.map((o) => ({name: o.name, reachable: o.reachable, error: o.error ?? null})),
    notes: [...(scan.selectionNote ? [scan.selectionNote] : []), ...scan.notes],
  }
}

/** A `svc` report as a scan of one Service, for `svc -o junit` (the same testsuite a scan writes for it). */
export function singleServiceSummary(r: Report): ScanSummary {
  return {
    apiVersion: r.apiVersion,
    kind: 'ScanReport',
    toolVersion: r.toolVersion,
    time: r.time,
    context: r.context,
    ok: r.ok,
    summary: r.summary,
    counts: {
      services: 1,
      diagnosed: 1,
      skipped: 0,
      withErrors: r.findings.some((f) => f.severity === 'error') ? 1 : 0,
      withWarnings: r.findings.some((f) => f.severity === 'warning') ? 1 : 0,
      withChecksNotRun: r.notChecked.some((n) => n.required) ? 1 : 0,
    },
    services: [r],
    skipped: [],
    nodes: r.nodes.map((n) => ({name: n.name, reachable: n.reachable, error: n.error})),
    notes: r.notes,
  }
}

export function groupFindings(findings: Finding[]): FindingGroup[] {
  const groups = new Map<string, FindingGroup>()
  for (const f of findings) {
    const group = groups.get(f.code)
    if (group) {
      if (f.node && !group.nodes.includes(f.node)) group.nodes.push(f.node)
    } else
      groups.set(f.code, {
        code: f.code,
        severity: f.severity,
        title: f.title,
        message: f.message,
        check: f.check,
        fix: f.fix,
        text: f.text,
        nodes: f.node ? [f.node] : [],
      })
  }
  return [...groups.values()]
}

/** The finding that matters most on a Service: the first error, else the first warning. */
export function worstFinding(r: Pick<Report, 'findings'>): Finding | undefined {
  return r.findings.find((f) => f.severity === 'error') ?? r.findings.find((f) => f.severity === 'warning')
}

/**
 * 1: a Service has a finding --fail-on names; else 3: a Service has a required check that could not run (no node read,
 * a family not read) and --fail-on has `incomplete`; else 0.
 */
export function scanExitCode(r: ScanSummary, failOn: FailOn): number {
  if (!r.ok) return 1
  return failOn.incomplete && r.counts.withChecksNotRun > 0 ? 3 : 0
}
