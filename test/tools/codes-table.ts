/**
 * The finding-code table of docs/checks.md, generated from the catalogue, and its table of path steps, generated from
 * the steps and each proxy mode's words for them. `npm run codes:docs` rewrites both in place; test/unit/readme.test.ts
 * fails when docs/checks.md and the catalogue or the modes differ.
 */
import {readFileSync, writeFileSync} from 'node:fs'
import {BREAK_CONDITIONS, CATALOGUE, type Explanation} from '../../src/checks/catalogue.js'
import {PROXY_MODES} from '../../src/model/modes/index.js'
import {RULE_STEPS, STEP_MEANINGS, STEPS, type RuleStep, type Step} from '../../src/model/steps.js'

export const CODES_DOC = 'docs/checks.md'
export const START = '<!-- codes:start (generated from src/checks/catalogue.ts by npm run codes:docs) -->'
export const END = '<!-- codes:end -->'
const STEPS_START =
  '<!-- steps:start (generated from src/model/steps.ts and each mode of src/model/modes by npm run codes:docs) -->'
const STEPS_END = '<!-- steps:end -->'

const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\n/g, ' ')

const explanationCell = (x: Explanation) =>
  typeof x === 'string' ? `\`${x}\`` : `\`${x.step}\` (${cell(BREAK_CONDITIONS[x.when])})`

export function renderCodesTable(): string {
  const rows = CATALOGUE.map((e) => {
    const modes = e.modes.length === PROXY_MODES.length ? 'all' : e.modes.join(', ') || '– (Cilium)'
    const steps = e.explains.length > 0 ? e.explains.map(explanationCell).join(', ') : '–'
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

/** Each step `breaksAt` can name: what a break there means, and each mode's own chain, map or set for it. */
function renderStepsTable(): string {
  const isRuleStep = (s: Step): s is RuleStep => (RULE_STEPS as readonly Step[]).includes(s)
  const rows = [...STEPS, 'unknown' as const].map((step) => {
    const words = PROXY_MODES.map((m) => (isRuleStep(step) ? cell(m.vocabulary.steps[step]) : '–'))
    return `| \`${step}\` | ${cell(STEP_MEANINGS[step])} | ${words.join(' | ')} |`
  })
  return [
    STEPS_START,
    `| step | a break there | ${PROXY_MODES.map((m) => m.mode).join(' | ')} |`,
    `|---|---|${PROXY_MODES.map(() => '---|').join('')}`,
    ...rows,
    STEPS_END,
  ].join('\n')
}

/** `doc` with the section between `start` and `end` replaced by `table`. */
function replaced(doc: string, start: string, end: string, table: string): string {
  const from = doc.indexOf(start)
  const to = doc.indexOf(end)
  if (from < 0 || to < from) throw new Error(`${CODES_DOC} has no ${start} … ${end} section`)
  return doc.slice(0, from) + table + doc.slice(to + end.length)
}

/** The document with its code table and its step table replaced by the generated ones. */
export function withCodesTable(doc: string): string {
  return replaced(replaced(doc, START, END, renderCodesTable()), STEPS_START, STEPS_END, renderStepsTable())
}

if (process.argv[2] === '--write') writeFileSync(CODES_DOC, withCodesTable(readFileSync(CODES_DOC, 'utf8')))
