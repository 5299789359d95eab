/**
 * Strips what a terminal would interpret from text that came from a node or the API (ANSI escapes, other C0/C1
 * controls, bidi overrides), so a hostile name cannot rewrite the screen. Tabs and newlines are kept.
 */
const CONTROL =
  // eslint-disable-next-line no-control-regex
  /\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)?|\u001b\[[0-?]*[ -/]*[@-~]|\u001b[@-_]|[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g

export function printable(text: string): string {
  return text.replace(CONTROL, '')
}
