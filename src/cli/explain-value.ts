/**
 * `--explain=tree` (or `=text`), the spelling users reach for, as oclif can parse it: a boolean flag takes no value,
 * so the value becomes --explain-format's (which names the accepted ones). Words after `--` are left alone.
 */
export function explainValueAsFormat(argv: readonly string[]): string[] {
  const end = argv.indexOf('--')
  const flags = end < 0 ? argv : argv.slice(0, end)
  const rest = end < 0 ? [] : argv.slice(end)
  return [
    ...flags.flatMap((word) =>
      word.startsWith('--explain=') ? ['--explain', '--explain-format', word.slice('--explain='.length)] : [word],
    ),
    ...rest,
  ]
}
