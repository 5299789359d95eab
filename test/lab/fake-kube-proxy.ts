/**
 * Stands in for kube-proxy's own HTTP endpoints inside a lab node's namespace: /proxyMode and /metrics on
 * 127.0.0.1:10249, /healthz on 127.0.0.1:10256. What it answers is read from a state file the test rewrites.
 * Usage: node fake-kube-proxy.js STATE_FILE
 */
import {readFileSync} from 'node:fs'
import {createServer} from 'node:http'

export interface FakeKubeProxyState {
  mode: string
  healthy: boolean
  lastSync: number
  lastQueued: number
  restoreFailures: number
}

const stateFile = process.argv[2]
const state = (): FakeKubeProxyState => JSON.parse(readFileSync(stateFile, 'utf8')) as FakeKubeProxyState

const metrics = createServer((req, res) => {
  const s = state()
  if (req.url === '/proxyMode') return res.end(s.mode)
  if (req.url === '/metrics') {
    res.setHeader('Content-Type', 'text/plain; version=0.0.4')
    return res.end(
      [
        '# HELP kubeproxy_sync_proxy_rules_last_timestamp_seconds The last time proxy rules were successfully synced',
        '# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge',
        `kubeproxy_sync_proxy_rules_last_timestamp_seconds ${s.lastSync}`,
        `kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds ${s.lastQueued}`,
        `kubeproxy_sync_proxy_rules_iptables_restore_failures_total ${s.restoreFailures}`,
        'kubeproxy_sync_proxy_rules_endpoint_changes_pending 0',
        '',
      ].join('\n'),
    )
  }
  res.statusCode = 404
  res.end('404 page not found\n')
})

const health = createServer((req, res) => {
  const s = state()
  res.statusCode = s.healthy ? 200 : 503
  res.setHeader('Content-Type', 'application/json')
  res.end(
    JSON.stringify({
      lastUpdated: new Date(s.lastSync * 1000).toISOString(),
      currentTime: new Date().toISOString(),
      nodeEligible: true,
    }),
  )
})

metrics.listen(10249, '127.0.0.1')
health.listen(10256, '127.0.0.1')
