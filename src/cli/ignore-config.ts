import {existsSync, readFileSync} from 'node:fs'
import {Flags} from '@oclif/core'
import {createRequire} from 'node:module'
import type * as Yaml from 'yaml'
import {DiagnosisError} from '../errors.js'
import {checkIgnoreRules, rulesFromCodes, type IgnoreRule} from '../diagnosis/ignore-rules.js'
import {splitList} from './flags.js'

/** yaml, loaded when a config file is read. */
const loadModule = createRequire(import.meta.url)

/** Read from the working directory when `--config` is not given and the file exists. */
const DEFAULT_CONFIG_FILE = '.kproxy-doctor.yaml'

export const ignoreFlags = {
  ignore: Flags.string({description: 'finding codes to silence everywhere (comma-separated)', helpGroup: 'DIAGNOSIS'}),
  config: Flags.string({
    description: `config file with scoped ignore rules (default ${DEFAULT_CONFIG_FILE} in the working directory, when present)`,
    helpGroup: 'DIAGNOSIS',
  }),
}

/** `--ignore` codes and the config file's rules, every code checked against the catalogue. */
export function ignoreRules(flags: {ignore?: string; config?: string}): IgnoreRule[] {
  const rules = [...rulesFromCodes(splitList(flags.ignore)), ...loadIgnoreConfig(flags.config)]
  checkIgnoreRules(rules)
  return rules
}

const RULE_KEYS = new Set(['code', 'namespace', 'service', 'node', 'reason'])

/**
 * The ignore rules of a config file:
 *   ignore:
 *     - code: KPD-HAIRPIN-OFF
 *       namespace: shop      # optional scopes
 *       service: web
 *       node: node-a
 *       reason: the CNI sets hairpin itself (OPS-123)
 * An explicit path must exist; the default file is optional. Anything malformed is an error naming the entry.
 */
function loadIgnoreConfig(path: string | undefined): IgnoreRule[] {
  const file = path ?? DEFAULT_CONFIG_FILE
  if (!path && !existsSync(file)) return []
  let doc: unknown
  try {
    const {parse} = loadModule('yaml') as typeof Yaml
    doc = parse(readFileSync(file, 'utf8'))
  } catch (e) {
    throw new DiagnosisError(`config ${file}: ${(e as Error).message.split('\n')[0]}`, {cause: e})
  }
  if (doc === null || doc === undefined) return []
  if (typeof doc !== 'object' || Array.isArray(doc))
    throw new DiagnosisError(`config ${file}: expected a mapping with an "ignore" list`)
  const extra = Object.keys(doc).filter((k) => k !== 'ignore')
  if (extra.length > 0)
    throw new DiagnosisError(`config ${file}: unknown key(s) ${extra.join(', ')} (only "ignore" is read)`)
  const list = (doc as {ignore?: unknown}).ignore ?? []
  if (!Array.isArray(list)) throw new DiagnosisError(`config ${file}: "ignore" must be a list`)
  return list.map((entry: unknown, i) => {
    const where = `config ${file}, ignore entry ${i + 1}`
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry))
      throw new DiagnosisError(`${where}: expected a mapping with a "code"`)
    const e = entry as Record<string, unknown>
    const unknown = Object.keys(e).filter((k) => !RULE_KEYS.has(k))
    if (unknown.length > 0)
      throw new DiagnosisError(`${where}: unknown key(s) ${unknown.join(', ')} (allowed: ${[...RULE_KEYS].join(', ')})`)
    for (const [k, v] of Object.entries(e))
      if (typeof v !== 'string' || v === '') throw new DiagnosisError(`${where}: "${k}" must be a non-empty string`)
    if (e.code === undefined) throw new DiagnosisError(`${where}: "code" is required`)
    const rule: IgnoreRule = {code: e.code as string, source: where}
    for (const k of ['namespace', 'service', 'node', 'reason'] as const)
      if (e[k] !== undefined) rule[k] = e[k] as string
    return rule
  })
}
