import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  DiscoveryV1Api,
  KubeConfig,
  NetworkingV1Api,
} from '../vendor/client-node.js'
import type {
  ConfigurationOptions,
  ObservableMiddleware,
  V1ConfigMap,
  V1EndpointSlice,
  V1Endpoints,
  V1Namespace,
  V1NetworkPolicy,
  V1Node,
  V1Pod,
  V1Service,
} from '@kubernetes/client-node'
import {DiagnosisError} from '../errors.js'
import {abortableBy} from '../kube/abortable.js'
import {
  boundExecCredentials,
  CredentialPluginError,
  endCredentialPlugins,
  pendingCredentialPlugin,
} from '../kube/exec-credential.js'
import {existsSync} from 'node:fs'
import {homedir} from 'node:os'
import {delimiter, join} from 'node:path'
import type {ClusterSource, CustomObjects, CustomResource} from './cluster-source.js'

export interface KubeOptions {
  kubeconfig?: string
  context?: string
  timeoutMs: number
}

export interface LoadedKubeConfig {
  kc: KubeConfig
  /** The namespace of the chosen context, or "default" (in a Pod: its service account's namespace). */
  namespace: string
  /** Read from the Pod's service account (no kubeconfig file): it has no context names. */
  inCluster: boolean
}

/** Where a Pod's service account credentials are mounted (a test gives another root). */
const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount'

/** What the lookup is given besides the flags: the environment and filesystem root (tests give their own). */
export interface KubeConfigLookup {
  env?: NodeJS.ProcessEnv
  /** Prefixed to the service account folder: a test's fake token folder. */
  serviceAccountRoot?: string
  home?: string
}

/**
 * Loads the kubeconfig the way kubectl does: --kubeconfig, else the files $KUBECONFIG lists (those that exist, merged),
 * else ~/.kube/config, else the in-cluster configuration of a Pod (KUBERNETES_SERVICE_HOST/PORT and the service
 * account's token); none of them: one line saying what was tried and how to point at a kubeconfig. With `timeoutMs`,
 * an exec credential plugin runs under that deadline (kube/exec-credential.ts).
 */
export function loadKubeConfig(
  opts: Pick<KubeOptions, 'kubeconfig' | 'context'> & {timeoutMs?: number},
  lookup: KubeConfigLookup = {},
): LoadedKubeConfig {
  const env = lookup.env ?? process.env
  const kc = new KubeConfig()
  const tried: string[] = []
  let inCluster = false
  const load = (file: string) => {
    try {
      kc.loadFromFile(file)
    } catch (e) {
      throw new DiagnosisError(`cannot load kubeconfig ${file}: ${(e as Error).message}`, {cause: e})
    }
  }
  if (opts.kubeconfig) {
    if (!existsSync(opts.kubeconfig))
      throw new DiagnosisError(`kubeconfig ${opts.kubeconfig} does not exist (--kubeconfig)`)
    load(opts.kubeconfig)
  } else {
    const listed = (env.KUBECONFIG ?? '').split(delimiter).filter(Boolean)
    const home = join(lookup.home ?? homedir(), '.kube', 'config')
    const files = (listed.length > 0 ? listed : [home]).filter((f) => existsSync(f))
    tried.push(listed.length > 0 ? `$KUBECONFIG (${listed.join(delimiter)}: none exists)` : `${home} (does not exist)`)
    if (files.length > 0) {
      load(files[0])
      for (const file of files.slice(1)) {
        const other = new KubeConfig()
        try {
          other.loadFromFile(file)
        } catch (e) {
          throw new DiagnosisError(`cannot load kubeconfig ${file}: ${(e as Error).message}`, {cause: e})
        }
        mergeFirstWins(kc, other)
      }
    } else {
      const root = lookup.serviceAccountRoot ?? ''
      const host = env.KUBERNETES_SERVICE_HOST
      const port = env.KUBERNETES_SERVICE_PORT
      const token = `${root}${SERVICE_ACCOUNT_DIR}/token`
      if (!host || !port) tried.push('in-cluster (KUBERNETES_SERVICE_HOST/PORT are not set: not in a Pod)')
      else if (!existsSync(token)) tried.push(`in-cluster (no service account token at ${token})`)
      else {
        withEnv(env, () => kc.loadFromCluster(root))
        inCluster = true
      }
      if (!inCluster)
        throw new DiagnosisError(
          `no kubeconfig found: tried ${tried.join(', ')}; pass --kubeconfig FILE or set KUBECONFIG to point at one`,
        )
    }
  }
  if (opts.context) {
    if (inCluster)
      throw new DiagnosisError(
        `context "${opts.context}": the in-cluster configuration (this Pod's service account) has no contexts; --kubeconfig names a kubeconfig that has`,
      )
    if (!kc.getContextObject(opts.context)) {
      const known = kc.getContexts().map((c) => c.name)
      throw new DiagnosisError(
        `context "${opts.context}" not found in kubeconfig (known: ${known.join(', ') || 'none'})`,
      )
    }
    kc.setCurrentContext(opts.context)
  }
  if (!kc.getCurrentCluster())
    throw new DiagnosisError(
      kc.getContexts().length === 0
        ? 'the kubeconfig has no contexts: set --kubeconfig or $KUBECONFIG to one that has'
        : `no current context in the kubeconfig: pass --context (known: ${kc
            .getContexts()
            .map((c) => c.name)
            .join(', ')})`,
    )
  if (opts.timeoutMs !== undefined) boundExecCredentials(kc, opts.timeoutMs)
  const ctx = kc.getContextObject(kc.getCurrentContext())
  return {kc, namespace: ctx?.namespace || 'default', inCluster}
}

