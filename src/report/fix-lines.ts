import type {ChalkInstance} from 'chalk'
import type {NextStep} from './report.js'

/**
 * A finding's fix as printed: the command on its own `fix:`/`next:` line (exactly what to paste, nothing after it),
 * the prose on its own `hint:` line. Never one mixed line.
 */
export function fixLines(step: NextStep | null, label: 'fix' | 'next', indent: string, c: ChalkInstance): string[] {
  if (!step) return []
  return [...(step.command ? [`${indent}${c.bold(`${label}:`)} ${step.command}`] : []), ...(step.text ? [`${indent}${c.bold('hint:')} ${step.text}`] : [])]
}

/** The same, plain (JUnit bodies). */
export function fixText(step: NextStep, label: 'fix' | 'next'): string {
  return [...(step.command ? [`${label}: ${step.command}`] : []), ...(step.text ? [`hint: ${step.text}`] : [])].join('\n')
}
