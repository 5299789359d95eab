import {ApiException, CoreV1Api, DiscoveryV1Api, KubeConfig} from '../vendor/client-node.js'
import type {
  ConfigurationOptions,
  ObservableMiddleware,
  V1ConfigMap,
  V1EndpointSlice,
  V1Endpoints,
  V1Node,
  V1Pod,
  V1Service,
} from '@kubernetes/client-node'
import {DiagnosisError} from '../errors.js'
import {abortableBy} from '../kube/abortable.js'
import type {ClusterSource} from './cluster-source.js'

export interface KubeOptions {
  kubeconfig?: string
  context?: string
  timeoutMs: number
}

export interface LoadedKubeConfig {
  kc: KubeConfig
  /** The namespace of the chosen context, or "default". */
  namespace: string
}

/** Loads the kubeconfig the way kubectl does: --kubeconfig, else $KUBECONFIG, ~/.kube/config, in-cluster. */
export function loadKubeConfig(opts: Pick<KubeOptions, 'kubeconfig' | 'context'>): LoadedKubeConfig {
  const kc = new KubeConfig()
  try {
    if (opts.kubeconfig) kc.loadFromFile(opts.kubeconfig)
    else kc.loadFromDefault()
  } catch (e) {
    throw new DiagnosisError(
      `cannot load kubeconfig ${opts.kubeconfig ?? ''}: ${(e as Error).message}`.replace('  ', ' '),
      {cause: e},
    )
  }
  if (opts.context) {
    if (!kc.getContextObject(opts.context)) {
      const known = kc.getContexts().map((c) => c.name)
      throw new DiagnosisError(
        `context "${opts.context}" not found in kubeconfig (known: ${known.join(', ') || 'none'})`,
      )
    }
    kc.setCurrentContext(opts.context)
  }
  if (!kc.getCurrentCluster())
    throw new DiagnosisError('no cluster in kubeconfig: set --kubeconfig, $KUBECONFIG or --context')
  const ctx = kc.getContextObject(kc.getCurrentContext())
  return {kc, namespace: ctx?.namespace || 'default'}
}

export class LiveClusterSource implements ClusterSource {
  private core: CoreV1Api
  private discovery: DiscoveryV1Api
  private server: string

  constructor(
    kc: KubeConfig,
    private readonly timeoutMs: number,
    /** --verbose: one line per API request with its outcome and duration. */
    private readonly log?: (line: string) => void,
  ) {
    this.core = kc.makeApiClient(CoreV1Api)
    this.discovery = kc.makeApiClient(DiscoveryV1Api)
    this.server = redactUrl(kc.getCurrentCluster()?.server ?? '?')
  }

  describe(): string {
    return `API server ${this.server}`
  }

  getService(namespace: string, name: string): Promise<V1Service | undefined> {
    return this.call('get', 'services', namespace, (o) => this.core.readNamespacedService({name, namespace}, o), true)
  }

  async listServices(namespace: string | undefined): Promise<V1Service[]> {
    if (namespace === undefined)
      return (await this.call('list', 'services', undefined, (o) => this.core.listServiceForAllNamespaces({}, o))).items
    return (await this.call('list', 'services', namespace, (o) => this.core.listNamespacedService({namespace}, o)))
      .items
  }

  async listNamespaceEndpointSlices(namespace: string): Promise<V1EndpointSlice[] | undefined> {
    const list = await this.call(
      'list',
      'endpointslices.discovery.k8s.io',
      namespace,
      (o) => this.discovery.listNamespacedEndpointSlice({namespace}, o),
      true,
    )
    return list?.items
  }

  async listEndpointSlices(namespace: string, serviceName: string): Promise<V1EndpointSlice[] | undefined> {
    const list = await this.call(
      'list',
      'endpointslices.discovery.k8s.io',
      namespace,
      (o) =>
        this.discovery.listNamespacedEndpointSlice(
          {namespace, labelSelector: `kubernetes.io/service-name=${serviceName}`},
          o,
        ),
      true,
    )
    return list?.items
  }

  getEndpoints(namespace: string, name: string): Promise<V1Endpoints | undefined> {
    return this.call(
      'get',
      'endpoints',
      namespace,
      (o) => this.core.readNamespacedEndpoints({name, namespace}, o),
      true,
    )
  }

