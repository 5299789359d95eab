/** The context a live read uses: --context, else the kubeconfig's current one. */
export async function currentContext(flags: {kubeconfig?: string; context?: string}): Promise<string | null> {
  if (flags.context) return flags.context
  const {loadKubeConfig} = await import('../cluster/live-source.js')
  return loadKubeConfig(flags).kc.getCurrentContext() || null
}
