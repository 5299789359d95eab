import {setMaxListeners} from 'node:events'
import {CoreV1Api, DiscoveryV1Api, Watch, type KubeConfig} from '../vendor/client-node.js'
import {abortableBy} from '../kube/abortable.js'

/** Objects of one kind to watch: a namespace's, narrowed by selectors as a list would be. */
export interface WatchTarget {
  resource: 'services' | 'endpointslices' | 'pods'
  namespace: string
  labelSelector?: string
  fieldSelector?: string
}

/** One object a watch saw change (or, after a re-list, `relisted`: anything may have). */
interface ObjectChange {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'relisted'
  /** The object's name; null for a re-list. */
  name: string | null
  /** A Pod's node (spec.nodeName), when it has one. */
  nodeName: string | null
}

/** A watched object as the store keeps it: the API's JSON (a watch event's object, or a list's item). */
export type WatchedObject = {metadata?: {name?: string; namespace?: string; resourceVersion?: string}}

/**
 * The objects of each target as its list and watch last showed them (an informer's store): what a later diagnosis
 * reads instead of listing them again. A target is in it once its list answered.
 */
export class WatchStore {
  private readonly byTarget = new Map<string, Map<string, WatchedObject>>()

  /** The target's objects now, or undefined while it has not been listed. */
  objects(t: WatchTarget): WatchedObject[] | undefined {
    const held = this.byTarget.get(targetKey(t))
    return held && [...held.values()]
  }

  replace(t: WatchTarget, items: WatchedObject[]): void {
    this.byTarget.set(targetKey(t), new Map(items.map((o) => [o.metadata?.name ?? '', o])))
  }

  /** Drops a target no longer watched (its objects would otherwise be answered as they were when it stopped). */
  forget(t: WatchTarget): void {
    this.byTarget.delete(targetKey(t))
  }

  apply(t: WatchTarget, type: string, object: WatchedObject): void {
    const held = this.byTarget.get(targetKey(t))
    if (!held) return
    const name = object.metadata?.name ?? ''
    if (type === 'DELETED') held.delete(name)
    else held.set(name, object)
  }
}

const targetKey = (t: WatchTarget) => JSON.stringify([t.resource, t.namespace, t.labelSelector, t.fieldSelector])

export interface WatchOptions {
  /** Aborted: every watch ends and `watchObjects` resolves. */
  signal: AbortSignal
  /** Each list and watch request may take this long to answer (--timeout). */
  timeoutMs: number
  /** Where each target's objects are kept as they change. */
  store?: WatchStore
  /** Something of `target` changed (or may have: a re-list after 410 Gone). */
  onChange: (target: WatchTarget, change: ObjectChange) => void
  /** A list or watch failed; it is tried again in `retryMs`. */
  onError: (target: WatchTarget, message: string, retryMs: number) => void
}

/** The reconnect backoff: doubles from the first to the last; a watch that lasted `STEADY_MS` starts again from the first. */
const BACKOFF_MS = {first: 500, max: 10_000}
const STEADY_MS = 10_000
/** The server ends each watch after this long (and it is made again from its resourceVersion). */
const WATCH_SECONDS = 300

/** What a target watches, in kubectl's words: "endpointslices -n shop -l kubernetes.io/service-name=web". */
export function describeTarget(t: WatchTarget): string {
  const sel = [t.labelSelector && `-l ${t.labelSelector}`, t.fieldSelector && `--field-selector ${t.fieldSelector}`]
  return [t.resource, `-n ${t.namespace}`, ...sel.filter(Boolean)].join(' ')
}

function pathOf(t: WatchTarget): string {
  const base = t.resource === 'endpointslices' ? '/apis/discovery.k8s.io/v1' : '/api/v1'
  return `${base}/namespaces/${encodeURIComponent(t.namespace)}/${t.resource}`
}

/** Lists `t`: its objects, and the resourceVersion a watch starts from. */
async function listTarget(
  kc: KubeConfig,
  t: WatchTarget,
  signal: AbortSignal,
): Promise<{version: string; items: WatchedObject[]}> {
  const options = abortableBy(signal)
  const q = {namespace: t.namespace, labelSelector: t.labelSelector, fieldSelector: t.fieldSelector}
  const list =
    t.resource === 'services'
      ? await kc.makeApiClient(CoreV1Api).listNamespacedService(q, options)
      : t.resource === 'pods'
        ? await kc.makeApiClient(CoreV1Api).listNamespacedPod(q, options)
        : await kc.makeApiClient(DiscoveryV1Api).listNamespacedEndpointSlice(q, options)
  return {version: list.metadata?.resourceVersion ?? '', items: list.items as WatchedObject[]}
}

