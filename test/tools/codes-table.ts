/**
 * The finding-code table of docs/checks.md, generated from the catalogue. `npm run codes:docs` rewrites it in place;
 * test/unit/readme.test.ts fails when docs/checks.md and the catalogue differ.
 */
import {readFileSync, writeFileSync} from 'node:fs'
import {CATALOGUE} from '../../src/checks/catalogue.js'

export const CODES_DOC = 'docs/checks.md'
export const START = '<!-- codes:start (generated from src/checks/catalogue.ts by npm run codes:docs) -->'
export const END = '<!-- codes:end -->'

const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\n/g, ' ')

export function renderCodesTable(): string {
  const rows = CATALOGUE.map((e) => {
    const modes = e.modes.length === 3 ? 'all' : e.modes.join(', ')
    const steps = e.explains.length > 0 ? e.explains.map((s) => `\`${s}\``).join(', ') : '–'
    return `| \`${e.code}\` | ${e.severity} | ${e.family} | ${cell(e.title)} | ${cell(e.hint)} | ${steps} | ${modes} |`
  })
  return [
    START,
    '| code | severity | family | title | next step | explains a break at | modes |',
    '|---|---|---|---|---|---|---|',
    ...rows,
    END,
  ].join('\n')
}

/** The document with its code table replaced by the generated one. */
export function withCodesTable(doc: string): string {
  const start = doc.indexOf(START)
  const end = doc.indexOf(END)
  if (start < 0 || end < start) throw new Error(`${CODES_DOC} has no ${START} … ${END} section`)
  return doc.slice(0, start) + renderCodesTable() + doc.slice(end + END.length)
}

if (process.argv[2] === '--write') writeFileSync(CODES_DOC, withCodesTable(readFileSync(CODES_DOC, 'utf8')))
