import type {KubeConfig} from '@kubernetes/client-node'
import {argvOf, commandTimeoutMs, isReadableNodeFile, onNodeRoot, outputCapBytes} from '../../node-commands.js'
import {dnsLookupCommand} from '../../read/command-arguments.js'
import type {KernelTraceCommand} from '../../kernel-trace-commands.js'
import {
  isNodeCommandKey,
  NODE_READS,
  readOf,
  type ArgsOf,
  type NodeCommandKey,
  type NodeRead,
} from '../../read/node-reads.js'
import type {
  FileRead,
  NodeAccess,
  Refusal,
  RunResult,
  TcpOpen,
  TransportDescription,
  TransportNotes,
} from '../node-access.js'
import type {POD_TRANSPORTS} from '../transport-names.js'
import {execInPod, type ExecResult} from '../../../kube/exec-in-pod.js'
import type {PodRef} from './find-pod.js'
import {
  KubeCommandNotFoundError,
  KubeForbiddenError,
  KubePortForwardError,
  KubeTimeoutError,
} from '../../../kube/errors.js'
import {openPortForward} from '../../../kube/port-forward.js'
import {hairpinLines, interfacesOfProcNetDev} from './sysfs-bridges.js'
import {sectionNotReadLine} from '../../../parse/not-read-mark.js'
import {procIpVsAsIpvsadm} from './proc-ip-vs.js'
import {podAddress} from './pod-address.js'

/** The sysctl names of the allow-listed `sysctls` key, read one by one from /proc/sys where `sysctl` is absent. */
const SYSCTL_NAMES = NODE_READS.sysctls.argv.slice(1)

/** Interfaces are read in batches so that one exec's URL (argv travels in the query) stays short. */
const PATHS_PER_EXEC = 60

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1'])

type Missing = {kind: 'missing'; tool: string}

/** Which host-network Pod on the node is exec'ed into, in the report's words, and what closing the access does. */
export interface PodKind {
  transport: (typeof POD_TRANSPORTS)[number]
  /** "kube-proxy's Pod", "the debug Pod". */
  pod: string
  /** "the kube-proxy image", "the debug image (busybox:1.36)". */
  image: string
  /** What exec is needed for, in an RBAC refusal: "read nodes through kube-proxy's Pods". */
  purpose: string
  /**
   * The Pod mounts the node's root at HOST_ROOT (the debug Pod): a program its image lacks runs as the node's own,
   * `chroot /host PROGRAM…` (when the image has chroot), and the CNI result cache is read that way.
   */
  nodeRoot: boolean
  /** Where the Pod's image comes from, for the report ("image registry.k8s.io/kube-proxy:v1.33.0, kube-proxy's …"). */
  origin?: string
  /** Runs once when the access is closed (the debug Pod is deleted); resolves to a line when it failed (never rejects). */
  release?: () => Promise<string | undefined>
}

const KUBE_PROXY_POD: PodKind = {
  transport: 'kube-proxy',
  pod: "kube-proxy's Pod",
  image: 'the kube-proxy image',
  purpose: "read nodes through kube-proxy's Pods",
  nodeRoot: false,
}

/**
 * NodeAccess through a host-network Pod on the node (kube-proxy's own, or the debug Pod): the allow-listed reads run as
 * argv (never a shell) through pods/exec in its container, which shares the node's network namespace (hostNetwork)
 * and so sees the node's rules; TCP to the node's loopback (kube-proxy's /healthz, /metrics, /proxyMode) goes through
 * pods/portforward. A program the image lacks is remembered and reported, never fatal: kube-proxy's images
 * (distroless-iptables) ship iptables*, ip6tables*, nft, ipset, cat, grep, and not ip, bridge, ipvsadm, sysctl, dig or
 * nslookup. In the debug Pod such a program runs as the node's own through `chroot /host` where the image has chroot.
 */
