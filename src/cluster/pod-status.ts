import type {V1Pod} from '@kubernetes/client-node'

/** Why a Pod is not ready, in the words a person would look for: crash-looping, probe failing, pending… */
export function notReadyReason(pod: V1Pod): string {
  const phase = pod.status?.phase ?? 'Unknown'
  if (pod.metadata?.deletionTimestamp) return 'terminating'
  if (phase !== 'Running') {
    const waiting = pod.status?.containerStatuses?.find((c) => c.state?.waiting)?.state?.waiting
    return `phase ${phase}${waiting?.reason ? ` (${waiting.reason})` : ''}`
  }
  const parts: string[] = []
  for (const c of pod.status?.containerStatuses ?? []) {
    if (c.ready) continue
    const waiting = c.state?.waiting
    const last = c.lastState?.terminated
    if (waiting?.reason)
      parts.push(`container ${c.name} ${waiting.reason}${c.restartCount ? `, ${c.restartCount} restarts` : ''}${last?.reason ? `, last exit ${last.reason} (code ${last.exitCode})` : ''}`)
    else if (c.state?.running) parts.push(`container ${c.name} running but not ready (readiness probe failing)`)
    else if (c.state?.terminated) parts.push(`container ${c.name} terminated: ${c.state.terminated.reason ?? 'exit ' + c.state.terminated.exitCode}`)
  }
  const cond = pod.status?.conditions?.find((c) => c.type === 'Ready')
  if (parts.length === 0 && cond?.status !== 'True') parts.push(`Ready=${cond?.status ?? 'unknown'}${cond?.reason ? ` (${cond.reason})` : ''}${cond?.message ? `: ${cond.message}` : ''}`)
  return parts.join('; ') || 'not ready'
}

export function isPodReady(pod: V1Pod): boolean {
  return pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false
}

export function podByIp(pods: V1Pod[], ip: string): V1Pod | undefined {
  return pods.find((p) => p.status?.podIP === ip || p.status?.podIPs?.some((x) => x.ip === ip))
}

export function selectorMatches(selector: Record<string, string>, labels: Record<string, string> | undefined): boolean {
  return Object.entries(selector).every(([k, v]) => labels?.[k] === v)
}
