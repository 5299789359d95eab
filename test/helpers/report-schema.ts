import {readFileSync} from 'node:fs'
import {Ajv2020} from 'ajv/dist/2020.js'

const schema = JSON.parse(readFileSync('schema/report.schema.json', 'utf8'))
const ajv = new Ajv2020({allErrors: true, strict: true})
ajv.addSchema(schema, 'report')
const validateReport = ajv.compile({$ref: 'report'})
const validateTrace = ajv.compile({$ref: 'report#/$defs/trace'})

/** Why `document` does not match schema/report.schema.json (a svc document, or a trace with `kind: 'trace'`); null when it does. */
export function schemaErrors(document: unknown, kind: 'svc' | 'trace' = 'svc'): string | null {
  const validate = kind === 'trace' ? validateTrace : validateReport
  if (validate(document)) return null
  return ajv.errorsText(validate.errors, {separator: '\n'})
}