export class PodExecNodeAccess implements NodeAccess {
  /** Program the image lacks → what its absence cost (the whenMissing of the read that missed it). */
  private readonly missing = new Map<string, string>()
  /** The RBAC refusals met, by their line (one each: the verb and resource needed). */
  private readonly refusals = new Map<string, Refusal>()
  /** Node files the Pod does not see (its mounts are not the node's), with what that cost. */
  private readonly notMounted = new Set<string>()
  /** Programs the node lacks too (`chroot /host PROGRAM` exited 127), and whether the image has no chroot at all. */
  private readonly notOnNode = new Set<string>()
  private noChroot = false
  private released?: Promise<void>
  private leftover?: string

  constructor(
    private readonly kubeConfig: KubeConfig,
    private readonly pod: PodRef,
    private readonly timeoutMs: number,
    private readonly kind: PodKind = KUBE_PROXY_POD,
  ) {}

  /**
   * One line per program the image lacked (with what was read instead or not at all) and per file the Pod does not see;
   * the RBAC refusals met; the line saying the debug Pod could not be deleted (once closed); where its image comes from.
   */
  notes(): TransportNotes {
    return {
      missingTools: [
        ...[...this.missing].map(([tool, cost]) => `${tool} ${this.absentFrom(tool)}${cost ? `: ${cost}` : ''}`),
        ...this.notMounted,
      ],
      refusals: [...this.refusals.values()],
      warnings: [],
      leftovers: this.leftover ? [this.leftover] : [],
      origin: this.kind.origin,
    }
  }

  /** Where a program was looked for: the image, and in the debug Pod the node too (or why not). */
  private absentFrom(tool: string): string {
    if (!this.kind.nodeRoot) return `not in ${this.kind.image}`
    if (this.noChroot) return `not in ${this.kind.image} (which has no chroot to run the node's)`
    return this.notOnNode.has(tool) ? `neither in ${this.kind.image} nor on the node` : `not in ${this.kind.image}`
  }

  /**
   * argv in the image; where the image lacks the program and the Pod has the node's root, the node's own program. A
   * program missing from both is noted with what its absence costs, as the read it serves says.
   */
  private async exec(
    argv: readonly string[],
    forRead?: NodeRead,
    timeoutMs = this.timeoutMs,
    stop?: AbortSignal,
  ): Promise<ExecResult | Missing> {
    const cap = outputCapBytes(forRead)
    const r = await this.execRaw(argv, timeoutMs, cap, stop)
    if (!('kind' in r) || !this.kind.nodeRoot || this.noChroot) return this.noted(r, forRead)
    const onNode = await this.execRaw(onNodeRoot(argv), timeoutMs, cap, stop)
    if ('kind' in onNode) this.noChroot = true
    else if (onNode.exitCode === 127) this.notOnNode.add(argv[0])
    else return onNode
    return this.noted(r, forRead)
  }

  private noted(r: ExecResult | Missing, forRead: NodeRead | undefined): ExecResult | Missing {
    if ('kind' in r && !this.missing.has(r.tool)) this.missing.set(r.tool, forRead?.whenMissing?.[r.tool] ?? '')
    return r
  }

  private async execRaw(
    argv: readonly string[],
    timeoutMs = this.timeoutMs,
    maxOutputBytes = outputCapBytes(undefined),
    stop?: AbortSignal,
  ): Promise<ExecResult | Missing> {
    try {
      return await execInPod(this.kubeConfig, this.pod.namespace, this.pod.name, this.pod.container, [...argv], {
        timeoutMs,
        maxOutputBytes,
        ...(stop ? {stop} : {}),
      })
    } catch (e) {
      if (e instanceof KubeCommandNotFoundError) return {kind: 'missing', tool: argv[0]}
      if (e instanceof KubeForbiddenError) throw new Error(this.refused(e), {cause: e})
      if (e instanceof KubeTimeoutError)
        throw new Error(
          `${argv[argv[0] === 'chroot' ? 2 : 0]} in ${this.kind.pod} ${this.podName()} did not finish within ${timeoutMs / 1000}s`,
          {cause: e},
        )
      throw e
    }
  }

