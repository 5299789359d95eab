import type {ChildProcess} from 'node:child_process'
import {randomBytes} from 'node:crypto'
import {existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {LabApiServer} from './apiserver.js'
import {
  cniCacheFile,
  endpointSliceObject,
  kubeProxyConfigMap,
  kubeProxyDaemonSetObject,
  kubeProxyPodObject,
  nodeObject,
  podObject,
  serviceObject,
} from '../fixtures/api-objects.js'
import {kubeProxyRules, type RuleFaults} from '../fixtures/kube-proxy-rules.js'
import {kubeProxyNftRules} from '../fixtures/kube-proxy-nft.js'
import {
  DNS,
  NODES,
  OUTSIDE_IP,
  SERVICES,
  dualStackNode,
  dualStackPods,
  dualStackService,
  labPods,
  type LabNode,
  type LabPod,
  type LabService,
} from '../fixtures/lab-cluster.js'
import {inNs, run, sleep, startDaemon, tryRun} from './sh.js'
import type {FakeKubeProxyState} from './fake-kube-proxy.js'
import {foreignFilterRules, type ForeignFilterRules} from '../fixtures/foreign-rules.js'
import {fileURLToPath} from 'node:url'
import {labClientKey, labHostKey, sshClientHost, startSshRelay, startSshdInNs, writeSshdConfig} from './lab-sshd.js'

const LAB_TOKEN = 'kpd-lab-token-' + randomBytes(6).toString('hex')

/**
 * Kills a server and waits (bounded) until it has exited. kill() only sends the signal: until the process is gone its
 * listening socket holds the port, and a new server started at once on the same port fails to bind and exits (seen on
 * a loaded machine: "web-b2 does not answer on 8080").
 */
function stopAndWait(proc: ChildProcess | undefined, timeoutMs = 5000): Promise<void> {
  if (!proc || proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, timeoutMs)
    proc.once('exit', () => {
      clearTimeout(timer)
      resolve()
    })
    proc.kill('SIGKILL')
  })
}

/**
 * The e2e lab: one network namespace per node, per pod and for an outside client, joined by veths and bridges
 * that never touch the host's interfaces. Each node runs a real sshd inside its namespace (reached through a
 * socat relay on 127.0.0.1), kube-proxy-style rules loaded with iptables-restore, and pods with small servers.
 */
export class NetnsLab {
  readonly id = 'kpd' + randomBytes(4).toString('hex')
  readonly dir = mkdtempSync(join(tmpdir(), 'kpd-lab-'))
  readonly namespaces: string[] = []
  readonly procs: ChildProcess[] = []
  readonly pods: LabPod[]
  /** The Services the rules are written for (the web Service first); tests may change their policies. */
  readonly services: LabService[]
  /**
   * Dual-stack (IPv4 and IPv6): the web Service has an IPv6 ClusterIP too, nodes and pods IPv6 addresses (unique local,
   * inside the lab's namespaces only), each node ip6tables rules as well, and the web pods serve on IPv6 too.
   */
  readonly dualStack: boolean
  /** Faults in each node's IPv6 rules (ip6tables), for a dual-stack lab. */
  readonly faults6 = new Map<string, RuleFaults>()
  readonly api = new LabApiServer({token: LAB_TOKEN})
  readonly sshPorts = new Map<string, number>()
  readonly faults = new Map<string, RuleFaults>()
  /** The kube-proxy mode each node runs (iptables unless set). */
  readonly modes = new Map<string, 'iptables' | 'nftables'>()
  /** Keep the other mode's rules when switching (a node with leftovers). */
  keepLeftovers = false
  /**
   * Rules loaded again keep the node's conntrack table (not flushed): a test whose tool keeps reading while the rules
   * change (svc --watch) would otherwise see its in-flight connections (the DNS question through the SSH forward) lose
   * their NAT state and time out, which no kube-proxy resync does.
   */
  keepConntrack = false
  private dnsProc?: ChildProcess
  readonly logs: string[] = []
  sshConfigPath = ''
  /** Whether each node's kube-proxy Pod is Running and ready, as the API shows it. */
  readonly kubeProxyPodReady = new Map<string, boolean>()
  kubeconfigPath = ''
  /** Each web pod's server process, so one can be stopped or moved to another port by its id. */
  private readonly webServers = new Map<string, ChildProcess>()
  /** Rules of other owners (Docker, a policy engine) loaded next to kube-proxy's, per node. */
  readonly foreignRules = new Map<string, ForeignFilterRules>()

