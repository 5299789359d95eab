import type {ChalkInstance} from 'chalk'
import type {FixStep} from '../checks/check.js'
import type {NextStep} from './report.js'
import {wrapCommand, wrapProse} from './width.js'

/** What the `fix` label says it changes: `fix (changes node-b):`, `fix (changes the cluster):`. */
function fixLabel(fix: Pick<FixStep, 'changes' | 'node'>): string {
  return `fix (changes ${fix.changes === 'node' ? (fix.node ?? 'the node') : 'the cluster'})`
}

/**
 * A finding's steps as printed, in one vocabulary everywhere (svc's findings and headline, scan, JUnit): `check:` a
 * read-only command that shows the evidence, `fix (changes NODE):` the repair (a command, or prose where it is a
 * setting to change by hand), `hint:` prose. A command is alone on its line (exactly what to paste, nothing after it).
 */
export function fixLines(
  step: NextStep | null,
  indent: string,
  c: ChalkInstance,
  width = Number.POSITIVE_INFINITY,
): string[] {
  if (!step) return []
  // A command wraps only between words outside quotes, each line ending in ` \`: the lines paste as the same command.
  const command = (label: string, text: string) =>
    wrapCommand(
      text,
      width,
      `${indent}${c.bold(`${label}:`)} `,
      ' '.repeat(indent.length + Math.min(label.length + 4, 10)),
    )
  const prose = (label: string, text: string) =>
    wrapProse(text, width, `${indent}${c.bold(`${label}:`)} `, ' '.repeat(indent.length + 6))
  const {check, fix, text} = step
  return [
    ...(check ? command('check', check.command) : []),
    ...(fix?.command ? command(fixLabel(fix), fix.command) : []),
    ...(fix?.text ? prose(fix.command ? 'hint' : fixLabel(fix), fix.text) : []),
    ...(text ? prose('hint', text) : []),
  ]
}

/** The same, plain (JUnit bodies). */
export function fixText(step: NextStep): string {
  const {check, fix, text} = step
  return [
    ...(check ? [`check: ${check.command}`] : []),
    ...(fix?.command ? [`${fixLabel(fix)}: ${fix.command}`] : []),
    ...(fix?.text ? [`${fix.command ? 'hint' : fixLabel(fix)}: ${fix.text}`] : []),
    ...(text ? [`hint: ${text}`] : []),
  ].join('\n')
}
