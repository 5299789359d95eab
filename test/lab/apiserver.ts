import {createServer, type Server} from 'node:https'
import type {IncomingMessage, ServerResponse} from 'node:http'
import {randomUUID} from 'node:crypto'
import {mkdtempSync, readFileSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import type {Duplex} from 'node:stream'
import {WebSocketServer} from 'ws'
import {
  EXEC_PROTOCOLS,
  PORT_FORWARD_PROTOCOLS,
  runExecSession,
  runHungSession,
  runPortForwardSession,
  runRecordedSession,
  type PodSandbox,
  type RecordedExec,
  type StreamTracker,
} from './apiserver-streams.js'
import {madeOncePerRun} from './run-once.js'
import {run} from './sh.js'

/**
 * A Kubernetes API server for tests: real HTTPS on loopback, bearer-token auth, discovery documents, get and list
 * with label and field selectors, watch (resourceVersion, 410 Gone once compacted), and 401/403/404 answered with Status objects the way kube-apiserver answers them.
 * Pods can be created and deleted, and pods/exec and pods/portforward speak the WebSocket channel protocols
 * (see apiserver-streams.ts) inside the network namespace `podSandbox` names for the pod.
 */
interface ResourceDef {
  group: string
  version: string
  kind: string
  namespaced: boolean
  shortNames?: string[]
}

const RESOURCES: Record<string, ResourceDef> = {
  services: {group: '', version: 'v1', kind: 'Service', namespaced: true, shortNames: ['svc']},
  pods: {group: '', version: 'v1', kind: 'Pod', namespaced: true, shortNames: ['po']},
  endpoints: {group: '', version: 'v1', kind: 'Endpoints', namespaced: true},
  configmaps: {group: '', version: 'v1', kind: 'ConfigMap', namespaced: true, shortNames: ['cm']},
  namespaces: {group: '', version: 'v1', kind: 'Namespace', namespaced: false},
  nodes: {group: '', version: 'v1', kind: 'Node', namespaced: false},
  endpointslices: {group: 'discovery.k8s.io', version: 'v1', kind: 'EndpointSlice', namespaced: true},
  daemonsets: {group: 'apps', version: 'v1', kind: 'DaemonSet', namespaced: true, shortNames: ['ds']},
  networkpolicies: {
    group: 'networking.k8s.io',
    version: 'v1',
    kind: 'NetworkPolicy',
    namespaced: true,
    shortNames: ['netpol'],
  },
  // Served only under the group and version `calicoCrds` names (a cluster without Calico: 404).
  felixconfigurations: {group: 'crd.projectcalico.org', version: 'v1', kind: 'FelixConfiguration', namespaced: false},
  // network-policy-api's CRDs: served only with `withAdminNetworkPolicies` (most clusters do not install them).
  adminnetworkpolicies: {
    group: 'policy.networking.k8s.io',
    version: 'v1alpha1',
    kind: 'AdminNetworkPolicy',
    namespaced: false,
    shortNames: ['anp'],
  },
  baselineadminnetworkpolicies: {
    group: 'policy.networking.k8s.io',
    version: 'v1alpha1',
    kind: 'BaselineAdminNetworkPolicy',
    namespaced: false,
    shortNames: ['banp'],
  },
}
const ADMIN_POLICY_GROUP = 'policy.networking.k8s.io'

type Obj = {
  metadata?: {
    name?: string
    generateName?: string
    namespace?: string
    labels?: Record<string, string>
    [k: string]: unknown
  }
  [k: string]: unknown
}

/** One request as the API server's audit log would see it. */
export interface ApiRequest {
  method: string
  /** The Kubernetes verb: get, list, create, delete. */
  verb: string
  path: string
  namespace?: string
  resource?: string
  name?: string
  subresource?: string
  /** Query parameters as sent (command=, container=, ports=, ...), repeated keys in order. */
  query: [string, string][]
}

export interface ApiServerOptions {
  token: string
  /** "verb resource namespace" triples answered 403 ("*" for any namespace). */
  forbidden?: Set<string>
  /**
   * Where Calico's FelixConfigurations are served: "crd.projectcalico.org/v1" (Calico's CRDs) or "projectcalico.org/v3"
   * (its native v3 CRDs); undefined: no Calico CRDs, a 404 as for any group the cluster does not serve.
   */
  calicoCrds?: string
  /** Serve no discovery.k8s.io group (a cluster before EndpointSlices). */
  withoutEndpointSlices?: boolean
  /** Serve policy.networking.k8s.io/v1alpha1 (AdminNetworkPolicy CRDs installed); without it the group is 404. */
  withAdminNetworkPolicies?: boolean
  /**
   * Where a pod's exec and port-forward run: a network namespace the test created. A pod without one is answered
   * as a pod whose container is not running (exec never touches the host's own namespace).
   */
  podSandbox?: (pod: Obj) => PodSandbox | undefined
  /** "namespace/name" of pods whose exec is accepted and then never answered. */
  hungExec?: Set<string>
  /** Pods whose exec is accepted and then never answered, by what the pod is (a debug pod on a node, …). */
  hungExecOf?: (pod: Obj) => boolean
  /**
   * Nodes on which creating a pod is refused with a 403 (as an RBAC denial words it): a policy that differs per node,
   * for tests of one node refused while the others are read.
   */
  forbidPodsOn?: Set<string>
  /** How long a created pod stays Pending before it runs (default 100 ms); `Infinity` keeps it Pending. */
  podStartMs?: number
  /**
   * Recorded answers to a running pod's exec (an agent whose program is not in this lab: Cilium's): the program's
   * output, or 'missing' for a program its image lacks; undefined leaves the exec to the pod's sandbox.
   */
  execAnswer?: (pod: Obj, argv: string[]) => RecordedExec | 'missing' | undefined
}

export class LabApiServer {
  private server?: Server
  readonly objects = new Map<string, Obj[]>()
  port = 0
  readonly dir = mkdtempSync(join(tmpdir(), 'kpd-api-'))
  caPem = ''
  requests: string[] = []
  /** Every request, parsed (tests read which verbs and subresources were called). */
  readonly requestLog: ApiRequest[] = []
  /** Pods created through the API and not deleted (kept apart from the published fixtures, which `set` replaces). */
  readonly createdPods: Obj[] = []
  /** Every pod the API accepted to create, as sent (deleted or not). */
  readonly podsEverCreated: Obj[] = []
  readonly streams: StreamTracker = {children: new Set(), sockets: new Set(), resizes: []}
  private readonly wss = new WebSocketServer({
    noServer: true,
    handleProtocols: (offered, req) => this.pickProtocol(offered, req),
  })
  private readonly timers = new Set<NodeJS.Timeout>()
  /** The last resourceVersion given out: every change `set` makes takes the next one. */
  private resourceVersion = 1
  /** Watches below this resourceVersion are answered 410 Gone (`compact`), as etcd's compaction makes them. */
  private compactedBelow = 0
  /** Every change `set` made, in order, for a watch that resumes from a resourceVersion. */
  private readonly history: WatchEvent[] = []
  /** Each resource's objects as last published, by "namespace/name" (JSON): what `set` compares against. */
  private readonly published = new Map<string, Map<string, string>>()
  private readonly watchers = new Set<Watcher>()

  constructor(public opts: ApiServerOptions) {}

  /**
   * Publishes `items` as the whole of `resource`: each object added, changed or removed since the last `set` is a
   * watch event (ADDED, MODIFIED, DELETED) with the next resourceVersion, sent to the open watches it matches.
   */
  set(resource: keyof typeof RESOURCES, items: Obj[]): void {
    const before = this.published.get(resource) ?? new Map<string, string>()
    const after = new Map(items.map((o) => [objectKey(o), JSON.stringify(o)]))
    const events: Array<{type: WatchEvent['type']; object: Obj}> = []
    for (const o of items) {
      const was = before.get(objectKey(o))
      if (was === undefined) events.push({type: 'ADDED', object: o})
      else if (was !== after.get(objectKey(o))) events.push({type: 'MODIFIED', object: o})
    }
    for (const [k, was] of before) if (!after.has(k)) events.push({type: 'DELETED', object: JSON.parse(was) as Obj})
    this.published.set(resource, after)
    this.objects.set(resource, items)
    for (const e of events) {
      this.resourceVersion += 1
      const object = {...e.object, metadata: {...e.object.metadata, resourceVersion: String(this.resourceVersion)}}
      const event: WatchEvent = {resource, type: e.type, object, resourceVersion: this.resourceVersion}
      this.history.push(event)
      for (const w of this.watchers) if (w.resource === resource && w.matches(object)) w.send(event)
    }
  }

  /** Forgets the changes made so far: a watch resuming from before now is answered 410 Gone. */
  compact(): void {
    this.compactedBelow = this.resourceVersion + 1
  }

  /** Ends every open watch from the server's side (as an API server restarting or a timeout does). */
  endWatches(): void {
    for (const w of this.watchers) w.end()
  }

  /** How many watches are open (tests wait for the client to be watching). */
  get openWatches(): number {
    return this.watchers.size
  }

  async start(): Promise<void> {
    const key = join(this.dir, 'key.pem')
    const cert = join(this.dir, 'cert.pem')
    madeOncePerRun('apiserver-tls', this.dir, (to) =>
      run('openssl', [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        join(to, 'key.pem'),
        '-out',
        join(to, 'cert.pem'),
        '-days',
        '2',
        '-subj',
        '/CN=kpd-test-apiserver',
        '-addext',
        'subjectAltName=IP:127.0.0.1,DNS:localhost',
      ]),
    )
    this.caPem = readFileSync(cert, 'utf8')
    this.server = createServer({key: readFileSync(key), cert: readFileSync(cert)}, (req, res) => this.handle(req, res))
    this.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) =>
      this.handleUpgrade(req, socket, head),
    )
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve))
    this.port = (this.server!.address() as {port: number}).port
  }

  stop(): Promise<void> {
    for (const t of this.timers) clearTimeout(t)
    for (const ws of this.streams.sockets) ws.terminate()
    for (const child of this.streams.children) child.kill('SIGKILL')
    this.server?.closeAllConnections()
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()))
  }

  get url(): string {
    return `https://127.0.0.1:${this.port}`
  }

  /** Writes a kubeconfig for this server; returns its path. */
  writeKubeconfig(namespace = 'default', token = this.opts.token): string {
    const path = join(this.dir, `kubeconfig-${namespace}-${token.slice(0, 6)}`)
    const ca = Buffer.from(this.caPem).toString('base64')
    writeFileSync(
      path,
      `apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster:
    server: ${this.url}
    certificate-authority-data: ${ca}
users:
- name: lab-user
  user:
    token: ${token}
contexts:
- name: lab
  context:
    cluster: lab
    user: lab-user
    namespace: ${namespace}
current-context: lab
`,
    )
    return path
  }

  private send(res: ServerResponse, code: number, body: unknown): void {
    const text = JSON.stringify(body)
    res.writeHead(code, {'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text)})
    res.end(text)
  }

  private status(
    res: ServerResponse,
    code: number,
    reason: string,
    message: string,
    details?: Record<string, string>,
  ): void {
    this.send(res, code, this.statusBody(code, reason, message, details))
  }

  /** Parses a request into the audit log's terms and records it. */
  private record(req: IncomingMessage): ApiRequest {
    const url = new URL(req.url ?? '/', this.url)
    this.requests.push(`${req.method} ${url.pathname}${url.search}`)
    const path = url.pathname.replace(/\/$/, '')
    const m = /^\/(?:api\/v1|apis\/[^/]+\/[^/]+)(?:\/namespaces\/([^/]+))?\/([^/]+)(?:\/([^/]+))?(?:\/([^/]+))?$/.exec(
      path,
    )
    const [, namespace, resource, name, subresource] = m ?? []
    const method = req.method ?? 'GET'
    const verb =
      method === 'POST'
        ? 'create'
        : method === 'DELETE'
          ? 'delete'
          : method === 'PUT'
            ? 'update'
            : method === 'PATCH'
              ? 'patch'
              : name
                ? 'get'
                : 'list'
    const entry: ApiRequest = {
      method,
      verb,
      path,
      namespace,
      resource,
      name,
      subresource,
      query: [...url.searchParams.entries()],
    }
    this.requestLog.push(entry)
    return entry
  }

  /** The 403 kube-apiserver gives when RBAC denies `verb` on `resource` (e.g. "pods/exec"), or undefined. */
  private denial(
    verb: string,
    resource: string,
    group: string,
    namespace: string | undefined,
    name: string | undefined,
    always = false,
  ) {
    const f = this.opts.forbidden
    if (!always && (!f || !(f.has(`${verb} ${resource} ${namespace ?? ''}`) || f.has(`${verb} ${resource} *`))))
      return undefined
    const [base] = resource.split('/')
    const gr = group ? `${base}.${group}` : base
    const where = namespace ? ` in the namespace "${namespace}"` : ' at the cluster scope'
    return this.statusBody(
      403,
      'Forbidden',
      `${gr}${name ? ` "${name}"` : ''} is forbidden: User "kpd-lab" cannot ${verb} resource "${resource}" in API group "${group}"${where}`,
      {
        kind: base,
        ...(name ? {name} : {}),
      },
    )
  }

  private statusBody(code: number, reason: string, message: string, details?: Record<string, string>) {
    return {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message,
      reason,
      ...(details ? {details} : {}),
      code,
    }
  }

  private pods(): Obj[] {
    return [...(this.objects.get('pods') ?? []), ...this.createdPods]
  }

  private findPod(namespace: string | undefined, name: string | undefined): Obj | undefined {
    return this.pods().find((o) => o.metadata?.namespace === namespace && o.metadata?.name === name)
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const r = this.record(req)
    const url = new URL(req.url ?? '/', this.url)
    if (req.headers.authorization !== `Bearer ${this.opts.token}`)
      return this.status(res, 401, 'Unauthorized', 'Unauthorized')
    const p = r.path
    if (req.method === 'GET') {
      if (p === '/version')
        return this.send(res, 200, {major: '1', minor: '33', gitVersion: 'v1.33.0-kpd-lab', platform: 'linux/amd64'})
      if (p === '/api')
        return this.send(res, 200, {
          kind: 'APIVersions',
          versions: ['v1'],
          serverAddressByClientCIDRs: [{clientCIDR: '0.0.0.0/0', serverAddress: `127.0.0.1:${this.port}`}],
        })
      if (p === '/apis') {
        const apps = {
          name: 'apps',
          versions: [{groupVersion: 'apps/v1', version: 'v1'}],
          preferredVersion: {groupVersion: 'apps/v1', version: 'v1'},
        }
        const networking = {
          name: 'networking.k8s.io',
          versions: [{groupVersion: 'networking.k8s.io/v1', version: 'v1'}],
          preferredVersion: {groupVersion: 'networking.k8s.io/v1', version: 'v1'},
        }
        const groups = this.opts.withoutEndpointSlices
          ? [apps, networking]
          : [
              apps,
              networking,
              {
                name: 'discovery.k8s.io',
                versions: [{groupVersion: 'discovery.k8s.io/v1', version: 'v1'}],
                preferredVersion: {groupVersion: 'discovery.k8s.io/v1', version: 'v1'},
              },
            ]
        if (this.opts.withAdminNetworkPolicies)
          groups.push({
            name: ADMIN_POLICY_GROUP,
            versions: [{groupVersion: `${ADMIN_POLICY_GROUP}/v1alpha1`, version: 'v1alpha1'}],
            preferredVersion: {groupVersion: `${ADMIN_POLICY_GROUP}/v1alpha1`, version: 'v1alpha1'},
          })
        return this.send(res, 200, {kind: 'APIGroupList', apiVersion: 'v1', groups})
      }
      if (p === '/api/v1') return this.send(res, 200, this.resourceList('v1', ''))
      if (p === '/apis/apps/v1') return this.send(res, 200, this.resourceList('apps/v1', 'apps'))
      if (p === '/apis/networking.k8s.io/v1')
        return this.send(res, 200, this.resourceList('networking.k8s.io/v1', 'networking.k8s.io'))
      if (p === `/apis/${ADMIN_POLICY_GROUP}/v1alpha1` && this.opts.withAdminNetworkPolicies)
        return this.send(res, 200, this.resourceList(`${ADMIN_POLICY_GROUP}/v1alpha1`, ADMIN_POLICY_GROUP))
      if (p === '/apis/discovery.k8s.io/v1' && !this.opts.withoutEndpointSlices)
        return this.send(res, 200, this.resourceList('discovery.k8s.io/v1', 'discovery.k8s.io'))
    }
    const m =
      /^\/(?:api\/v1|apis\/([^/]+)\/([^/]+))(?:\/namespaces\/([^/]+))?\/([^/]+)(?:\/([^/]+))?(?:\/(exec|portforward))?$/.exec(
        p,
      )
    if (!m) return this.status(res, 404, 'NotFound', 'the server could not find the requested resource')
    const [, group = '', version, namespace, resource, name, subresource] = m
    const def = RESOURCES[resource]
    const served =
      resource === 'felixconfigurations' ? this.opts.calicoCrds === `${group}/${version}` : def?.group === group
    if (
      !def ||
      !served ||
      (group === 'discovery.k8s.io' && this.opts.withoutEndpointSlices) ||
      (group === ADMIN_POLICY_GROUP && !this.opts.withAdminNetworkPolicies)
    ) {
      // kube-apiserver authorizes before it looks for the resource: RBAC's 403 comes first, served or not.
      const denied = req.method === 'GET' && this.denial(name ? 'get' : 'list', resource, group, namespace, name)
      if (denied) return this.send(res, 403, denied)
      return this.status(res, 404, 'NotFound', 'the server could not find the requested resource')
    }
    if (subresource) return this.status(res, 400, 'BadRequest', 'Upgrade request required')
    if (req.method === 'POST' && resource === 'pods' && namespace && !name)
      return void this.createPod(req, res, namespace)
    if (req.method === 'DELETE' && resource === 'pods' && namespace && name) return this.deletePod(res, namespace, name)
    if (req.method !== 'GET')
      return this.status(res, 405, 'MethodNotAllowed', `the test API server does not ${r.verb} ${resource}`)
    const watching = ['true', '1'].includes(url.searchParams.get('watch') ?? '')
    const verb = name ? 'get' : watching ? 'watch' : 'list'
    const denied = this.denial(verb, resource, group, namespace, name)
    if (denied) return this.send(res, 403, denied)
    let items = (resource === 'pods' ? this.pods() : (this.objects.get(resource) ?? [])).filter(
      (o) => !def.namespaced || !namespace || o.metadata?.namespace === namespace,
    )
    const apiVersion = group ? `${group}/${resource === 'felixconfigurations' ? version : def.version}` : def.version
    if (name) {
      const found = items.find((o) => o.metadata?.name === name)
      if (!found)
        return this.status(res, 404, 'NotFound', `${group ? `${resource}.${group}` : resource} "${name}" not found`, {
          name,
          kind: resource,
        })
      return this.send(res, 200, {apiVersion, kind: def.kind, ...found})
    }
    const labelSelector = url.searchParams.get('labelSelector')
    const fieldSelector = url.searchParams.get('fieldSelector')
    const matches = (o: Obj) =>
      (!labelSelector || matchLabels(labelSelector, o.metadata?.labels ?? {})) &&
      (!fieldSelector || matchFields(fieldSelector, o)) &&
      (!def.namespaced || !namespace || o.metadata?.namespace === namespace)
    items = items.filter(matches)
    if (watching) return void this.watch(res, resource, matches, items, url.searchParams.get('resourceVersion'))
    this.send(res, 200, {
      apiVersion,
      kind: `${def.kind}List`,
      metadata: {resourceVersion: String(this.resourceVersion)},
      items,
    })
  }

  /**
   * A watch, as kube-apiserver streams it: one JSON event a line. From a resourceVersion, the changes after it (410 Gone
   * as an ERROR event when it was compacted); without one, the objects there now as ADDED; then each change as made.
   */
  private watch(res: ServerResponse, resource: string, matches: (o: Obj) => boolean, now: Obj[], from: string | null) {
    res.writeHead(200, {'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked'})
    // As kube-apiserver does: the headers go at once, before any event (a client's watch starts on them).
    res.flushHeaders()
    const line = (type: string, object: unknown) => res.write(JSON.stringify({type, object}) + '\n')
    const since = from === null || from === '' || from === '0' ? undefined : Number(from)
    if (since !== undefined && since < this.compactedBelow) {
      line('ERROR', this.statusBody(410, 'Expired', `too old resource version: ${since} (${this.compactedBelow - 1})`))
      res.end()
      return
    }
    if (since === undefined) for (const o of now) line('ADDED', o)
    else
      for (const e of this.history)
        if (e.resource === resource && e.resourceVersion > since && matches(e.object)) line(e.type, e.object)
    const watcher: Watcher = {
      resource,
      matches,
      send: (e) => line(e.type, e.object),
      end: () => res.end(),
    }
    this.watchers.add(watcher)
    res.on('close', () => this.watchers.delete(watcher))
  }

  private async createPod(req: IncomingMessage, res: ServerResponse, namespace: string): Promise<void> {
    const chunks: Buffer[] = []
    for await (const c of req) chunks.push(c as Buffer)
    let pod: Obj
    try {
      pod = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Obj
    } catch {
      return this.status(res, 400, 'BadRequest', 'the body of the request was in an unknown format')
    }
    const meta = pod.metadata ?? {}
    const name = meta.name ?? (meta.generateName ? meta.generateName + randomUUID().slice(0, 5) : undefined)
    if (!name)
      return this.status(
        res,
        422,
        'Invalid',
        'Pod "" is invalid: metadata.name: Required value: name or generateName is required',
      )
    const nodeName = (pod.spec as {nodeName?: string} | undefined)?.nodeName
    const denied =
      this.denial('create', 'pods', '', namespace, undefined) ??
      (nodeName && this.opts.forbidPodsOn?.has(nodeName)
        ? this.denial('create', 'pods', '', namespace, undefined, true)
        : undefined)
    if (denied) return this.send(res, 403, denied)
    const invalid =
      meta.labels?.['app.kubernetes.io/managed-by'] === 'kproxy-doctor' ? this.debugPodViolations(pod) : []
    if (invalid.length > 0)
      return this.status(
        res,
        422,
        'Invalid',
        `Pod "${name}" is invalid for a kproxy-doctor debug pod: ${invalid.join('; ')}`,
        {name, kind: 'Pod'},
      )
    if (this.findPod(namespace, name))
      return this.status(res, 409, 'AlreadyExists', `pods "${name}" already exists`, {name, kind: 'pods'})
    const created: Obj = {
      ...pod,
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        ...meta,
        name,
        namespace,
        uid: randomUUID(),
        resourceVersion: '2',
        creationTimestamp: new Date().toISOString(),
      },
      status: {phase: 'Pending', conditions: [{type: 'PodScheduled', status: 'True'}]},
    }
    this.createdPods.push(created)
    this.podsEverCreated.push(structuredClone(pod))
    const startMs = this.opts.podStartMs ?? 100
    if (Number.isFinite(startMs)) {
      const timer = setTimeout(() => {
        this.timers.delete(timer)
        const containers = (
          (created.spec as {containers?: {name: string; image?: string}[]} | undefined)?.containers ?? []
        ).map((c) => ({
          name: c.name,
          image: c.image ?? '',
          imageID: '',
          ready: true,
          restartCount: 0,
          state: {running: {startedAt: new Date().toISOString()}},
        }))
        created.status = {
          phase: 'Running',
          conditions: [
            {type: 'PodScheduled', status: 'True'},
            {type: 'Ready', status: 'True'},
          ],
          containerStatuses: containers,
        }
      }, startMs)
      this.timers.add(timer)
    }
    this.send(res, 201, created)
  }

  /**
   * What a debug pod must be (the doctor's promise, checked here on every create): pinned to a known node, in its
   * network and PID namespaces, one privileged container, tolerating every taint, the node's / mounted read-only,
   * labelled for its run.
   */
  private debugPodViolations(pod: Obj): string[] {
    type Spec = {
      nodeName?: string
      hostNetwork?: boolean
      tolerations?: Record<string, unknown>[]
      volumes?: {name: string; hostPath?: {path?: string}}[]
      containers?: {
        image?: string
        securityContext?: {privileged?: boolean; capabilities?: {add?: string[]}}
        volumeMounts?: {name: string; mountPath: string; readOnly?: boolean}[]
      }[]
    }
    const spec = (pod.spec ?? {}) as Spec
    const out: string[] = []
    const nodes = (this.objects.get('nodes') ?? []).map((n) => n.metadata?.name)
    if (!spec.nodeName || !nodes.includes(spec.nodeName))
      out.push(`spec.nodeName: ${JSON.stringify(spec.nodeName)} is not a node`)
    if (spec.hostNetwork !== true) out.push('spec.hostNetwork must be true')
    if (!(spec.tolerations ?? []).some((t) => t.operator === 'Exists' && t.key === undefined && t.effect === undefined))
      out.push('spec.tolerations must hold {operator: Exists}')
    const containers = spec.containers ?? []
    if (containers.length !== 1) out.push('one container')
    const c = containers[0]
    if (!c?.image) out.push('containers[0].image is required')
    // What the reads need to read the kernel's tables, privileged or not.
    const caps =
      c?.securityContext?.privileged === true ? ['NET_ADMIN', 'NET_RAW'] : c?.securityContext?.capabilities?.add
    for (const cap of ['NET_ADMIN', 'NET_RAW'])
      if (!caps?.includes(cap)) out.push(`containers[0].securityContext.capabilities.add must hold ${cap}`)
    const root = (spec.volumes ?? []).find((v) => v.hostPath?.path === '/')
    const mount = root && c?.volumeMounts?.find((m) => m.name === root.name)
    if (!mount) out.push("the node's / (a hostPath volume) must be mounted")
    else if (mount.readOnly !== true) out.push(`the node's / at ${mount.mountPath} must be read-only`)
    if (!pod.metadata?.labels?.['kproxy-doctor/run']) out.push('metadata.labels needs kproxy-doctor/run')
    return out
  }

  private deletePod(res: ServerResponse, namespace: string, name: string): void {
    const denied = this.denial('delete', 'pods', '', namespace, name)
    if (denied) return this.send(res, 403, denied)
    const i = this.createdPods.findIndex((o) => o.metadata?.namespace === namespace && o.metadata?.name === name)
    if (i < 0) return this.status(res, 404, 'NotFound', `pods "${name}" not found`, {name, kind: 'pods'})
    const [pod] = this.createdPods.splice(i, 1)
    for (const child of [...this.streams.children]) if (this.podOfChild.get(child) === pod) child.kill('SIGKILL')
    this.send(res, 200, {
      ...pod,
      metadata: {...pod.metadata, deletionTimestamp: new Date().toISOString(), deletionGracePeriodSeconds: 0},
    })
  }

  private readonly podOfChild = new WeakMap<object, Obj>()

  private pickProtocol(offered: Set<string>, req: IncomingMessage): string | false {
    const supported = /\/portforward(\?|$)/.test(req.url ?? '') ? PORT_FORWARD_PROTOCOLS : EXEC_PROTOCOLS
    return supported.find((p) => offered.has(p)) ?? false
  }

  /** Refuses an upgrade with a plain HTTP answer carrying a Status, as kube-apiserver does before switching protocols. */
  private refuseUpgrade(socket: Duplex, code: number, body: object): void {
    const text = JSON.stringify(body)
    const reason = {400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found'}[code] ?? 'Error'
    socket.end(
      `HTTP/1.1 ${code} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
    )
  }

  private handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => {})
    const r = this.record(req)
    if (req.headers.authorization !== `Bearer ${this.opts.token}`)
      return this.refuseUpgrade(socket, 401, this.statusBody(401, 'Unauthorized', 'Unauthorized'))
    const {namespace, resource, name, subresource} = r
    if (resource !== 'pods' || !namespace || !name || (subresource !== 'exec' && subresource !== 'portforward'))
      return this.refuseUpgrade(
        socket,
        404,
        this.statusBody(404, 'NotFound', 'the server could not find the requested resource'),
      )
    if (!/websocket/i.test(String(req.headers.upgrade ?? '')))
      return this.refuseUpgrade(
        socket,
        400,
        this.statusBody(400, 'BadRequest', `the test API server speaks only WebSocket, not ${req.headers.upgrade}`),
      )
    const offered = String(req.headers['sec-websocket-protocol'] ?? '')
    if (/SPDY\/3\.1\+portforward/.test(offered))
      return this.refuseUpgrade(
        socket,
        400,
        this.statusBody(
          400,
          'BadRequest',
          'the test API server does not tunnel SPDY (kubectl port-forward); it speaks v4.channel.k8s.io',
        ),
      )
    const denied = this.denial('create', `pods/${subresource}`, '', namespace, name)
    if (denied) return this.refuseUpgrade(socket, 403, denied)
    const pod = this.findPod(namespace, name)
    if (!pod)
      return this.refuseUpgrade(
        socket,
        404,
        this.statusBody(404, 'NotFound', `pods "${name}" not found`, {name, kind: 'pods'}),
      )
    const podLabel = `${namespace}/${name}`
    const query = new URLSearchParams(r.query)
    const containers = ((pod.spec as {containers?: {name: string}[]} | undefined)?.containers ?? []).map((c) => c.name)
    const container = query.get('container') || containers[0]
    if (subresource === 'exec' && !containers.includes(container))
      return this.refuseUpgrade(
        socket,
        400,
        this.statusBody(400, 'BadRequest', `container ${container} is not valid for pod ${name}`),
      )
    const running = (pod.status as {phase?: string} | undefined)?.phase === 'Running'
    const recorded =
      running && subresource === 'exec' ? this.opts.execAnswer?.(pod, query.getAll('command')) : undefined
    if (recorded !== undefined)
      return this.wss.handleUpgrade(req, socket, head, (ws) =>
        runRecordedSession(ws, query.getAll('command'), recorded, this.streams),
      )
    const sandbox = running ? this.opts.podSandbox?.(pod) : undefined
    if (!sandbox)
      return this.refuseUpgrade(
        socket,
        400,
        this.statusBody(400, 'BadRequest', `unable to upgrade connection: container not found ("${container}")`),
      )
    const argv = query.getAll('command')
    if (subresource === 'exec' && argv.length === 0)
      return this.refuseUpgrade(
        socket,
        400,
        this.statusBody(400, 'BadRequest', 'you must specify at least one command for the container'),
      )
    const ports = query
      .getAll('ports')
      .flatMap((v) => v.split(','))
      .map(Number)
    if (
      subresource === 'portforward' &&
      (ports.length === 0 || ports.some((n) => !Number.isInteger(n) || n < 1 || n > 65535))
    )
      return this.refuseUpgrade(
        socket,
        400,
        this.statusBody(400, 'BadRequest', 'query parameter "port" is required and must be a port number'),
      )
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      const before = new Set(this.streams.children)
      if (subresource === 'portforward') runPortForwardSession(ws, ports, sandbox, podLabel, this.streams)
      else if (this.opts.hungExec?.has(podLabel) || this.opts.hungExecOf?.(pod)) runHungSession(ws, this.streams)
      else runExecSession(ws, argv, sandbox, query.get('stdin') === 'true', this.streams)
      for (const child of this.streams.children) if (!before.has(child)) this.podOfChild.set(child, pod)
    })
  }

  private resourceList(groupVersion: string, group: string) {
    return {
      kind: 'APIResourceList',
      apiVersion: 'v1',
      groupVersion,
      resources: Object.entries(RESOURCES)
        .filter(([, d]) => d.group === group)
        .flatMap(([name, d]) => [
          {
            name,
            singularName: d.kind.toLowerCase(),
            namespaced: d.namespaced,
            kind: d.kind,
            verbs: name === 'pods' ? ['create', 'delete', 'get', 'list'] : ['get', 'list'],
            ...(d.shortNames ? {shortNames: d.shortNames} : {}),
          },
          ...(name === 'pods'
            ? [
                {
                  name: 'pods/exec',
                  singularName: '',
                  namespaced: true,
                  kind: 'PodExecOptions',
                  verbs: ['create', 'get'],
                },
                {
                  name: 'pods/portforward',
                  singularName: '',
                  namespaced: true,
                  kind: 'PodPortForwardOptions',
                  verbs: ['create', 'get'],
                },
              ]
            : []),
        ]),
    }
  }
}

interface WatchEvent {
  resource: string
  type: 'ADDED' | 'MODIFIED' | 'DELETED'
  object: Obj
  resourceVersion: number
}

interface Watcher {
  resource: string
  matches: (o: Obj) => boolean
  send: (e: WatchEvent) => void
  end: () => void
}

const objectKey = (o: Obj) => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`

function matchLabels(selector: string, labels: Record<string, string>): boolean {
  return selector.split(',').every((term) => {
    const t = term.trim()
    let m = /^([^!=]+)!=(.*)$/.exec(t)
    if (m) return labels[m[1]] !== m[2]
    m = /^([^=]+)==?(.*)$/.exec(t)
    if (m) return labels[m[1]] === m[2]
    if (t.startsWith('!')) return !(t.slice(1) in labels)
    return t in labels
  })
}

function matchFields(selector: string, o: Obj): boolean {
  return selector.split(',').every((term) => {
    const m = /^([^!=]+)(!=|==|=)(.*)$/.exec(term.trim())
    if (!m) return false
    const value = m[1].split('.').reduce<unknown>((acc, k) => (acc as Record<string, unknown> | undefined)?.[k], o)
    return m[2] === '!=' ? value !== m[3] : value === m[3]
  })
}
