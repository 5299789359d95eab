import {notReadyReason, isPodReady} from '../../cluster/pod-status.js'
import type {NodeObservation} from '../../node/observation.js'
import type {Check, CheckContext, FindingDraft} from '../check.js'
import {codeEntry} from '../catalogue.js'
import {kubectlCommand, nodeCommand} from '../../model/reach.js'
import {kubeProxyLogs, restartKubeProxy} from './kube-proxy-pod.js'

/** Seconds between two instants, for "last good sync N s ago". */
function ago(then: number, now: number): string {
  const s = Math.max(0, Math.round(now - then))
  return s < 120 ? `${s} s` : s < 7200 ? `${Math.round(s / 60)} min` : `${Math.round(s / 3600)} h`
}

function nodeNow(n: NodeObservation): number {
  const t = n.kubeProxy?.healthz?.currentTime
  return t ? Date.parse(t) / 1000 : Date.now() / 1000
}

export const proxyUnhealthy: Check = {
  meta: codeEntry('KPD-PROXY-UNHEALTHY'),
  run(ctx) {
    const out: FindingDraft[] = []
    for (const n of ctx.observations.filter((o) => o.reachable)) {
      const h = n.kubeProxy?.healthz
      if (!h || h.status === 200) continue
      const last = h.lastUpdated
        ? `; last update ${ago(Date.parse(h.lastUpdated) / 1000, nodeNow(n))} ago (${h.lastUpdated})`
        : ''
      out.push({
        node: n.name,
        message: `kube-proxy on ${n.name} answers /healthz with ${h.status}${h.nodeEligible === false ? ' (node not eligible: being deleted or tainted for deletion)' : ''}${last}: the rules on this node may be stale`,
        check: kubeProxyLogs(ctx, n.name),
        fix: restartKubeProxy(ctx, n.name),
      })
    }
    return out
  },
}

const QUEUE_SLACK_SECONDS = 60

export const proxyStuck: Check = {
  meta: codeEntry('KPD-PROXY-STUCK'),
  run(ctx) {
    const out: FindingDraft[] = []
    for (const n of ctx.observations.filter((o) => o.reachable)) {
      const m = n.kubeProxy?.metrics
      const last = m?.kubeproxy_sync_proxy_rules_last_timestamp_seconds
      const queued = m?.kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds
      if (last === undefined || queued === undefined || queued - last <= QUEUE_SLACK_SECONDS) continue
      out.push({
        node: n.name,
        message: `kube-proxy on ${n.name} has had a sync queued for ${ago(queued, nodeNow(n))}, but its last successful sync was ${ago(last, nodeNow(n))} ago: its rules are stale`,
        evidence: [
          `kubeproxy_sync_proxy_rules_last_timestamp_seconds ${last}`,
          `kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds ${queued}`,
        ],
        check: nodeCommand(ctx.reach, n.name, {
          argv: ['curl', '-s', '127.0.0.1:10249/metrics'],
          filter: ['grep', 'sync_proxy_rules'],
        }),
        fix: restartKubeProxy(ctx, n.name),
      })
    }
    return out
  },
}

export const proxySyncFailures: Check = {
  meta: codeEntry('KPD-PROXY-SYNC-FAILURES'),
  run(ctx) {
    const out: FindingDraft[] = []
    for (const n of ctx.observations.filter((o) => o.reachable)) {
      const m = n.kubeProxy?.metrics ?? {}
      const failures = Object.entries(m).filter(([k, v]) => /failures_total$/.test(k) && v > 0)
      if (failures.length > 0)
        out.push({
          node: n.name,
          message: `kube-proxy on ${n.name} counts ${failures.map(([k, v]) => `${v} ${k.replace('kubeproxy_sync_proxy_rules_', '')}`).join(', ')}`,
          evidence: failures.map(([k, v]) => `${k} ${v}`),
        })
    }
    return out
  },
}

function podOn(ctx: CheckContext, node: string) {
  return ctx.cluster.kubeProxyPods.find((p) => p.spec?.nodeName === node)
}

export const proxyPodDown: Check = {
  meta: codeEntry('KPD-PROXY-POD-DOWN'),
  run(ctx) {
    if (ctx.cluster.kubeProxyPods.length === 0) return []
    const out: FindingDraft[] = []
    for (const o of ctx.observations) {
      const pod = podOn(ctx, o.name)
      if (!pod) {
        out.push({
          node: o.name,
          message: `no kube-proxy Pod on ${o.name} (the other nodes have one): nothing keeps its rules up to date`,
          check: kubectlCommand(ctx.reach, null, ['describe', 'node', o.name], [o.name]),
          text: `Compare the node's taints with the kube-proxy DaemonSet's tolerations (kubectl -n kube-system get ds -o wide).`,
        })
        continue
      }
      if (isPodReady(pod)) continue
      const restarts = (pod.status?.containerStatuses ?? []).reduce((a, c) => a + (c.restartCount ?? 0), 0)
      out.push({
        node: o.name,
        message: `kube-proxy Pod ${pod.metadata?.name} on ${o.name} is not ready: ${notReadyReason(pod)}${restarts ? ` (${restarts} restarts)` : ''}: the node's rules are not being kept up to date`,
        check: kubectlCommand(
          ctx.reach,
          'kube-system',
          ['describe', 'pod', pod.metadata?.name ?? ''],
          [pod.metadata?.name],
        ),
        fix: restartKubeProxy(ctx, o.name),
        text: `Read its logs first, and those of its previous run (kubectl logs --previous).`,
      })
    }
    return out
  },
}
