/**
 * The README's finding-code table, generated from the catalogue. `npm run codes:readme` rewrites it in place;
 * test/unit/readme.test.ts fails when the README and the catalogue differ.
 */
import {readFileSync, writeFileSync} from 'node:fs'
import {CATALOGUE} from '../../src/checks/catalogue.js'

export const START = '<!-- codes:start (generated from src/checks/catalogue.ts by npm run codes:readme) -->'
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

/** The README with its code table replaced by the generated one. */
export function withCodesTable(readme: string): string {
  const start = readme.indexOf(START)
  const end = readme.indexOf(END)
  if (start < 0 || end < start) throw new Error(`README.md has no ${START} … ${END} section`)
  return readme.slice(0, start) + renderCodesTable() + readme.slice(end + END.length)
}

if (process.argv[2] === '--write') writeFileSync('README.md', withCodesTable(readFileSync('README.md', 'utf8')))