type WatchEnd = {gone: true} | {gone: false; error?: string}

/** One watch from `from` until the server ends it, it fails, or `signal` aborts; `onEvent` gets each object's version. */
async function watchOnce(
  kc: KubeConfig,
  t: WatchTarget,
  from: string,
  signal: AbortSignal,
  onEvent: (type: string, object: WatchedObject) => void,
): Promise<WatchEnd> {
  return new Promise<WatchEnd>((resolve) => {
    let gone = false
    let controller: AbortController | undefined
    // An abort before the server's headers came cannot reach the request (the Watch makes its controller only then):
    // the watch ends here, and the request is aborted as soon as there is a controller.
    const abort = () => {
      controller?.abort()
      finish({gone: false})
    }
    signal.addEventListener('abort', abort, {once: true})
    function finish(end: WatchEnd) {
      signal.removeEventListener('abort', abort)
      resolve(end)
    }
    const query = {
      resourceVersion: from,
      allowWatchBookmarks: true,
      timeoutSeconds: WATCH_SECONDS,
      labelSelector: t.labelSelector,
      fieldSelector: t.fieldSelector,
    }
    new Watch(kc)
      .watch(
        pathOf(t),
        query,
        (type: string, object: WatchedObject & {code?: number}) => {
          if (type === 'ERROR') {
            gone = object.code === 410
            if (gone) controller?.abort()
            return
          }
          onEvent(type, object)
        },
        (err: unknown) => {
          const status = (err as {statusCode?: number} | null)?.statusCode
          if (gone || status === 410) return finish({gone: true})
          if (signal.aborted || !err) return finish({gone: false})
          finish({gone: false, error: (err as Error).message ?? String(err)})
        },
      )
      .then(
        (c: AbortController) => {
          controller = c
          if (signal.aborted) c.abort()
        },
        (e: unknown) => finish({gone: false, error: (e as Error).message}),
      )
  })
}

/**
 * Keeps a watch on each target until `signal` aborts: list for a resourceVersion, watch from it (bookmarks move it
 * on), again from the last version when the server ends the watch, a new list when the version is gone (410: the
 * changes in between may be lost, so that counts as a change), and a bounded backoff between failures.
 */
export async function watchObjects(kc: KubeConfig, targets: WatchTarget[], opts: WatchOptions): Promise<void> {
  // Each watch listens for the one abort (and its list request and backoff for it too).
  setMaxListeners(Math.max(10, targets.length * 3 + 10), opts.signal)
  await Promise.all(targets.map((t) => keepWatching(kc, t, opts)))
}

async function keepWatching(kc: KubeConfig, t: WatchTarget, opts: WatchOptions): Promise<void> {
  const {signal} = opts
  let version: string | undefined
  let delay = BACKOFF_MS.first
  let relisted = false
  while (!signal.aborted) {
    const started = Date.now()
    let error: string | undefined
    try {
      if (version === undefined) {
        const listed = await listTarget(kc, t, AbortSignal.any([signal, AbortSignal.timeout(opts.timeoutMs)]))
        version = listed.version
        opts.store?.replace(t, listed.items)
        if (relisted) opts.onChange(t, {type: 'relisted', name: null, nodeName: null})
        relisted = false
      }
      const end = await watchOnce(kc, t, version, signal, (type, object) => {
        const rv = object.metadata?.resourceVersion
        if (rv) version = rv
        if (type === 'BOOKMARK') return
        opts.store?.apply(t, type, object)
        const nodeName = (object as {spec?: {nodeName?: string}}).spec?.nodeName
        opts.onChange(t, {
          type: type as ObjectChange['type'],
          name: object.metadata?.name ?? null,
          nodeName: t.resource === 'pods' && nodeName ? nodeName : null,
        })
      })
      if (end.gone) {
        version = undefined
        relisted = true
        continue
      }
      error = end.error
    } catch (e) {
      error = (e as Error).message
    }
    if (signal.aborted) break
    if (Date.now() - started >= STEADY_MS) delay = BACKOFF_MS.first
    if (error !== undefined) opts.onError(t, error, delay)
    await sleep(delay, signal)
    delay = Math.min(delay * 2, BACKOFF_MS.max)
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms)
    function done() {
      clearTimeout(timer)
      signal.removeEventListener('abort', done)
      resolve()
    }
    signal.addEventListener('abort', done, {once: true})
  })
}
