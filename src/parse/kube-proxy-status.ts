/** What kube-proxy says about itself on a node: /proxyMode, /healthz and the sync metrics of /metrics. */
export interface KubeProxyStatus {
  proxyMode?: string
  proxyModeError?: string
  healthz?: {status: number; lastUpdated?: string; currentTime?: string; nodeEligible?: boolean}
  healthzError?: string
  /** The kubeproxy_* samples the checks use, summed over labels. */
  metrics?: Record<string, number>
  metricsError?: string
}

const SYNC_METRICS = [
  'kubeproxy_sync_proxy_rules_last_timestamp_seconds',
  'kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds',
  'kubeproxy_sync_proxy_rules_iptables_restore_failures_total',
  'kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total',
  'kubeproxy_sync_proxy_rules_nftables_sync_failures_total',
  'kubeproxy_sync_proxy_rules_endpoint_changes_pending',
  'kubeproxy_sync_proxy_rules_service_changes_pending',
]

/** Reads the Prometheus text format, keeping only the metrics named (labels summed). */
export function parseMetrics(text: string, names: string[] = SYNC_METRICS): Record<string, number> {
  const wanted = new Set(names)
  const out: Record<string, number> = {}
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line)
    if (!m || !wanted.has(m[1])) continue
    const v = Number(m[3])
    if (!Number.isNaN(v)) out[m[1]] = (out[m[1]] ?? 0) + v
  }
  return out
}

export function parseHealthz(status: number, body: string): NonNullable<KubeProxyStatus['healthz']> {
  try {
    const j = JSON.parse(body) as {lastUpdated?: string; currentTime?: string; nodeEligible?: boolean}
    return {status, lastUpdated: j.lastUpdated, currentTime: j.currentTime, nodeEligible: j.nodeEligible}
  } catch {
    return {status}
  }
}
