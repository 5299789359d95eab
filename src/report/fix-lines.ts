import type {ChalkInstance} from 'chalk'
import type {NextStep} from './report.js'
import {wrapCommand, wrapProse} from './width.js'

/**
 * A finding's fix as printed: the command on its own `fix:`/`next:` line (exactly what to paste, nothing after it),
 * the prose on its own `hint:` line. Never one mixed line.
 */
export function fixLines(
  step: NextStep | null,
  label: 'fix' | 'next',
  indent: string,
  c: ChalkInstance,
  width = Number.POSITIVE_INFINITY,
): string[] {
  if (!step) return []
  // A command wraps only between words outside quotes, each line ending in ` \`: the lines paste as the same command.
  const hang = ' '.repeat(indent.length + label.length + 2)
  return [
    ...(step.command ? wrapCommand(step.command, width, `${indent}${c.bold(`${label}:`)} `, hang + '  ') : []),
    ...(step.text ? wrapProse(step.text, width, `${indent}${c.bold('hint:')} `, ' '.repeat(indent.length + 6)) : []),
  ]
}

/** The same, plain (JUnit bodies). */
export function fixText(step: NextStep, label: 'fix' | 'next'): string {
  return [...(step.command ? [`${label}: ${step.command}`] : []), ...(step.text ? [`hint: ${step.text}`] : [])].join(
    '\n',
  )
}
