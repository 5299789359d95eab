import {stringify} from 'yaml'

/** The version of the JSON/YAML contract (README "JSON output"): fields are only ever added within one version. */
export const API_VERSION = 'kproxy-doctor/v1'

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
  return {apiVersion: API_VERSION, kind: 'Error', toolVersion: meta.toolVersion, time: meta.time, ok: false, exitCode: 2, error: message}
}

export function serialize(document: object, format: 'json' | 'yaml'): string {
  return format === 'json' ? JSON.stringify(document, null, 2) + '\n' : stringify(document, {lineWidth: 0})
}
