/** The context a live read uses: --context, else the kubeconfig's current one (none in a Pod's in-cluster configuration). */
export async function currentContext(flags: {kubeconfig?: string; context?: string}): Promise<string | null> {
  if (flags.context) return flags.context
  const {loadKubeConfig} = await import('../cluster/live-source.js')
  const loaded = loadKubeConfig(flags)
  return loaded.inCluster ? null : loaded.kc.getCurrentContext() || null
}