  private refused(e: KubeForbiddenError): string {
    const line = `RBAC forbids ${e.verb} on ${e.resource} in namespace "${e.namespace}" (403): needed to ${this.kind.purpose}`
    this.refusals.set(line, {verb: e.verb, resource: e.resource, namespace: e.namespace, line})
    return line
  }

  private podName(): string {
    return `${this.pod.namespace}/${this.pod.name}`
  }

  private notInImage(tool: string, what = ''): RunResult {
    return {kind: 'not-recorded', what: `${tool} ${this.absentFrom(tool)}${what}`}
  }

  /**
   * The reads made here their own way: several programs (network, dnsLookup), or another way in where the image lacks
   * the program (/proc/net/ip_vs, /proc/sys, the node's root). Every other read these Pods serve runs its argv.
   */
  static readonly OWN_WAYS: {
    readonly [K in NodeCommandKey]?: (pod: PodExecNodeAccess, ...args: ArgsOf<K>) => Promise<RunResult>
  } = {
    dnsLookup: (pod, q) => pod.dnsLookup(q),
    ipvsadm: (pod) => pod.ipvsadm(),
    sysctls: (pod) => pod.sysctlsOf(SYSCTL_NAMES, readOf('sysctls')),
    network: (pod) => pod.network(),
    cniResults: (pod) => pod.cniResults(),
    pathSysctls: (pod, a) => pod.sysctlsOf(argvOf('pathSysctls', a).slice(1), readOf('pathSysctls')),
  }

  async run<K extends NodeCommandKey>(key: K, ...args: ArgsOf<K>): Promise<RunResult> {
    if (!isNodeCommandKey(key)) throw new Error(`"${String(key)}" is not an allow-listed node command: not run`)
    const read = readOf(key)
    // Many chains in one exec need a shell, which these Pods' exec does not give: the whole dump is read instead, and
    // the version, asked only to decide on chain by chain reads, is not asked.
    if (!read.transports.includes(this.kind.transport))
      return {kind: 'not-recorded', what: `${read.withoutShell} (no shell in ${this.kind.pod})`}
    const own = PodExecNodeAccess.OWN_WAYS[key] as
      ((pod: PodExecNodeAccess, ...args: ArgsOf<K>) => Promise<RunResult>) | undefined
    if (own) return own(this, ...args)
    return this.runArgv(argvOf(key, ...args), read, commandTimeoutMs(key, this.timeoutMs))
  }

  /** The node's own nft where the image lacks it (the debug Pod); the Pod runs privileged, as root. */
  async runKernelTrace(cmd: KernelTraceCommand, timeoutMs: number, stop?: AbortSignal): Promise<RunResult> {
    const r = await this.exec(cmd.argv, undefined, timeoutMs, stop)
    if ('kind' in r) return {kind: 'not-recorded', what: `${r.tool} ${this.absentFrom(r.tool)}`}
    return ran(r)
  }

  private async runArgv(argv: readonly string[], read: NodeRead, timeoutMs: number): Promise<RunResult> {
    const r = await this.exec(argv, read, timeoutMs)
    if ('kind' in r) return this.notInImage(r.tool)
    return ran(r)
  }

  /**
   * The node's /var/lib/cni is not the Pod's (its own filesystem would answer): in the debug Pod it is read through
   * `chroot /host` (the node's grep on the node's folder); in kube-proxy's Pod, or without chroot, not read, and said.
   */
  private async cniResults(): Promise<RunResult> {
    if (this.kind.nodeRoot && !this.noChroot) {
      const r = await this.execRaw(onNodeRoot(NODE_READS.cniResults.argv))
      if (!('kind' in r)) return ran(r)
      this.noChroot = true
    }
    const what = this.kind.nodeRoot
      ? `/var/lib/cni/results (the CNI result cache) not read: ${this.kind.image} has no chroot to reach the node's`
      : `/var/lib/cni/results (the CNI result cache) is not mounted in ${this.kind.pod}`
    this.notMounted.add(
      `${what}: pods mapped to bridge ports through fdb and neighbour entries only (they expire on idle Pods)`,
    )
    return {kind: 'not-recorded', what}
  }

