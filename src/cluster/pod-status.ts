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
      parts.push(
        `container ${c.name} ${waiting.reason}${c.restartCount ? `, ${c.restartCount} restarts` : ''}${last?.reason ? `, last exit ${last.reason} (code ${last.exitCode})` : ''}`,
      )
    else if (c.state?.running) parts.push(`container ${c.name} running but not ready (readiness probe failing)`)
    else if (c.state?.terminated)
      parts.push(
        `container ${c.name} terminated: ${c.state.terminated.reason ?? 'exit ' + c.state.terminated.exitCode}`,
      )
  }
  const cond = pod.status?.conditions?.find((c) => c.type === 'Ready')
  if (parts.length === 0 && cond?.status !== 'True')
    parts.push(
      `Ready=${cond?.status ?? 'unknown'}${cond?.reason ? ` (${cond.reason})` : ''}${cond?.message ? `: ${cond.message}` : ''}`,
    )
  return parts.join('; ') || 'not ready'
}

export function isPodReady(pod: V1Pod): boolean {
  return pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false
}

/**
 * Indexes of one list of Pods, made once: a scan asks them for every Service of a namespace, so a walk over every
 * Pod per question would make it quadratic. Keyed by the list itself (the cluster source hands the same list out).
 */
interface PodIndex {
  /** The list's length when indexed: a list grown or cut since is indexed again. */
  count: number
  byIp: Map<string, V1Pod>
  byLabel: Map<string, V1Pod[]>
  /** Each node's Pod addresses (status.podIPs, else status.podIP), in list order. */
  byNode: Map<string, Set<string>>
}
const indexes = new WeakMap<readonly V1Pod[], PodIndex>()

function indexOf(pods: readonly V1Pod[]): PodIndex {
  let index = indexes.get(pods)
  if (index && index.count === pods.length) return index
  index = {count: pods.length, byIp: new Map(), byLabel: new Map(), byNode: new Map()}
  for (const p of pods) {
    const node = p.spec?.nodeName
    if (node) {
      const set = index.byNode.get(node) ?? new Set<string>()
      for (const ip of p.status?.podIPs?.length
        ? p.status.podIPs.map((i) => i.ip)
        : p.status?.podIP
          ? [p.status.podIP]
          : [])
        set.add(ip)
      index.byNode.set(node, set)
    }
    for (const ip of [p.status?.podIP, ...(p.status?.podIPs ?? []).map((x) => x.ip)])
      if (ip && !index.byIp.has(ip)) index.byIp.set(ip, p)
    for (const [k, v] of Object.entries(p.metadata?.labels ?? {})) {
      const key = `${k}=${v}`
      const list = index.byLabel.get(key)
      if (list) list.push(p)
      else index.byLabel.set(key, [p])
    }
  }
  indexes.set(pods, index)
  return index
}

/** The first Pod (in list order) with this address as status.podIP or one of status.podIPs. */
export function podByIp(pods: readonly V1Pod[], ip: string): V1Pod | undefined {
  return indexOf(pods).byIp.get(ip)
}

/** Every address (each family: status.podIPs, else status.podIP) of the Pods on a node, in list order. */
export function podIPsOn(pods: readonly V1Pod[], nodeName: string): ReadonlySet<string> {
  return indexOf(pods).byNode.get(nodeName) ?? new Set()
}

/** The Pods a selector picks, in list order; an empty selector picks every Pod. */
export function podsSelectedBy(pods: readonly V1Pod[], selector: Record<string, string>): V1Pod[] {
  const entries = Object.entries(selector)
  if (entries.length === 0) return [...pods]
  const lists = entries.map(([k, v]) => indexOf(pods).byLabel.get(`${k}=${v}`) ?? [])
  const shortest = lists.reduce((a, b) => (b.length < a.length ? b : a))
  return shortest.filter((p) => selectorMatches(selector, p.metadata?.labels))
}

function selectorMatches(selector: Record<string, string>, labels: Record<string, string> | undefined): boolean {
  return Object.entries(selector).every(([k, v]) => labels?.[k] === v)
}
