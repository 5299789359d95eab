import {readFileSync} from 'node:fs'
import {Ajv2020} from 'ajv/dist/2020.js'
import YAML from 'yaml'

const schema = JSON.parse(readFileSync('schema/report.schema.json', 'utf8'))
const ajv = new Ajv2020({allErrors: true, strict: true})
ajv.addSchema(schema, 'report')
const validateDocument = ajv.compile({$ref: 'report'})

/** The document each command prints with -o json|yaml when it ran (an Error document when it could not: exit 2). */
const KIND = {
  svc: 'ServiceReport',
  scan: 'ScanReport',
  trace: 'TraceReport',
  collect: 'CollectReport',
  cleanup: 'CleanupReport',
} as const

/**
 * Why `document` does not match schema/report.schema.json, or is not the `kind` the command prints (an Error document
 * always may be); null when it does.
 */
export function schemaErrors(document: unknown, command?: keyof typeof KIND): string | null {
  if (!validateDocument(document)) return ajv.errorsText(validateDocument.errors, {separator: '\n'})
  const kind = (document as {kind: string}).kind
  if (command && kind !== 'Error' && kind !== KIND[command]) return `kind ${kind}, expected ${KIND[command]}`
  return null
}

/** The document `-o yaml` printed, read back. */
export function parseYaml(text: string): unknown {
  return YAML.parse(text)
}