  /** `ipvsadm -Sn` where the image has it; else the kernel's own table, /proc/net/ip_vs, written as `ipvsadm -Ln`. */
  private async ipvsadm(): Promise<RunResult> {
    const timeoutMs = commandTimeoutMs('ipvsadm', this.timeoutMs)
    const r = await this.exec(NODE_READS.ipvsadm.argv, readOf('ipvsadm'), timeoutMs)
    if (!('kind' in r)) return ran(r)
    const proc = await this.exec(['cat', '/proc/net/ip_vs'], readOf('ipvsadm'), timeoutMs)
    if ('kind' in proc) return this.notInImage('ipvsadm', ' (nor cat, to read /proc/net/ip_vs)')
    // No /proc/net/ip_vs: the kernel has no IPVS table, which is what an empty `ipvsadm -Sn` says; nothing unread.
    if (proc.exitCode !== 0 && /No such file/.test(proc.stderr))
      return {kind: 'ran', code: 0, stdout: Buffer.alloc(0), stderr: ''}
    if (proc.exitCode !== 0) {
      this.missing.set('ipvsadm', `/proc/net/ip_vs could not be read either (${proc.stderr.trim().split('\n')[0]})`)
      return {kind: 'ran', code: proc.exitCode, stdout: Buffer.alloc(0), stderr: proc.stderr}
    }
    return {kind: 'ran', code: 0, stdout: Buffer.from(procIpVsAsIpvsadm(proc.stdout)), stderr: ''}
  }

  /**
   * `sysctl NAME…` where the image has it; else each /proc/sys file, written as `NAME = VALUE` lines (a missing key is
   * left out, as sysctl says on stderr).
   */
  private async sysctlsOf(names: readonly string[], read: NodeRead): Promise<RunResult> {
    const r = await this.exec(['sysctl', ...names], read)
    if (!('kind' in r)) return ran(r)
    const lines: string[] = []
    for (const name of names) {
      const file = await this.readFile(`/proc/sys/${name.replaceAll('.', '/')}`)
      if (file.kind === 'read') lines.push(`${name} = ${file.content.toString('utf8').trim()}`)
    }
    return {kind: 'ran', code: 0, stdout: Buffer.from(lines.map((l) => l + '\n').join('')), stderr: ''}
  }

  /**
   * The `network` sections (see node-commands.ts) without a shell: hairpin flags from sysfs for every interface in
   * /proc/net/dev (grep -H labels each value with its file), then `ip` and `bridge` where the image has them.
   */
  private async network(): Promise<RunResult> {
    const out: string[] = ['## hairpin']
    const network = readOf('network')
    const dev = await this.exec(['cat', '/proc/net/dev'], network)
    if ('kind' in dev) return this.notInImage('cat', ': bridge ports and hairpin flags not read')
    const paths = interfacesOfProcNetDev(dev.stdout).flatMap((i) => [
      `/sys/class/net/${i}/brport/hairpin_mode`,
      `/sys/class/net/${i}/brport/bridge/uevent`,
    ])
    const labelled: string[] = []
    for (let i = 0; i < paths.length; i += PATHS_PER_EXEC) {
      const r = await this.exec(['grep', '-H', '', ...paths.slice(i, i + PATHS_PER_EXEC)], network)
      if ('kind' in r) return this.notInImage('grep', ': bridge ports and hairpin flags not read')
      labelled.push(r.stdout)
    }
    out.push(...hairpinLines(labelled.join('\n')))
    for (const [section, argv] of [
      ['links', ['ip', '-o', 'link', 'show']],
      ['neigh', ['ip', 'neigh', 'show']],
      ['fdb', ['bridge', 'fdb', 'show']],
    ] as const) {
      const r = await this.exec([...argv], network)
      out.push(`## ${section}`)
      // A program the image lacks is in the transport's notes; a failure is said in its section, as over SSH.
      if ('kind' in r) continue
      out.push(r.exitCode === 0 ? r.stdout.trimEnd() : sectionNotReadLine(r.exitCode, argv.join(' '), r.stderr))
    }
    return {kind: 'ran', code: 0, stdout: Buffer.from(out.filter((l) => l !== '').join('\n') + '\n'), stderr: ''}
  }

