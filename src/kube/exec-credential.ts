import {spawn, type ChildProcess} from 'node:child_process'
import type {KubeConfig, User} from '@kubernetes/client-node'

/**
 * A kubeconfig's exec credential plugin (an OIDC login, a cloud token helper), run with a deadline. The client
 * library runs the plugin itself and waits for it without end: a plugin waiting for a browser hung every API call,
 * and the deadline on the HTTP request never started. Here the plugin runs as its own process group, is killed at
 * the deadline (with what it started), and the call fails naming it. Its answer is kept until it expires, as the
 * library did.
 */

/** What `users[].user.exec` holds (client.authentication.k8s.io ExecConfig). */
interface ExecConfig {
  command: string
  args?: string[]
  env?: Array<{name: string; value: string}>
  apiVersion?: string
}

interface ExecCredentialStatus {
  token?: string
  clientCertificateData?: string
  clientKeyData?: string
  expirationTimestamp?: string
}

/** The plugin did not answer, failed, or answered something that is not an ExecCredential. */
export class CredentialPluginError extends Error {
  override name = 'CredentialPluginError'
}

/** The auth provider name a user whose exec the doctor runs is given (the library's own exec runner never sees it). */
const PROVIDER = 'kproxy-doctor-exec'

interface RunningPlugin {
  command: string
  child: ChildProcess
}

/** Runs the plugins of one kubeconfig's users, at most one at a time per user. */
class BoundedExecCredentials {
  private readonly cached = new Map<string, ExecCredentialStatus>()
  private readonly inFlight = new Map<string, Promise<ExecCredentialStatus>>()
  readonly running = new Set<RunningPlugin>()

  constructor(
    private readonly plugins: Map<string, ExecConfig>,
    private readonly timeoutMs: number,
  ) {}

  isAuthProvider(user: User): boolean {
    return user.authProvider?.name === PROVIDER
  }

  async applyAuthentication(user: User, opts: {headers?: Record<string, string>; cert?: string; key?: string}) {
    const status = await this.credential(user.name)
    if (status.clientCertificateData) opts.cert = status.clientCertificateData
    if (status.clientKeyData) opts.key = status.clientKeyData
    if (status.token) opts.headers = {...opts.headers, Authorization: `Bearer ${status.token}`}
  }

  private credential(userName: string): Promise<ExecCredentialStatus> {
    const cached = this.cached.get(userName)
    if (cached && (!cached.expirationTimestamp || Date.parse(cached.expirationTimestamp) > Date.now() + 10_000))
      return Promise.resolve(cached)
    let pending = this.inFlight.get(userName)
    if (!pending) {
      pending = this.run(this.plugins.get(userName)!).finally(() => this.inFlight.delete(userName))
      pending.then((s) => this.cached.set(userName, s)).catch(() => undefined)
      this.inFlight.set(userName, pending)
    }
    return pending
  }

  private run(exec: ExecConfig): Promise<ExecCredentialStatus> {
    const name = `the kubeconfig's exec credential plugin \`${exec.command}\``
    const env = {...process.env}
    for (const e of exec.env ?? []) env[e.name] = e.value
    env.KUBERNETES_EXEC_INFO = JSON.stringify({
      apiVersion: exec.apiVersion ?? 'client.authentication.k8s.io/v1beta1',
      kind: 'ExecCredential',
      spec: {interactive: false},
    })
    return new Promise((resolve, reject) => {
      const child = spawn(exec.command, exec.args ?? [], {env, stdio: ['ignore', 'pipe', 'pipe'], detached: true})
      const entry = {command: exec.command, child}
      this.running.add(entry)
      let stdout = ''
      let stderr = ''
      child.stdout!.on('data', (c: Buffer) => {
        if (stdout.length < 1 << 20) stdout += c.toString()
      })
      // What the plugin says for the user (a login URL, a warning) is shown, as kubectl shows it.
      child.stderr!.on('data', (c: Buffer) => {
        process.stderr.write(c)
        stderr = (stderr + c.toString()).slice(-500)
      })
      const done = (e?: Error, status?: ExecCredentialStatus) => {
        clearTimeout(timer)
        this.running.delete(entry)
        if (e) reject(e)
        else resolve(status!)
      }
      const timer = setTimeout(() => {
        endPlugin(entry)
        done(new CredentialPluginError(`${name} did not answer within ${this.timeoutMs / 1000}s`))
      }, this.timeoutMs)
      child.on('error', (e) => done(new CredentialPluginError(`${name} could not be started: ${e.message}`)))
      child.on('close', (code) => {
        if (!this.running.has(entry)) return
        if (code !== 0)
          return done(
            new CredentialPluginError(`${name} failed (exit ${code})${stderr.trim() ? `: ${lastLine(stderr)}` : ''}`),
          )
        try {
          const status = (JSON.parse(stdout) as {status?: ExecCredentialStatus}).status
          if (!status || !(status.token || (status.clientCertificateData && status.clientKeyData)))
            throw new Error('no token and no client certificate in its status')
          done(undefined, status)
        } catch (e) {
          done(
            new CredentialPluginError(`${name} answered no usable ExecCredential: ${(e as Error).message}`, {cause: e}),
          )
        }
      })
    })
  }
}

function lastLine(text: string): string {
  return text.trim().split('\n').pop()!.slice(0, 200)
}

/** Kills a plugin's process group (the plugin and what it started). */
function endPlugin(plugin: RunningPlugin): void {
  if (plugin.child.pid === undefined || plugin.child.exitCode !== null) return
  try {
    process.kill(-plugin.child.pid, 'SIGKILL')
  } catch {
    // already gone
  }
}

const byConfig = new WeakMap<KubeConfig, BoundedExecCredentials>()
const everyRunner = new Set<BoundedExecCredentials>()
let exitHook = false

/**
 * Makes every exec user of `kc` get its credentials from the plugin run here, with `timeoutMs` (the library's own
 * runner no longer sees them: their exec is moved to an auth provider only this module answers for).
 */
export function boundExecCredentials(kc: KubeConfig, timeoutMs: number): void {
  const plugins = new Map<string, ExecConfig>()
  const users = kc.getUsers().map((user) => {
    const exec = user.exec as ExecConfig | undefined
    if (!exec?.command) return user
    plugins.set(user.name, exec)
    return {...user, exec: undefined, authProvider: {name: PROVIDER, config: {}}}
  })
  if (plugins.size === 0) return
  kc.loadFromOptions({
    clusters: kc.getClusters(),
    contexts: kc.getContexts(),
    users,
    currentContext: kc.getCurrentContext(),
  })
  const credentials = new BoundedExecCredentials(plugins, timeoutMs)
  kc.addAuthenticator(credentials)
  byConfig.set(kc, credentials)
  everyRunner.add(credentials)
  // A run that ends while a plugin still waits (an error elsewhere, Ctrl-C) leaves nothing behind.
  if (!exitHook) {
    exitHook = true
    process.on('exit', () => {
      for (const runner of everyRunner) for (const plugin of runner.running) endPlugin(plugin)
    })
  }
}

/** The command of a credential plugin still running for `kc`, if any (a call that hit its deadline was waiting for it). */
export function pendingCredentialPlugin(kc: KubeConfig): string | undefined {
  const running = byConfig.get(kc)?.running
  return running && running.size > 0 ? [...running][0].command : undefined
}

/** Kills every credential plugin still running for `kc`. */
export function endCredentialPlugins(kc: KubeConfig): void {
  for (const plugin of byConfig.get(kc)?.running ?? []) endPlugin(plugin)
}