  constructor(opts: {dualStack?: boolean} = {}) {
    this.dualStack = !!opts.dualStack
    this.pods = this.dualStack ? dualStackPods(labPods()) : labPods()
    this.services = SERVICES.map((s) => (this.dualStack && s === SERVICES[0] ? dualStackService(s) : {...s}))
  }

  /** A node as the API shows it: with its IPv6 addresses in a dual-stack lab. */
  node(node: LabNode): LabNode {
    return this.dualStack ? dualStackNode(node) : node
  }

  ns(name: string): string {
    return `${this.id}-${name}`
  }

  nodeNs(node: LabNode | string): string {
    return this.ns(typeof node === 'string' ? node : node.name)
  }

  podNs(pod: LabPod | string): string {
    return this.ns(typeof pod === 'string' ? pod : pod.name)
  }

  private addNs(name: string): string {
    const full = this.ns(name)
    run('ip', ['netns', 'add', full])
    this.namespaces.push(full)
    // IPv6 addresses usable at once (no duplicate address detection delay), in this namespace only.
    if (this.dualStack)
      inNs(full, 'sysctl', ['-qw', 'net.ipv6.conf.all.accept_dad=0', 'net.ipv6.conf.default.accept_dad=0'])
    inNs(full, 'ip', ['link', 'set', 'lo', 'up'])
    return full
  }

  async up(): Promise<void> {
    mkdirSync('/run/sshd', {recursive: true})
    const net = this.addNs('net')
    inNs(net, 'ip', ['link', 'add', 'br0', 'type', 'bridge'])
    inNs(net, 'ip', ['link', 'set', 'br0', 'up'])
    const attach = (ns: string, ifname: string, peer: string, cidr: string) => {
      run('ip', ['-n', ns, 'link', 'add', ifname, 'type', 'veth', 'peer', 'name', peer, 'netns', net])
      run('ip', ['-n', net, 'link', 'set', peer, 'master', 'br0', 'up'])
      run('ip', ['-n', ns, 'addr', 'add', cidr, 'dev', ifname])
      run('ip', ['-n', ns, 'link', 'set', ifname, 'up'])
    }
    for (const node of NODES) {
      const ns = this.addNs(node.name)
      inNs(ns, 'sysctl', ['-qw', 'net.ipv4.ip_forward=1'])
      // What kube-proxy sets at start in iptables mode for NodePorts on 127.0.0.1 (localhostNodePorts).
      inNs(ns, 'sysctl', ['-qw', 'net.ipv4.conf.all.route_localnet=1'])
      // REJECT answers with ICMP, which the kernel rate-limits per peer: turn that off so every rejected try shows.
      inNs(ns, 'sysctl', ['-qw', 'net.ipv4.icmp_ratelimit=0'])
      attach(ns, 'eth0', `u${node.key}`, `${node.ip}/24`)
      run('ip', ['-n', ns, 'link', 'add', 'cbr0', 'type', 'bridge'])
      run('ip', ['-n', ns, 'addr', 'add', `${node.gateway}/24`, 'dev', 'cbr0'])
      run('ip', ['-n', ns, 'link', 'set', 'cbr0', 'up'])
      run('ip', ['-n', ns, 'route', 'add', 'default', 'via', '10.200.0.1', 'onlink', 'dev', 'eth0'])
      for (const other of NODES.filter((o) => o !== node))
        run('ip', ['-n', ns, 'route', 'add', other.podCIDR, 'via', other.ip])
      if (this.dualStack) {
        const v6 = dualStackNode(node)
        inNs(ns, 'sysctl', ['-qw', 'net.ipv6.conf.all.forwarding=1'])
        run('ip', ['-n', ns, '-6', 'addr', 'add', `${v6.ip6}/64`, 'dev', 'eth0', 'nodad'])
        run('ip', ['-n', ns, '-6', 'addr', 'add', `${v6.gateway6}/64`, 'dev', 'cbr0', 'nodad'])
        for (const other of NODES.filter((o) => o !== node).map(dualStackNode))
          run('ip', ['-n', ns, '-6', 'route', 'add', other.podCIDR6!, 'via', other.ip6!])
        // As the IPv4 default route: Service addresses (no route of their own) must route before OUTPUT's DNAT.
        run('ip', ['-n', ns, '-6', 'route', 'add', 'default', 'dev', 'eth0'])
      }
    }
    const ext = this.addNs('outside')
    attach(ext, 'eth0', 'uext', `${OUTSIDE_IP}/24`)
    if (this.dualStack) run('ip', ['-n', ext, '-6', 'addr', 'add', 'fd00:10:200::100/64', 'dev', 'eth0', 'nodad'])
    for (const pod of this.pods) this.addPod(pod)
    for (const node of NODES) this.applyRules(node.name)
    this.startDns()
    for (const node of NODES) this.startKubeProxy(node)
    await this.startSsh()
    await this.api.start()
    this.publish()
    this.kubeconfigPath = this.api.writeKubeconfig('shop')
    await this.waitForServers()
  }

