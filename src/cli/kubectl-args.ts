/** kubectl's global flags that kproxy-doctor honours, by every spelling kubectl accepts, and the flag they become. */
const KUBECTL_GLOBAL_FLAGS: Record<string, string> = {
  '--context': '--context',
  '--kubeconfig': '--kubeconfig',
  '--namespace': '--namespace',
  '-n': '--namespace',
}

/**
 * kubectl hands a plugin every argument after the plugin's name, unchanged, and users put its global flags anywhere
 * (`kubectl kproxy-doctor -n shop svc web`). Those flags are taken out wherever they stand and given back after the
 * command words, in kproxy-doctor's own spelling; everything else keeps its order. Nothing after `--` is touched.
 */
export function fromKubectlArgs(argv: string[]): string[] {
  const rest: string[] = []
  const globals: string[] = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (arg === '--') {
      rest.push(...argv.slice(i))
      break
    }
    const eq = arg.indexOf('=')
    const name = eq > 0 ? arg.slice(0, eq) : arg
    const ours = KUBECTL_GLOBAL_FLAGS[name]
    if (ours && eq > 0) globals.push(ours, arg.slice(eq + 1))
    else if (ours && i + 1 < argv.length) globals.push(ours, argv[++i])
    else if (ours) rest.push(arg)
    else if (/^-n[^=-]/.test(arg)) globals.push('--namespace', arg.slice(2))
    else rest.push(arg)
  }
  return [...rest, ...globals]
}
