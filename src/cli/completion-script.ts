/** What shell completion needs to know about one command. */
export interface CompletableCommand {
  /** Words as typed: "collect svc". */
  words: string
  flags: Array<{name: string; char?: string; takesValue: boolean; options?: readonly string[]}>
}

/** Flags whose value is a path: completed with file names. */
const PATH_FLAGS = new Set([
  'kubeconfig',
  'ssh-config',
  'snapshot',
  'out',
  'iptables-save',
  'nft',
  'ipset-save',
  'config',
])

const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`

/**
 * A bash completion script: command words first, then each command's flags, flag values from their options, and
 * file names for path flags. `source <(kproxy-doctor completion bash)`.
 */
export function bashCompletion(bin: string, commands: CompletableCommand[]): string {
  const fn = `_${bin.replace(/[^A-Za-z0-9]/g, '_')}_complete`
  const byLength = [...commands].sort((a, b) => b.words.length - a.words.length)
  const branches = byLength.map((c) => {
    const flagWords = c.flags.flatMap((f) => [`--${f.name}`, ...(f.char ? [`-${f.char}`] : [])])
    const valueCases = c.flags
      .filter((f) => f.takesValue && (f.options || PATH_FLAGS.has(f.name)))
      .map((f) => {
        const names = [`--${f.name}`, ...(f.char ? [`-${f.char}`] : [])].join('|')
        const reply = f.options
          ? `COMPREPLY=($(compgen -W ${q(f.options.join(' '))} -- "$cur"))`
          : 'COMPREPLY=($(compgen -f -- "$cur"))'
        return `        ${names}) ${reply}; return ;;`
      })
    return [
      `    ${q(c.words)} | ${q(c.words)}\\ *)`,
      `      case "$prev" in`,
      ...valueCases,
      `      esac`,
      `      [[ "$cur" == -* ]] && COMPREPLY=($(compgen -W ${q(flagWords.join(' '))} -- "$cur"))`,
      `      return ;;`,
    ].join('\n')
  })
  return `# bash completion for ${bin}: source <(${bin} completion bash)
${fn}() {
  # \${array[@]:i:1} is word i counted from 0 in bash and in zsh (whose plain subscripts count from 1).
  local cur="\${COMP_WORDS[@]:$COMP_CWORD:1}" prev="\${COMP_WORDS[@]:$((COMP_CWORD - 1)):1}"
  local typed="" word i
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="\${COMP_WORDS[@]:$i:1}"
    [[ "$word" == -* ]] && break
    typed="\${typed:+$typed }$word"
  done
  COMPREPLY=()
  case "$typed" in
${branches.join('\n')}
  esac
  local id next=()
  for id in ${commands.map((c) => q(c.words)).join(' ')}; do
    if [[ -z "$typed" ]]; then next+=("\${id%% *}")
    elif [[ "$id" == "$typed "* ]]; then id="\${id#"$typed "}"; next+=("\${id%% *}"); fi
  done
  COMPREPLY=($(compgen -W "\${next[*]}" -- "$cur"))
}
complete -o default -F ${fn} ${bin}
`
}

/** zsh runs the bash script through its bashcompinit layer: one source of truth for both shells. */
export function zshCompletion(bin: string, commands: CompletableCommand[]): string {
  return `#compdef ${bin}
# zsh completion for ${bin}: source <(${bin} completion zsh)
autoload -U +X compinit && compinit
autoload -U +X bashcompinit && bashcompinit
${bashCompletion(bin, commands)}`
}
