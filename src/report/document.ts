import {createRequire} from 'node:module'
import type * as Yaml from 'yaml'
import type {NodeReadVia} from '../diagnosis/choose-transport.js'
import {writeJson} from './json-writer.js'

/** The version of the JSON/YAML contract (README "JSON output"): fields are only ever added within one version. */
export const API_VERSION = 'kproxy-doctor/v3'

/** Who wrote a document, when, and against which cluster context (null: from a snapshot, or none chosen). */
export interface DocumentMeta {
  toolVersion: string
  time: string
  context: string | null
}

/** The header of `trace -o json|yaml`'s document (the walk's fields follow it). */
export interface TraceHeader {
  apiVersion: typeof API_VERSION
  kind: 'TraceReport'
  toolVersion: string
  time: string
}

export function traceHeader(meta: Omit<DocumentMeta, 'context'>): TraceHeader {
  return {apiVersion: API_VERSION, kind: 'TraceReport', toolVersion: meta.toolVersion, time: meta.time}
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

/** `collect svc -o json|yaml`: the bundle written, each node read or not, and the command that diagnoses it. */
export interface CollectReport {
  apiVersion: typeof API_VERSION
  kind: 'CollectReport'
  toolVersion: string
  time: string
  context: string | null
  bundle: string
  service: {namespace: string; name: string}
  nodes: Array<{name: string; read: boolean; error: string | null}>
  next: {command: string; argv: string[][]}
}

/** `cleanup -o json|yaml`: the doctor's own tables deleted on the node, and those that could not be. */
export interface CleanupReport {
  apiVersion: typeof API_VERSION
  kind: 'CleanupReport'
  toolVersion: string
  time: string
  node: string
  removed: string[]
  failed: string[]
}

export function collectDocument(
  r: Omit<CollectReport, 'apiVersion' | 'kind' | 'toolVersion' | 'time'>,
  meta: Omit<DocumentMeta, 'context'>,
): CollectReport {
  return {apiVersion: API_VERSION, kind: 'CollectReport', toolVersion: meta.toolVersion, time: meta.time, ...r}
}

export function cleanupDocument(
  r: {node: string; removed: string[]; failed: string[]},
  meta: Omit<DocumentMeta, 'context'>,
): CleanupReport {
  return {apiVersion: API_VERSION, kind: 'CleanupReport', toolVersion: meta.toolVersion, time: meta.time, ...r}
}

/** yaml, loaded for -o yaml only. */
const loadModule = createRequire(import.meta.url)

/** A document as JSON or YAML, written in pieces (see writeJson); no character in it acts on a terminal. */
export function writeDocument(document: object, format: 'json' | 'yaml', write: (chunk: string) => void): void {
  if (format === 'json') writeJson(document, write)
  else write(yamlText(document))
}

/** A small document (an error document) as one string. */
export function serialize(document: object, format: 'json' | 'yaml'): string {
  let text = ''
  writeDocument(document, format, (chunk) => (text += chunk))
  return text
}

/**
 * What a terminal acts on (see printable.ts), but the line breaks YAML's own layout writes. Made on first need (V8
 * builds a Unicode property's class from ICU's tables when it makes the expression, a part of a short run's start).
 */
let yamlControls: {one: RegExp; every: RegExp} | undefined
const YAML_CONTROLS = () =>
  (yamlControls ??= {one: /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u, every: /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu})

/**
 * YAML in which every string holding a control is double-quoted, where YAML escapes mean the character itself
 * (\n, \t, \e, \x9b, \u202e): the same value when parsed, and no line break or control of the string's own reaches
 * the output (yaml would write a line break as a block scalar's new line, and DEL, C1 and format characters as they
 * are).
 */
function yamlText(document: object): string {
  const {Document, visit} = loadModule('yaml') as typeof Yaml
  const doc = new Document(document)
  const controls = YAML_CONTROLS()
  visit(doc, {
    Scalar(_, node) {
      if (typeof node.value === 'string' && controls.one.test(node.value)) node.type = 'QUOTE_DOUBLE'
    },
  })
  const text = doc.toString({lineWidth: 0, doubleQuotedMinMultiLineLength: Number.MAX_SAFE_INTEGER})
  // Left as they are by yaml, so inside the double quotes chosen above: its escape.
  return text.replace(controls.every, (c) =>
    c === '\n'
      ? c
      : c.length > 1
        ? `\\U${c.codePointAt(0)!.toString(16).padStart(8, '0')}`
        : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  )
}

/** A report node as `nodes[]` of the JSON contract holds it, before the read-via field is added. */
interface ReportNode {
  name: string
  reachable: boolean
  error: string | null
  mode: string | null
  modeSource: string | null
  implementer?: unknown
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
    .map(([name, v]) => ({name, reachable: false, error: v.why, mode: null, modeSource: null, implementer: null}))
  const rank = (name: string) => (order.includes(name) ? order.indexOf(name) : order.length)
  const nodes = [...report.nodes, ...apiOnly]
    .sort((a, b) => rank(a.name) - rank(b.name))
    .map((n) => ({...n, ...(readVia.has(n.name) ? {readVia: readVia.get(n.name)} : {})}))
  return {...report, nodes}
}