  private addPod(pod: LabPod): void {
    const node = NODES.find((n) => n.name === pod.node)!
    const ns = this.addNs(pod.name)
    const port = `v${pod.name}`.slice(0, 15)
    run('ip', ['-n', ns, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', port, 'netns', this.nodeNs(node)])
    run('ip', ['-n', ns, 'addr', 'add', `${pod.ip}/24`, 'dev', 'eth0'])
    run('ip', ['-n', ns, 'link', 'set', 'eth0', 'up'])
    run('ip', ['-n', ns, 'route', 'add', 'default', 'via', node.gateway])
    if (pod.ip6) {
      run('ip', ['-n', ns, '-6', 'addr', 'add', `${pod.ip6}/64`, 'dev', 'eth0', 'nodad'])
      run('ip', ['-n', ns, '-6', 'route', 'add', 'default', 'via', dualStackNode(node).gateway6!])
    }
    run('ip', ['-n', this.nodeNs(node), 'link', 'set', port, 'master', 'cbr0', 'up'])
    this.setHairpin(pod.name, true)
    // libcni's result cache, as containerd would leave it for this pod (the node's sshd sees the folder as /var/lib/cni/results).
    const cache = this.cniResultsDir(node)
    mkdirSync(cache, {recursive: true, mode: 0o700})
    const file = cniCacheFile(pod, node.gateway)
    writeFileSync(join(cache, file.name), file.json, {mode: 0o600})
    if (pod.kind === 'web') this.startWebServer(pod, pod.port)
  }

  private startWebServer(pod: LabPod, port: number): void {
    // Each answer names the pod and the source address it saw (masquerade shows there).
    const proc = startDaemon(
      'ip',
      [
        'netns',
        'exec',
        this.podNs(pod),
        'socat',
        `TCP-LISTEN:${port},reuseaddr,fork`,
        `SYSTEM:echo ${pod.reply} $SOCAT_PEERADDR`,
      ],
      this.logs,
    )
    this.webServers.set(pod.name, proc)
    this.procs.push(proc)
    if (pod.ip6) {
      const six = startDaemon(
        'ip',
        [
          'netns',
          'exec',
          this.podNs(pod),
          'socat',
          `TCP6-LISTEN:${port},reuseaddr,fork,ipv6only=1`,
          `SYSTEM:echo ${pod.reply} $SOCAT_PEERADDR`,
        ],
        this.logs,
      )
      this.procs.push(six)
    }
  }

  /**
   * Fault switch: the pod's server listens on `port` instead (its own port restores it). The pod stays Ready in the
   * API, as when a readiness probe checks another port than the Service's targetPort. Waits (bounded) until it answers.
   */
  async listenOn(podName: string, port: number): Promise<void> {
    const pod = this.pods.find((p) => p.name === podName && p.kind === 'web')
    if (!pod) throw new Error(`no web pod ${podName}`)
    await stopAndWait(this.webServers.get(pod.name))
    this.startWebServer(pod, port)
    for (let i = 0; i < 50; i++) {
      if (this.connect(this.nodeNs(pod.node), pod.ip, port, 1).startsWith(`${pod.reply} `)) return
      await sleep(100)
    }
    throw new Error(`${podName} does not answer on ${port}`)
  }

  /** Fault switch: writes a kernel setting in a node's namespace (e.g. net.ipv4.ip_forward=0); returns the old value. */
  setSysctl(nodeName: string, key: string, value: string): string {
    const ns = this.nodeNs(nodeName)
    const old = inNs(ns, 'sysctl', ['-n', key]).trim()
    inNs(ns, 'sysctl', ['-qw', `${key}=${value}`])
    return old
  }

  /**
   * Fault switch: takes away `fromNode`'s route to `toNode`'s pod CIDR (IPv6's with `family` 6, dual-stack), as a broken
   * CNI route controller would: 'missing' deletes it (the default route then takes the traffic), the others replace it
   * with that route type.
   */
  breakPodRoute(
    fromNode: string,
    toNode: string,
    kind: 'missing' | 'unreachable' | 'blackhole' | 'prohibit',
    family: 4 | 6 = 4,
  ): void {
    const {cidr} = this.podRoute(toNode, family)
    const ip = ['-n', this.nodeNs(fromNode), ...(family === 6 ? ['-6'] : [])]
    if (kind === 'missing') run('ip', [...ip, 'route', 'del', cidr])
    else run('ip', [...ip, 'route', 'replace', kind, cidr])
  }

  restorePodRoute(fromNode: string, toNode: string, family: 4 | 6 = 4): void {
    const {cidr, via} = this.podRoute(toNode, family)
    const ip = ['-n', this.nodeNs(fromNode), ...(family === 6 ? ['-6'] : [])]
    tryRun('ip', [...ip, 'route', 'del', cidr])
    run('ip', [...ip, 'route', 'add', cidr, 'via', via])
  }

  /** `toNode`'s pod CIDR of `family` and the node address routes to it go via. */
  private podRoute(toNode: string, family: 4 | 6): {cidr: string; via: string} {
    const to = NODES.find((n) => n.name === toNode)!
    if (family === 4) return {cidr: to.podCIDR, via: to.ip}
    const v6 = dualStackNode(to)
    return {cidr: v6.podCIDR6!, via: v6.ip6!}
  }

  /** Fault switch: other owners' filter rules on a node (undefined removes them); reloads the node's rules. */
  setForeignRules(nodeName: string, rules: ForeignFilterRules | undefined): void {
    if (rules) this.foreignRules.set(nodeName, rules)
    else this.foreignRules.delete(nodeName)
    this.applyRules(nodeName)
  }

  /**
   * Fault switch: leaves a UDP conntrack entry on the client's node that DNATs the client's DNS queries from
   * `sourcePort` to `staleIp`, a DNS address that is no endpoint any more (CoreDNS moved). It is made by real
   * traffic, as it happens in a cluster: while the DNS pod still has `staleIp` and a DNAT rule still points there,
   * the client asks once; then the address and the rule go away and the entry stays (refreshed by each query).
   */
  staleDnsConntrack(clientPod: string, sourcePort: number, staleIp: string): void {
    const pod = this.pods.find((p) => p.name === clientPod)!
    const dnsPod = this.pods.find((p) => p.kind === 'dns')!
    const ns = this.nodeNs(pod.node)
    const rule = [
      '-s',
      `${pod.ip}/32`,
      '-d',
      `${DNS.clusterIP}/32`,
      '-p',
      'udp',
      '--dport',
      '53',
      '-j',
      'DNAT',
      '--to-destination',
      `${staleIp}:53`,
    ]
    // The entry is confirmed only once the packet leaves the bridge port, so the old address must still answer ARP.
    inNs(this.podNs(dnsPod), 'ip', ['addr', 'add', `${staleIp}/32`, 'dev', 'eth0'])
    inNs(ns, 'iptables', ['-t', 'nat', '-I', 'PREROUTING', '1', ...rule])
    try {
      this.dnsQuery(clientPod, `${SERVICES[0].name}.${SERVICES[0].namespace}.svc.cluster.local`, sourcePort)
    } finally {
      inNs(ns, 'iptables', ['-t', 'nat', '-D', 'PREROUTING', ...rule])
      inNs(this.podNs(dnsPod), 'ip', ['addr', 'del', `${staleIp}/32`, 'dev', 'eth0'])
    }
  }

  /** One DNS query over UDP from a pod to the cluster DNS Service (from `sourcePort` when given); the addresses of `type` answered. */
  dnsQuery(fromPod: string, name: string, sourcePort?: number, type: 'A' | 'AAAA' = 'A'): string[] {
    const pod = this.pods.find((p) => p.name === fromPod)!
    const bind = sourcePort ? ['-b', `${pod.ip}#${sourcePort}`] : []
    const r = tryRun(
      'ip',
      [
        'netns',
        'exec',
        this.podNs(pod),
        'dig',
        '+short',
        '+time=1',
        '+tries=1',
        ...bind,
        `@${DNS.clusterIP}`,
        name,
        type,
      ],
      undefined,
      5000,
    )
    const address = type === 'A' ? /^\d+\.\d+\.\d+\.\d+$/ : /^[0-9a-f]*:[0-9a-f:]*$/i
    return r.stdout
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => address.test(l))
  }

  /** Undoes every packet-path fault switch: settings, routes, listeners, other owners' rules, conntrack. */
  async clearPathFaults(): Promise<void> {
    for (const node of NODES) {
      this.setSysctl(node.name, 'net.ipv4.ip_forward', '1')
      this.setSysctl(node.name, 'net.bridge.bridge-nf-call-iptables', '1')
      for (const other of NODES.filter((o) => o !== node)) this.restorePodRoute(node.name, other.name)
      this.foreignRules.delete(node.name)
    }
    for (const pod of this.pods.filter((p) => p.kind === 'web')) await this.listenOn(pod.name, pod.port)
    this.clearFaults()
  }

  /** The lab's stand-in for a node's /var/lib/cni/results (bind-mounted there for that node's sshd only). */
  cniResultsDir(node: LabNode): string {
    return join(this.dir, `cni-results-${node.key}`)
  }

  /** Fault switch: the port stops learning and its FDB and neighbour entries go, as on an idle Pod whose entries expired. */
  forgetPod(podName: string, forget: boolean): void {
    const pod = this.pods.find((p) => p.name === podName)!
    const ns = this.nodeNs(pod.node)
    inNs(ns, 'bridge', ['link', 'set', 'dev', this.bridgePort(pod.name), 'learning', forget ? 'off' : 'on'])
    if (forget) {
      const learned = tryRun('ip', [
        'netns',
        'exec',
        ns,
        'bridge',
        'fdb',
        'show',
        'dev',
        this.bridgePort(pod.name),
      ]).stdout.split('\n')
      for (const mac of learned
        .filter((l) => !/permanent/.test(l))
        .map((l) => /^([0-9a-f:]{17}) /.exec(l)?.[1])
        .filter((m) => m !== undefined))
        tryRun('ip', ['netns', 'exec', ns, 'bridge', 'fdb', 'del', mac, 'dev', this.bridgePort(pod.name), 'master'])
      tryRun('ip', ['netns', 'exec', ns, 'ip', 'neigh', 'flush', 'dev', 'cbr0'])
    }
  }

  bridgePort(pod: string): string {
    return `v${pod}`.slice(0, 15)
  }

  setHairpin(podName: string, on: boolean): void {
    const pod = this.pods.find((p) => p.name === podName)!
    inNs(this.nodeNs(pod.node), 'bridge', [
      'link',
      'set',
      'dev',
      this.bridgePort(pod.name),
      'hairpin',
      on ? 'on' : 'off',
    ])
  }

  /**
   * Starts dnsmasq as the cluster DNS: the web Service's A record (and its AAAA, dual-stack) and the DNS Service's own.
   * `aaaa` answers the web Service's AAAA with another address (a fault: the name resolves wrong over IPv6 only).
   */
  startDns(opts: {aaaa?: string} = {}): void {
    const pod = this.pods.find((p) => p.kind === 'dns')!
    const web = this.services[0]
    const webV6 = opts.aaaa ?? web.clusterIP6
    this.dnsProc = startDaemon(
      'ip',
      [
        'netns',
        'exec',
        this.podNs(pod),
        'dnsmasq',
        '-k',
        '-C',
        '/dev/null',
        '--no-resolv',
        '--no-hosts',
        '--bind-interfaces',
        `--listen-address=${pod.ip}`,
        '--user=root',
        `--pid-file=${join(this.dir, 'dnsmasq.pid')}`,
        `--host-record=${web.name}.${web.namespace}.svc.cluster.local,${web.clusterIP}${webV6 ? `,${webV6}` : ''}`,
        `--host-record=${DNS.name}.${DNS.namespace}.svc.cluster.local,${DNS.clusterIP}`,
      ],
      this.logs,
    )
    this.procs.push(this.dnsProc)
  }

  /** Stops the DNS server and waits until it has exited (bounded), so that nothing answers on port 53 afterwards. */
  async stopDns(): Promise<void> {
    const proc = this.dnsProc
    this.dnsProc = undefined
    if (!proc || proc.exitCode !== null) return
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 5000)
      proc.once('exit', () => {
        clearTimeout(timer)
        resolve()
      })
      proc.kill('SIGTERM')
    })
  }

  /** (Re)loads a node's rules from the lab's state, with the given faults. */
  applyRules(
    nodeName: string,
    faults: RuleFaults = this.faults.get(nodeName) ?? {},
    faults6: RuleFaults = this.faults6.get(nodeName) ?? {},
  ): void {
    this.faults.set(nodeName, faults)
    this.faults6.set(nodeName, faults6)
    const node = NODES.find((n) => n.name === nodeName)!
    const ns = this.nodeNs(node)
    const deleteNftTables = () => {
      tryRun('ip', ['netns', 'exec', ns, 'nft', 'delete', 'table', 'ip', 'kube-proxy'])
      if (this.dualStack) tryRun('ip', ['netns', 'exec', ns, 'nft', 'delete', 'table', 'ip6', 'kube-proxy'])
    }
    if (this.modes.get(nodeName) === 'nftables') {
      if (!this.keepLeftovers) {
        inNs(ns, 'iptables-restore', [], '*nat\nCOMMIT\n*filter\nCOMMIT\n')
        if (this.dualStack) inNs(ns, 'ip6tables-restore', [], '*nat\nCOMMIT\n*filter\nCOMMIT\n')
      }
      deleteNftTables()
      inNs(ns, 'nft', ['-f', '-'], kubeProxyNftRules(node, this.services, this.pods, faults))
      if (this.dualStack)
        inNs(ns, 'nft', ['-f', '-'], kubeProxyNftRules(this.node(node), this.services, this.pods, faults6, 6))
    } else {
      if (!this.keepLeftovers) deleteNftTables()
      inNs(ns, 'iptables-restore', [], kubeProxyRules(node, this.services, this.pods, faults))
      if (this.dualStack) inNs(ns, 'ip6tables-restore', [], kubeProxyRules(node, this.services, this.pods, faults6, 6))
    }
    const foreign = this.foreignRules.get(nodeName)
    if (foreign) inNs(ns, 'iptables-restore', ['--noflush'], foreignFilterRules(foreign))
    // Old connections keep their old NAT decision: start every scenario from a clean table, as a reboot would.
    if (this.keepConntrack) return
    tryRun('ip', ['netns', 'exec', this.nodeNs(node), 'conntrack', '-F'])
    if (this.dualStack) tryRun('ip', ['netns', 'exec', this.nodeNs(node), 'conntrack', '-F', '-f', 'ipv6'])
  }

  setMode(nodeName: string, mode: 'iptables' | 'nftables'): void {
    this.modes.set(nodeName, mode)
    this.applyRules(nodeName, {})
    this.setKubeProxy(nodeName, {mode})
  }

  private kubeProxyState(nodeName: string): string {
    return join(this.dir, `kube-proxy-${nodeName}.json`)
  }

  /** What the node's kube-proxy endpoints answer (a stand-in serving on the node's loopback). */
  setKubeProxy(nodeName: string, change: Partial<FakeKubeProxyState>): void {
    const file = this.kubeProxyState(nodeName)
    let cur: FakeKubeProxyState
    try {
      cur = JSON.parse(readFileSync(file, 'utf8')) as FakeKubeProxyState
    } catch {
      const now = Math.floor(Date.now() / 1000)
      cur = {mode: 'iptables', healthy: true, lastSync: now, lastQueued: now, restoreFailures: 0}
    }
    writeFileSync(file, JSON.stringify({...cur, ...change}))
  }

  private startKubeProxy(node: LabNode): void {
    this.setKubeProxy(node.name, {})
    const script = join(fileURLToPath(new URL('.', import.meta.url)), 'fake-kube-proxy.js')
    this.procs.push(
      startDaemon(
        'ip',
        ['netns', 'exec', this.nodeNs(node), process.execPath, script, this.kubeProxyState(node.name)],
        this.logs,
      ),
    )
  }

  clearFaults(): void {
    for (const node of NODES) this.applyRules(node.name, {}, {})
  }

  setPodReady(name: string, ready: boolean): void {
    this.pods.find((p) => p.name === name)!.ready = ready
    this.publish()
    for (const node of NODES) this.applyRules(node.name)
  }

  /** Serves the lab's current state from the API server. */
  publish(): void {
    this.api.set(
      'nodes',
      NODES.map((n) => nodeObject(this.node(n))),
    )
    this.api.set('pods', [
      ...this.pods.map(podObject),
      ...NODES.map((n) => kubeProxyPodObject(n.name, this.kubeProxyPodReady.get(n.name) ?? true)),
    ])
    this.api.set('services', this.services.map(serviceObject))
    this.api.set(
      'endpointslices',
      this.services.flatMap((s) => [
        endpointSliceObject(s, this.pods),
        ...(s.clusterIP6 ? [endpointSliceObject(s, this.pods, 6)] : []),
      ]),
    )
    this.api.set('configmaps', [kubeProxyConfigMap()])
    this.api.set('daemonsets', [kubeProxyDaemonSetObject()])
    this.api.set(
      'namespaces',
      ['default', 'shop', 'kube-system'].map((name) => ({metadata: {name}})),
    )
  }

  private readonly sshd = new Map<string, ChildProcess>()

  /** (Re)starts a node's sshd, inside the node's namespace; `forwarding` false refuses port forwards. */
  startSshd(node: LabNode, forwarding: boolean): void {
    this.sshd.get(node.name)?.kill('SIGKILL')
    // Every command a client sends goes through the logging wrapper first (port forwards are not commands).
    const cfg = writeSshdConfig(this.dir, node.key, {forwarding, forceCommand: `${this.commandLogger} ${node.name}`})
    // `ip netns exec` runs sshd in its own mount namespace (a slave of the host's): the bind mount of the lab's cache
    // folder over /var/lib/cni/results is seen by this node's sshd and its commands only, and the tool reads the real
    // path. The mount point is created on the host when missing (an empty folder, left in place: another lab may use it).
    const bindCniCache =
      'mkdir -p /var/lib/cni/results && mount --bind "$1" /var/lib/cni/results || echo "lab: no CNI result cache for this node" >&2'
    const proc = startSshdInNs(this.nodeNs(node), cfg, this.logs, {
      script: bindCniCache,
      args: [this.cniResultsDir(node)],
    })
    this.sshd.set(node.name, proc)
    this.procs.push(proc)
  }

  /** Restarts a node's sshd and waits (bounded) until it answers. */
  async restartSshd(nodeName: string, forwarding: boolean): Promise<void> {
    await stopAndWait(this.sshd.get(nodeName))
    this.startSshd(
      NODES.find((n) => n.name === nodeName)!,
      forwarding,
    )
    for (let i = 0; i < 50; i++) {
      if (
        tryRun(
          'ssh',
          ['-F', this.sshConfigPath, '-o', 'BatchMode=yes', '-o', 'ConnectTimeout=2', nodeName, 'true'],
          undefined,
          5000,
        ).code === 0
      )
        return
      await sleep(100)
    }
    throw new Error(`sshd on ${nodeName} did not come back`)
  }

  private get commandLogger(): string {
    return join(this.dir, 'log-command.sh')
  }

  /** The commands each node's sshd was asked to run, one per line, in arrival order. */
  commandLog(nodeName: string): string[] {
    const file = join(this.dir, `commands-${nodeName}.log`)
    return existsSync(file) ? readFileSync(file, 'utf8').split('\n').slice(0, -1) : []
  }

  clearCommandLogs(): void {
    for (const node of NODES) rmSync(join(this.dir, `commands-${node.name}.log`), {force: true})
  }

  private async startSsh(): Promise<void> {
    writeFileSync(
      this.commandLogger,
      [
        '#!/bin/sh',
        `printf '%s\\n' "$SSH_ORIGINAL_COMMAND" >> ${this.dir}/commands-"$1".log`,
        'if [ -z "${SSH_ORIGINAL_COMMAND+set}" ]; then exec "${SHELL:-/bin/sh}" -l; fi',
        'exec "${SHELL:-/bin/sh}" -c "$SSH_ORIGINAL_COMMAND"',
        '',
      ].join('\n'),
      {mode: 0o755},
    )
    const key = labClientKey(this.dir)
    const known: string[] = []
    const config: string[] = []
    for (const node of NODES) {
      const pub = labHostKey(this.dir, node.key)
      this.startSshd(node, true)
      const {port, proc} = await startSshRelay(this.dir, node.key, this.nodeNs(node), this.logs)
      this.sshPorts.set(node.name, port)
      this.procs.push(proc)
      // node-a is looked up as [127.0.0.1]:port, node-b through HostKeyAlias: both ways OpenSSH finds keys.
      known.push(node.key === 'a' ? `[127.0.0.1]:${port} ${pub}` : `${node.name} ${pub}`)
      config.push(
        // node-a's dumps come back through gzip (OpenSSH's knob for slow links), node-b's plain: every lab run reads both ways.
        ...sshClientHost({
          name: node.name,
          port,
          identity: key,
          knownHosts: join(this.dir, 'known_hosts'),
          hostKeyAlias: node.key === 'a' ? undefined : node.name,
          compression: node.key === 'a',
        }),
      )
    }
    writeFileSync(join(this.dir, 'known_hosts'), known.join('\n') + '\n')
    this.sshConfigPath = join(this.dir, 'ssh_config')
    writeFileSync(this.sshConfigPath, config.join('\n'))
  }

  /** Bounded wait until sshd, the relays, the web servers and DNS answer. */
  private async waitForServers(): Promise<void> {
    for (let i = 0; i < 50; i++) {
      const sshOk = NODES.every(
        (n) =>
          tryRun(
            'ssh',
            ['-F', this.sshConfigPath, '-o', 'BatchMode=yes', '-o', 'ConnectTimeout=2', n.name, 'true'],
            undefined,
            5000,
          ).code === 0,
      )
      const webOk = this.pods
        .filter((p) => p.kind === 'web')
        .every((p) => this.connect(this.podNs('client-a'), p.ip, p.port).startsWith(`${p.reply} `))
      // The kubelet's readiness probes come from the node: the node then knows each local pod's MAC.
      const probesOk = this.pods
        .filter((p) => p.kind === 'web')
        .every((p) => this.connect(this.nodeNs(p.node), p.ip, p.port).startsWith(`${p.reply} `))
      if (sshOk && webOk && probesOk) return
      await sleep(200)
    }
    throw new Error(`lab did not come up: ${this.logs.slice(-5).join(' | ')}`)
  }

  /** One TCP connection from a namespace; returns what the server said ("pod peer-address"), or "" on failure. */
  connect(fromNs: string, ip: string, port: number, timeoutS = 2): string {
    const r = this.probe(fromNs, ip, port, timeoutS)
    return r.kind === 'answer' ? r.text : ''
  }

  /** One TCP connection, classified: an answer, refused at once (RST or ICMP unreachable), or nothing in time. */
  probe(
    fromNs: string,
    ip: string,
    port: number,
    timeoutS: number,
  ): {kind: 'answer'; text: string} | {kind: 'refused' | 'timeout'} {
    const r = tryRun(
      'ip',
      [
        'netns',
        'exec',
        fromNs,
        'socat',
        `-T${timeoutS}`,
        '-u',
        `TCP:${ip.includes(':') ? `[${ip}]` : ip}:${port},connect-timeout=${timeoutS}`,
        'STDOUT',
      ],
      undefined,
      (timeoutS + 3) * 1000,
    )
    if (r.code === 0 && r.stdout.trim()) return {kind: 'answer', text: r.stdout.trim()}
    return /refused/i.test(r.stderr) ? {kind: 'refused'} : {kind: 'timeout'}
  }

  /** `tries` connections (bounded); returns which pod answered each one ("" for a failure). */
  sample(fromNs: string, ip: string, port: number, tries: number, timeoutS = 1): string[] {
    return Array.from({length: tries}, () => this.connect(fromNs, ip, port, timeoutS).split(' ')[0])
  }

  down(): void {
    for (const p of this.procs) p.kill('SIGKILL')
    for (const ns of this.namespaces) {
      const pids = tryRun('ip', ['netns', 'pids', ns]).stdout.split('\n').filter(Boolean)
      for (const pid of pids) tryRun('kill', ['-9', pid])
    }
    for (const ns of [...this.namespaces].reverse()) tryRun('ip', ['netns', 'del', ns])
    void this.api.stop()
    rmSync(this.dir, {recursive: true, force: true})
    rmSync(this.api.dir, {recursive: true, force: true})
  }
}
