import {createRequire} from 'node:module'
import type * as Yaml from 'yaml'
import type {NodeReadVia} from '../diagnosis/choose-transport.js'

/** The version of the JSON/YAML contract (README "JSON output"): fields are only ever added within one version. */
export const API_VERSION = 'kproxy-doctor/v2'

/** Who wrote a document, when, and against which cluster context (null: from a snapshot, or none chosen). */
export interface DocumentMeta {
  toolVersion: string
  time: string
  context: string | null
}

/** What `-o json`/`-o yaml` print when the diagnosis could not be made (exit 2), alongside the line on stderr. */
export interface ErrorDocument {
  apiVersion: typeof API_VERSION
  kind: 'Error'
  toolVersion: string
  time: string
  ok: false
  exitCode: 2
  error: string
}

export function errorDocument(message: string, meta: Omit<DocumentMeta, 'context'>): ErrorDocument {
  return {
    apiVersion: API_VERSION,
    kind: 'Error',
    toolVersion: meta.toolVersion,
    time: meta.time,
    ok: false,
    exitCode: 2,
    error: message,
  }
}

/** yaml, loaded for -o yaml only. */
const loadModule = createRequire(import.meta.url)

export function serialize(document: object, format: 'json' | 'yaml'): string {
  if (format === 'json') return JSON.stringify(document, null, 2) + '\n'
  const {stringify} = loadModule('yaml') as typeof Yaml
  return stringify(document, {lineWidth: 0})
}

/** A report node as `nodes[]` of the JSON contract holds it, before the read-via field is added. */
interface ReportNode {
  name: string
  reachable: boolean
  error: string | null
  mode: string | null
  modeSource: string | null
}

/**
 * Adds `readVia` (how each node was read, or why not, and why the other ways were not used) to every node of a
 * report, and lists the nodes left API-only (not read, so not in the diagnosis) with the reason, in `order`.
 */
export function withReadVia<T extends {nodes: ReportNode[]}>(
  report: T,
  readVia: Map<string, NodeReadVia>,
  order: string[],
): T {
  const known = new Set(report.nodes.map((n) => n.name))
  const apiOnly = [...readVia]
    .filter(([name, v]) => v.transport === null && !known.has(name))
    .map(([name, v]) => ({name, reachable: false, error: `not read: ${v.why}`, mode: null, modeSource: null}))
  const rank = (name: string) => (order.includes(name) ? order.indexOf(name) : order.length)
  const nodes = [...report.nodes, ...apiOnly]
    .sort((a, b) => rank(a.name) - rank(b.name))
    .map((n) => ({...n, ...(readVia.has(n.name) ? {readVia: readVia.get(n.name)} : {})}))
  return {...report, nodes}
}