/** Adds `other`'s clusters, users and contexts to `kc`, a name already there winning (kubectl's merge of $KUBECONFIG). */
function mergeFirstWins(kc: KubeConfig, other: KubeConfig): void {
  const add = <T extends {name: string}>(mine: T[], theirs: T[]) => [
    ...mine,
    ...theirs.filter((t) => !mine.some((m) => m.name === t.name)),
  ]
  kc.loadFromOptions({
    clusters: add(kc.getClusters(), other.getClusters()),
    users: add(kc.getUsers(), other.getUsers()),
    contexts: add(kc.getContexts(), other.getContexts()),
    currentContext: kc.getCurrentContext() || other.getCurrentContext(),
  })
}

/** Runs `f` with `env`'s service variables in process.env (the client library reads them there). */
function withEnv(env: NodeJS.ProcessEnv, f: () => void): void {
  if (env === process.env) return f()
  const saved = {host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT}
  process.env.KUBERNETES_SERVICE_HOST = env.KUBERNETES_SERVICE_HOST
  process.env.KUBERNETES_SERVICE_PORT = env.KUBERNETES_SERVICE_PORT
  try {
    f()
  } finally {
    for (const [key, value] of [
      ['KUBERNETES_SERVICE_HOST', saved.host],
      ['KUBERNETES_SERVICE_PORT', saved.port],
    ] as const)
      if (value === undefined) delete process.env[key]
      else process.env[key] = value
  }
}

export class LiveClusterSource implements ClusterSource {
  private core: CoreV1Api
  private discovery: DiscoveryV1Api
  private networking: NetworkingV1Api
  private custom: CustomObjectsApi
  private server: string

  constructor(
    private readonly kc: KubeConfig,
    private readonly timeoutMs: number,
    /** --verbose: one line per API request with its outcome and duration. */
    private readonly log?: (line: string) => void,
  ) {
    this.core = kc.makeApiClient(CoreV1Api)
    this.discovery = kc.makeApiClient(DiscoveryV1Api)
    this.networking = kc.makeApiClient(NetworkingV1Api)
    this.custom = kc.makeApiClient(CustomObjectsApi)
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

  async listNetworkPolicies(namespace: string): Promise<V1NetworkPolicy[] | undefined> {
    const list = await this.call(
      'list',
      'networkpolicies.networking.k8s.io',
      namespace,
      (o) => this.networking.listNamespacedNetworkPolicy({namespace}, o),
      true,
    )
    return list?.items
  }

  async listNamespaces(): Promise<V1Namespace[] | undefined> {
    return (await this.call('list', 'namespaces', undefined, (o) => this.core.listNamespace({}, o))).items
  }

  /** Each version in turn until one is served; a 403 by the resource's rule (CustomResource.refused). */
  async listCustomObjects(resource: CustomResource): Promise<CustomObjects> {
    let refused: unknown
    for (const {group, version} of resource.versions) {
      try {
        const list = (await this.call(
          'list',
          `${resource.plural}.${group}`,
          undefined,
          (o) => this.custom.listClusterCustomObject({group, version, plural: resource.plural}, o),
          true,
        )) as {items?: unknown} | undefined
        if (list === undefined) continue
        if (!Array.isArray(list.items))
          throw new DiagnosisError(`list ${resource.plural}.${group}: the answer holds no list of items`)
        return list.items as unknown[]
      } catch (e) {
        if (!(e instanceof DiagnosisError && (e.cause as {code?: number} | undefined)?.code === 403)) throw e
        if (resource.refused === 'unless not discovered' && !(await this.discovers(group, version))) continue
        refused ??= e
      }
    }
    if (refused) throw refused
    return 'not-served'
  }

  /** Whether discovery serves the group version; a failure of discovery (other than its 404) proves nothing: yes. */
  private async discovers(group: string, version: string): Promise<boolean> {
    const resources = await this.call(
      'get',
      `discovery ${group}/${version}`,
      undefined,
      (o) => this.custom.getAPIResources({group, version}, o),
      true,
    ).catch(() => ({}))
    return resources !== undefined
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
    // The whole call is raced against the deadline, the credential step (an exec plugin) included: the abort signal
    // reaches only the HTTP request, which a hung plugin never lets start.
    const expired = new Promise<never>((_, reject) =>
      deadline.signal.addEventListener('abort', () => reject(new Error('deadline')), {once: true}),
    )
    try {
      const result = await Promise.race([fn(options), expired])
      this.log?.(`${request} → ok in ${took()}`)
      return result
    } catch (e) {
      if (e instanceof CredentialPluginError) {
        this.log?.(`${request} → no credentials in ${took()}`)
        throw new DiagnosisError(e.message, {cause: e})
      }
      const plugin = deadline.signal.aborted ? pendingCredentialPlugin(this.kc) : undefined
      if (plugin !== undefined) {
        endCredentialPlugins(this.kc)
        this.log?.(`${request} → no credentials in ${took()}`)
        throw new DiagnosisError(
          `the kubeconfig's exec credential plugin \`${plugin}\` did not answer within ${this.timeoutMs / 1000}s`,
          {cause: e},
        )
      }
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