  async listPods(namespace: string): Promise<V1Pod[]> {
    return (await this.call('list', 'pods', namespace, (o) => this.core.listNamespacedPod({namespace}, o))).items
  }

  async listNodes(): Promise<V1Node[]> {
    return (await this.call('list', 'nodes', undefined, (o) => this.core.listNode({}, o))).items
  }

  getConfigMap(namespace: string, name: string): Promise<V1ConfigMap | undefined> {
    return this.call(
      'get',
      'configmaps',
      namespace,
      (o) => this.core.readNamespacedConfigMap({name, namespace}, o),
      true,
    )
  }

  private async call<T>(
    verb: string,
    resource: string,
    namespace: string | undefined,
    fn: (options: ConfigurationOptions<ObservableMiddleware>) => Promise<T>,
    notFoundOk: true,
  ): Promise<T | undefined>
  private async call<T>(
    verb: string,
    resource: string,
    namespace: string | undefined,
    fn: (options: ConfigurationOptions<ObservableMiddleware>) => Promise<T>,
  ): Promise<T>
  private async call<T>(
    verb: string,
    resource: string,
    namespace: string | undefined,
    fn: (options: ConfigurationOptions<ObservableMiddleware>) => Promise<T>,
    notFoundOk = false,
  ): Promise<T | undefined> {
    // The deadline aborts the request itself, so its socket is destroyed and cannot keep the process alive.
    const deadline = new AbortController()
    const timer = setTimeout(() => deadline.abort(), this.timeoutMs)
    const options = abortableBy(deadline.signal)
    const startedAt = performance.now()
    const request = `API ${verb} ${resource}${namespace ? ` -n ${namespace}` : ''}`
    const took = () => `${((performance.now() - startedAt) / 1000).toFixed(2)}s`
    try {
      const result = await fn(options)
      this.log?.(`${request} → ok in ${took()}`)
      return result
    } catch (e) {
      this.log?.(
        `${request} → ${e instanceof ApiException ? `HTTP ${e.code}` : deadline.signal.aborted ? 'no answer' : 'failed'} in ${took()}`,
      )
      if (deadline.signal.aborted)
        throw new DiagnosisError(
          `the API server ${this.server} did not answer ${verb} ${resource} within ${this.timeoutMs / 1000}s`,
          {cause: e},
        )
      const where = namespace ? ` in namespace "${namespace}"` : ''
      if (e instanceof ApiException) {
        if (e.code === 404 && notFoundOk) return undefined
        const message = statusMessage(e.body)
        if (e.code === 401)
          throw new DiagnosisError(
            `the API server ${this.server} refused our credentials (401 Unauthorized) on ${verb} ${resource}: check the kubeconfig user`,
            {cause: e},
          )
        if (e.code === 403)
          throw new DiagnosisError(`RBAC forbids ${verb} ${resource}${where} (403): ${message}`, {cause: e})
        throw new DiagnosisError(`${verb} ${resource}${where} failed with HTTP ${e.code}: ${message}`, {cause: e})
      }
      const err = e as {code?: string; message?: string}
      throw new DiagnosisError(`cannot reach the Kubernetes API at ${this.server}: ${err.code ?? err.message}`, {
        cause: e,
      })
    } finally {
      clearTimeout(timer)
    }
  }
}

function statusMessage(body: unknown): string {
  if (body === undefined || body === null) return 'no message'
  const text = typeof body === 'string' ? body : JSON.stringify(body)
  try {
    const parsed = JSON.parse(text) as {message?: string}
    if (parsed.message) return parsed.message
  } catch {
    /* not JSON */
  }
  return text.slice(0, 200)
}

/** A URL with any user name and password replaced, fit for messages. */
function redactUrl(url: string): string {
  try {
    const parsed = new URL(url)
    if (!parsed.username && !parsed.password) return url
    parsed.username = 'REDACTED'
    parsed.password = ''
    return parsed.toString().replace(/\/$/, url.endsWith('/') ? '/' : '')
  } catch {
    return url.replace(/\/\/[^/@]*@/, '//REDACTED@')
  }
}
