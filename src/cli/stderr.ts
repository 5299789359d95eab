import {printable} from '../report/printable.js'

/**
 * Every line kproxy-doctor writes to stderr (the error line, warnings, --verbose, announcements): "kproxy-doctor: "
 * and the text made printable, so a node's or the API's words cannot act on the terminal or start a line of their own.
 */
export function stderrLine(text: string): void {
  process.stderr.write(`kproxy-doctor: ${printable(text)}\n`)
}