  /** dig, else nslookup (by argv, as dnsLookupCommand's shell form does); exit 127 when the image has neither. */
  private async dnsLookup(q: ArgsOf<'dnsLookup'>[0]): Promise<RunResult> {
    dnsLookupCommand(q.name, q.server, q.type) // validates the name, the server and the type (its shell form is not used here)
    const read = readOf('dnsLookup')
    const dig = await this.exec(['dig', '+short', '+tcp', '+time=2', '+tries=1', q.name, q.type, `@${q.server}`], read)
    if (!('kind' in dig)) return ran(dig)
    const nslookup = await this.exec(['nslookup', '-vc', '-timeout=2', `-type=${q.type}`, q.name, q.server], read)
    if (!('kind' in nslookup)) return ran(nslookup)
    return {
      kind: 'ran',
      code: 127,
      stdout: Buffer.alloc(0),
      stderr: `dig and nslookup are ${this.absentFrom('nslookup')}`,
    }
  }

  /** Only the node's loopback: the kubelet dials localhost inside the Pod's (here: the node's) network namespace. */
  async openTcp(host: string, port: number, timeoutMs: number): Promise<TcpOpen> {
    if (!LOOPBACK.has(host))
      return {
        kind: 'refused',
        outcome: 'not-probed',
        reason: `a port-forward to ${this.kind.pod} reaches only the node's loopback, not ${host}:${port}`,
      }
    try {
      return {
        kind: 'open',
        stream: await openPortForward(this.kubeConfig, this.pod.namespace, this.pod.name, port, {timeoutMs}),
      }
    } catch (e) {
      if (e instanceof KubeForbiddenError) return {kind: 'refused', outcome: 'not-probed', reason: this.refused(e)}
      if (e instanceof KubeTimeoutError)
        return {
          kind: 'refused',
          outcome: 'timeout',
          reason: `port-forward to ${host}:${port} through ${this.podName()} timed out after ${timeoutMs / 1000}s`,
        }
      if (e instanceof KubePortForwardError)
        return {kind: 'refused', outcome: e.refused ? 'refused' : 'not-probed', reason: e.message}
      return {kind: 'refused', outcome: 'not-probed', reason: (e as Error).message}
    }
  }

  async readFile(path: string): Promise<FileRead> {
    if (!isReadableNodeFile(path)) throw new Error(`refusing to read "${path}" on a node: not an allow-listed file`)
    const r = await this.exec(['cat', '--', path])
    if ('kind' in r) return {kind: 'not-recorded', what: `cat ${this.absentFrom('cat')} (${path} not read)`}
    return r.exitCode === 0
      ? {kind: 'read', content: Buffer.from(r.stdout)}
      : {kind: 'missing', reason: r.stderr.trim().split('\n')[0] || `cat exited ${r.exitCode}`}
  }

  describe(): TransportDescription {
    return {
      transport: this.kind.transport,
      address: podAddress(this.pod),
      tcpVia: `a port-forward to ${this.kind.pod} ${this.podName()}`,
    }
  }

  /** Releases the Pod (deletes the debug Pod) once; later calls wait for the same release. */
  close(): Promise<void> {
    this.released ??= (this.kind.release?.() ?? Promise.resolve(undefined)).then((line) => {
      this.leftover = line
    })
    return this.released
  }
}

function ran(r: ExecResult): RunResult {
  return {kind: 'ran', code: r.exitCode, stdout: Buffer.from(r.stdout), stderr: r.stderr}
}
