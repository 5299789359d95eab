import {createServer, type Server} from 'node:https'
import type {IncomingMessage, ServerResponse} from 'node:http'
import {mkdtempSync, readFileSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {run} from './sh.js'

/**
 * A Kubernetes API server for tests: real HTTPS on loopback, bearer-token auth, discovery documents, get and list
 * with label and field selectors, and 401/403/404 answered with Status objects the way kube-apiserver answers them.
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
}

type Obj = {metadata?: {name?: string; namespace?: string; labels?: Record<string, string>}; [k: string]: unknown}

export interface ApiServerOptions {
  token: string
  /** "verb resource namespace" triples answered 403 ("*" for any namespace). */
  forbidden?: Set<string>
  /** Serve no discovery.k8s.io group (a cluster before EndpointSlices). */
  withoutEndpointSlices?: boolean
}

export class LabApiServer {
  private server?: Server
  readonly objects = new Map<string, Obj[]>()
  port = 0
  readonly dir = mkdtempSync(join(tmpdir(), 'kpd-api-'))
  caPem = ''
  requests: string[] = []

  constructor(public opts: ApiServerOptions) {}

  set(resource: keyof typeof RESOURCES, items: Obj[]): void {
    this.objects.set(resource, items)
  }

  async start(): Promise<void> {
    const key = join(this.dir, 'key.pem')
    const cert = join(this.dir, 'cert.pem')
    run('openssl', [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '2',
      '-subj',
      '/CN=kpd-test-apiserver',
      '-addext',
      'subjectAltName=IP:127.0.0.1,DNS:localhost',
    ])
    this.caPem = readFileSync(cert, 'utf8')
    this.server = createServer({key: readFileSync(key), cert: readFileSync(cert)}, (req, res) => this.handle(req, res))
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve))
    this.port = (this.server!.address() as {port: number}).port
  }

  stop(): Promise<void> {
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

  private status(res: ServerResponse, code: number, reason: string, message: string, details?: Record<string, string>): void {
    this.send(res, code, {kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, ...(details ? {details} : {}), code})
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', this.url)
    this.requests.push(`${req.method} ${url.pathname}${url.search}`)
    if (req.headers.authorization !== `Bearer ${this.opts.token}`) return this.status(res, 401, 'Unauthorized', 'Unauthorized')
    if (req.method !== 'GET') return this.status(res, 405, 'MethodNotAllowed', 'the test API server is read-only')
    const p = url.pathname.replace(/\/$/, '')
    if (p === '/version') return this.send(res, 200, {major: '1', minor: '33', gitVersion: 'v1.33.0-kpd-lab', platform: 'linux/amd64'})
    if (p === '/api') return this.send(res, 200, {kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{clientCIDR: '0.0.0.0/0', serverAddress: `127.0.0.1:${this.port}`}]})
    if (p === '/apis') {
      const groups = this.opts.withoutEndpointSlices
        ? []
        : [{name: 'discovery.k8s.io', versions: [{groupVersion: 'discovery.k8s.io/v1', version: 'v1'}], preferredVersion: {groupVersion: 'discovery.k8s.io/v1', version: 'v1'}}]
      return this.send(res, 200, {kind: 'APIGroupList', apiVersion: 'v1', groups})
    }
    if (p === '/api/v1') return this.send(res, 200, this.resourceList('v1', ''))
    if (p === '/apis/discovery.k8s.io/v1' && !this.opts.withoutEndpointSlices) return this.send(res, 200, this.resourceList('discovery.k8s.io/v1', 'discovery.k8s.io'))
    const m = /^\/(?:api\/v1|apis\/([^/]+)\/([^/]+))(?:\/namespaces\/([^/]+))?\/([^/]+)(?:\/([^/]+))?$/.exec(p)
    if (!m) return this.status(res, 404, 'NotFound', 'the server could not find the requested resource')
    const [, group = '', , namespace, resource, name] = m
    const def = RESOURCES[resource]
    if (!def || def.group !== group || (group === 'discovery.k8s.io' && this.opts.withoutEndpointSlices)) return this.status(res, 404, 'NotFound', 'the server could not find the requested resource')
    const verb = name ? 'get' : 'list'
    const f = this.opts.forbidden
    if (f && (f.has(`${verb} ${resource} ${namespace ?? ''}`) || f.has(`${verb} ${resource} *`))) {
      const gr = group ? `${resource}.${group}` : resource
      const where = namespace ? ` in the namespace "${namespace}"` : ' at the cluster scope'
      return this.status(res, 403, 'Forbidden', `${gr}${name ? ` "${name}"` : ''} is forbidden: User "kpd-lab" cannot ${verb} resource "${resource}" in API group "${group}"${where}`, {
        kind: resource,
        ...(name ? {name} : {}),
      })
    }
    let items = (this.objects.get(resource) ?? []).filter((o) => !def.namespaced || !namespace || o.metadata?.namespace === namespace)
    const apiVersion = group ? `${group}/${def.version}` : def.version
    if (name) {
      const found = items.find((o) => o.metadata?.name === name)
      if (!found) return this.status(res, 404, 'NotFound', `${group ? `${resource}.${group}` : resource} "${name}" not found`, {name, kind: resource})
      return this.send(res, 200, {apiVersion, kind: def.kind, ...found})
    }
    const labelSelector = url.searchParams.get('labelSelector')
    const fieldSelector = url.searchParams.get('fieldSelector')
    if (labelSelector) items = items.filter((o) => matchLabels(labelSelector, o.metadata?.labels ?? {}))
    if (fieldSelector) items = items.filter((o) => matchFields(fieldSelector, o))
    this.send(res, 200, {apiVersion, kind: `${def.kind}List`, metadata: {resourceVersion: '1'}, items})
  }

  private resourceList(groupVersion: string, group: string) {
    return {
      kind: 'APIResourceList',
      apiVersion: 'v1',
      groupVersion,
      resources: Object.entries(RESOURCES)
        .filter(([, d]) => d.group === group)
        .map(([name, d]) => ({name, singularName: d.kind.toLowerCase(), namespaced: d.namespaced, kind: d.kind, verbs: ['get', 'list'], ...(d.shortNames ? {shortNames: d.shortNames} : {})})),
    }
  }
}

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
