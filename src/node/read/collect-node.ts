import {errorRecording, isNftJson, NODE_FILES, type NodeFile, type NodeRecording} from './node-files.js'
import {parseNodeRecording} from './recording.js'
import type {NodeObservation} from '../observation.js'
import type {DnsRecordType} from '../../parse/dns-lookup.js'
import {queryOverStream, type DnsAnswer, type DnsRecordAnswer} from '../probe/dns-probe.js'
import {httpGetOnNode} from '../probe/http-on-node.js'
import {parseHealthz, parseMetrics, type KubeProxyStatus} from '../../parse/kube-proxy-status.js'
import {tcpOpener, wrapAccess, type NodeAccess, type RunResult} from '../transport/node-access.js'
import {
  BACKEND_SAVES,
  commandWords,
  NODE_READS,
  type ArgsOf,
  type NodeCommandKey,
  type RecordedKey,
} from './node-reads.js'
import {buildCommandLine, DUMP_STEPS, programOf, toolMissing} from '../node-commands.js'
import {
  isInterfaceName,
  NFT_KUBE_PROXY_FAMILIES,
  type NftKubeProxyFamily,
  type ConntrackProtocol,
} from './command-arguments.js'
import {parseIp} from '../../net/address.js'
import {backendNamedBy} from '../../parse/iptables-save.js'
import {sectionNotReadLine} from '../../parse/not-read-mark.js'
import type {RawCommandOutput, RawPathReads} from './path-reads.js'
import {mapBounded} from '../../util/map-bounded.js'
import {readScopedRules, type RulesScope} from './scoped-rules.js'
import {Slots} from '../../util/slots.js'

interface DnsQuestion {
  name: string
  server: string
  /** A for an IPv4 ClusterIP, AAAA for an IPv6 one (default: A). */
  types?: DnsRecordType[]
}

/** The Service's addresses the packet-path reads look at. */
export interface PathTargets {
  /** Endpoint IPs: `ip route get` for each. */
  endpointAddresses: string[]
  /** ClusterIPs with the protocols of the Service's ports: `conntrack -L -p PROTOCOL -d ADDRESS` for each pair. */
  serviceAddresses: Array<{address: string; protocol: ConntrackProtocol}>
}

export interface CollectOptions {
  /** Per operation (a dump: DUMP_STEPS of it); the whole node gets NODE_STEPS of it. */
  timeoutMs: number
  dns?: DnsQuestion
  /** When given, the packet-path reads (sysctls, routes, conntrack) are made for these addresses. */
  path?: PathTargets
  /** --proxy-mode: trusted over kube-proxy's /proxyMode when deciding how much of nft to read. */
  proxyMode?: string
  /**
   * The mode kube-proxy's ConfigMap names. Where it is iptables or ipvs, `nft list sets` is asked with the first round
   * of reads rather than after /proxyMode answers (and not used where the node turns out to run nftables mode, whose
   * sets may be large: there it is never asked for otherwise).
   */
  configuredProxyMode?: string
  /**
   * Read only the iptables chains these packets can reach, chain by chain, where the node is read as root (else, or
   * when the read cannot be scoped, the whole dump as always).
   */
  rulesScope?: RulesScope
  /**
   * svc --watch: this node's previous recording. Only what kube-proxy (or the implementer) reprograms is read again:
   * the rules of every backend, and conntrack; the rest is kept from it (kube-proxy's answers, the network, the IPVS
   * sysctls; the path reads and DNS while they are asked for the same addresses and name).
   */
  keep?: NodeRecording
}

/** The reads a node's previous recording answers in a rules-only read (`keep`), by the files they recorded. */
const KEPT_FILES = [NODE_FILES.network, NODE_FILES.cniResults, NODE_FILES.sysctl] as const

/** Route lookups per node: every endpoint of a big Service, bounded for a huge one (the rest is said to be skipped). */
const MAX_ROUTE_LOOKUPS = 256
const LOOKUP_CONCURRENCY = 4
/** How long one DNS question over TCP may wait for its answer. */
const DNS_ANSWER_MS = 3000

/** One node's reads: the raw outputs (what `collect` writes) and what they parse to (what `svc` judges). */
export interface NodeCollection {
  observation: NodeObservation
  recording: NodeRecording
}

/** Reads one node through whatever transport `connect` opens; every read stays in memory. Never throws. */
export async function collectNode(
  name: string,
  connect: () => Promise<NodeAccess>,
  opts: CollectOptions,
): Promise<NodeCollection> {
  let access: NodeAccess | undefined
  let timer: NodeJS.Timeout | undefined
  const deadlineMs = opts.timeoutMs * NODE_STEPS
  const running: Running = new Set()
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new Error(
            access
              ? `node did not finish its reads within ${deadlineMs / 1000}s${stillRunning(running)}`
              : `node did not answer within ${deadlineMs / 1000}s`,
          ),
        ),
      deadlineMs,
    )
  })
  let recording: NodeRecording
  try {
    recording = await Promise.race([
      (async () => {
        access = await connect()
        return readAll(gated(access, COMMANDS_AT_ONCE, running), opts)
      })(),
      deadline,
    ])
  } catch (e) {
    recording = errorRecording((e as Error).message)
  } finally {
    clearTimeout(timer)
    await access?.close()
  }
  return {observation: parseNodeRecording(name, recording), recording}
}

const ranOk = (r: RunResult): r is Extract<RunResult, {kind: 'ran'}> => r.kind === 'ran' && r.code === 0

async function readAll(access: NodeAccess, opts: CollectOptions): Promise<NodeRecording> {
  const rec: NodeRecording = new Map()
  const record = (cmd: RecordedKey, out: Buffer) => rec.set(NODE_READS[cmd].recorded.file, out)
  // The reads depend on little of each other: they run at once, each on its own channel, so a node's read takes about
  // as long as its largest dump. Through sudo the privileged ones wait for iptables-save: where sudo wants a password,
  // one attempt fails (and is logged on the node), not ten.
  const keep = opts.keep
  const kept = <T>(file: NodeFile): T | undefined => {
    const out = keep?.get(file)
    return out && (JSON.parse(out.toString('utf8')) as T)
  }
  // kube-proxy is asked (through a stream, no sudo) while `id -u` runs: where /proxyMode answers first, the nft read it
  // decides goes with the first round of reads, not in a round of its own.
  const keptStatus = kept<KubeProxyStatus>(NODE_FILES.kubeProxy)
  const kubeProxy = keptStatus
    ? {proxyMode: Promise.resolve(keptStatus.proxyMode), status: Promise.resolve(keptStatus)}
    : askKubeProxy(access, opts.timeoutMs)
  const sudo = (await access.usesSudo?.()) ?? false
  const rules4 = readRules(access, 4, sudo ? undefined : opts.rulesScope)
  const save = rules4.rules
  const privileged = sudo
    ? save.then((r) => {
        if (r.kind === 'ran' && r.code !== 0) throw new Error('iptables-save failed: no other privileged read')
      })
    : Promise.resolve()
  if (keep) for (const file of KEPT_FILES) if (keep.has(file)) rec.set(file, keep.get(file)!)
  const keptPath = kept<RawPathReads>(NODE_FILES.pathReads)
  const pathReads = !opts.path
    ? undefined
    : keptPath && sameTargets(keptPath, opts.path)
      ? readConntrack(access, opts.path, privileged).then((conntrack) => ({...keptPath, conntrack}))
      : readPath(access, opts.path, privileged)
  const keptDns = kept<DnsAnswer>(NODE_FILES.dns)
  const dns = !opts.dns
    ? undefined
    : keptDns && keptDns.name === opts.dns.name && keptDns.server === opts.dns.server
      ? Promise.resolve(keptDns)
      : askDns(access, opts.dns, opts.timeoutMs)
  const network = keep ? Promise.resolve() : readNetwork(access, record, privileged)
  // IPv6 rules: recorded where ip6tables-save answers; a node without it has its IPv6 family said to be unchecked.
  // Each family's backend saves follow that family's save (its header says which backend it already is), or start
  // as soon as `iptables -V` names the backend: IPv6's need not wait for a large iptables-save.
  // A backend save that could not run is said as not read (its #kpd-not-read line), never as a backend with no rules.
  const backendsNotRead = new Map<RecordedKey, string>()
  const backendNotRead = (cmd: RecordedKey, line: string) => backendsNotRead.set(cmd, line)
  const saves6 = async () => {
    const rules6 = readRules(access, 6, sudo ? undefined : opts.rulesScope)
    const recorded = rules6.rules.then((save6) => {
      if (ranOk(save6)) record('ip6tablesSave', save6.stdout)
    })
    await Promise.all([recorded, readBackendSaves(access, record, backendNotRead, 6, rules6)])
  }
  const dumps = privileged.then(() =>
    Promise.all([
      saves6(),
      readBackendSaves(access, record, backendNotRead, 4, rules4),
      readNft(access, record, kubeProxy.proxyMode, opts).then((failed) => {
        if (failed) rec.set(NODE_FILES.nftNotRead, Buffer.from(failed + '\n'))
      }),
      readIpvs(access, record, !keep),
    ]),
  )
  // Whatever fails after the first throw is not waited for (the node's error is the first one).
  for (const p of [privileged, pathReads, dns, network, dumps]) p?.catch(() => undefined)
  const saved = await save
  if (saved.kind === 'ran') {
    if (saved.code !== 0) {
      if (/password is required|a terminal is required/.test(saved.stderr))
        throw new Error(
          'sudo on the node wants a password: allow "sudo -n iptables-save" for the SSH user, or log in as root',
        )
      throw new Error(`iptables-save exited ${saved.code}: ${saved.stderr.trim().split('\n')[0] || 'no message'}`)
    }
    record('iptablesSave', saved.stdout)
  }
  await Promise.all([dumps, network])
  const notRead = BACKEND_SAVES.flatMap((b) => backendsNotRead.get(b.command) ?? [])
  if (notRead.length > 0) rec.set(NODE_FILES.backendsNotRead, Buffer.from(notRead.map((l) => l + '\n').join('')))
  const json2 = (v: unknown) => Buffer.from(JSON.stringify(v, null, 2) + '\n')
  if (pathReads) rec.set(NODE_FILES.pathReads, json2(await pathReads))
  if (dns) rec.set(NODE_FILES.dns, json2(await dns))
  rec.set(NODE_FILES.kubeProxy, json2(await kubeProxy.status))
  return rec
}

/** One family's rules, and the iptables backend that answers them where `iptables -V` was asked (else undefined). */
interface FamilyRules {
  rules: Promise<RunResult>
  backend: Promise<'legacy' | 'nft' | undefined>
}

/** One family's rules: chain by chain where a scope is given and the read can be scoped, else the whole dump. */
function readRules(access: NodeAccess, family: 4 | 6, scope: RulesScope | undefined): FamilyRules {
  const dump = () => access.run(family === 6 ? 'ip6tablesSave' : 'iptablesSave')
  if (!scope) return {rules: dump(), backend: Promise.resolve(undefined)}
  const versionRead = family === 6 ? 'ip6tablesVersion' : 'iptablesVersion'
  const version = access.run(versionRead)
  const rules = readScopedRules(access, family, scope, version).then((scoped) =>
    scoped.kind === 'read' ? ({kind: 'ran', code: 0, stdout: scoped.dump, stderr: ''} as const) : dump(),
  )
  const backend = version.then((v) => {
    if (!ranOk(v)) return undefined
    const {line, nfTables} = NODE_READS[versionRead].parse(v.stdout.toString('utf8'))
    return nfTables ? 'nft' : /\(legacy\)/.test(line) ? 'legacy' : undefined
  })
  backend.catch(() => undefined)
  return {rules, backend}
}

/**
 * One family's backend saves, where the node has both tools. The family's save whose header names its backend
 * ("v1.8.9 (nf_tables)") is that backend's dump: not read a second time (on a large node each read costs seconds). The
 * other backend's save starts as soon as `iptables -V` (`ip6tables -V`) has named the family's own backend, beside
 * the family's own read, not after it. A save that could not run goes to `notRead` as its #kpd-not-read line.
 */
async function readBackendSaves(
  access: NodeAccess,
  record: (cmd: RecordedKey, out: Buffer) => void,
  notRead: (cmd: RecordedKey, line: string) => void,
  family: 4 | 6,
  {rules, backend: named}: FamilyRules,
): Promise<void> {
  const ownBackend = await named
  await Promise.all(
    BACKEND_SAVES.filter((b) => b.family === family).map(async ({backend, command: cmd}) => {
      const own = ownBackend === undefined || ownBackend === backend ? await rules : undefined
      if (
        own &&
        ranOk(own) &&
        backendNamedBy(/^# Generated by .*$/m.exec(own.stdout.toString('latin1', 0, 512))?.[0] ?? '') === backend
      )
        return record(cmd, own.stdout)
      const r = await access.run(cmd)
      if (ranOk(r) && r.stdout.length > 0) record(cmd, r.stdout)
      else if (r.kind === 'ran' && r.code !== 0) notRead(cmd, sectionNotReadLine(r.code, commandWords(cmd)!, r.stderr))
    }),
  )
}

/**
 * Commands one node runs at once: OpenSSH allows 10 sessions per connection (MaxSessions), and a node's CPU is
 * shared with its workloads.
 */
const COMMANDS_AT_ONCE = 6

/** A whole node's reads may take this many steps: its largest dump (DUMP_STEPS), and the rest around it. */
const NODE_STEPS = DUMP_STEPS + 2

/** The commands under way: each key with its arguments, and since when. */
type Running = Set<{key: NodeCommandKey; args: unknown[]; since: number}>

/** The commands running when the node's deadline passed, by their allow-listed form, with how long each had run. */
function stillRunning(running: Running): string {
  if (running.size === 0) return ''
  const now = performance.now()
  const named = [...running].map(({key, args, since}) => {
    const line: string = buildCommandLine(key, true, ...(args as ArgsOf<typeof key>))
    return `${line.length <= 60 ? line : programOf(line)} for ${((now - since) / 1000).toFixed(0)}s`
  })
  return ` (still running: ${named.join(', ')})`
}

/**
 * The access with at most `limit` commands running at once; the rest wait their turn (streams and files are not held
 * back; nor the reads of an access that batches them: the ones asked for at once are one command on the node).
 * `running` holds the commands under way.
 */
function gated(access: NodeAccess, limit: number, running: Running): NodeAccess {
  const slots = new Slots(limit)
  const tracked: NodeAccess['run'] = async (key, ...args) => {
    const entry = {key, args, since: performance.now()}
    running.add(entry)
    try {
      return await access.run(key, ...args)
    } finally {
      running.delete(entry)
    }
  }
  const run: NodeAccess['run'] = (key, ...args) =>
    access.batchesReads ? tracked(key, ...args) : slots.run(() => tracked(key, ...args))
  return wrapAccess(access, {run})
}

/**
 * nftables: kube-proxy's nftables mode, and leftovers of it; a node without nft simply has none. Listing the whole
 * ruleset of a large iptables-nft node takes minutes (every xtables rule is translated), while kube-proxy's own tables
 * answer at once: the whole ruleset is read only where nftables mode may run (other tables drop packets too).
 * Where that mode may run and nft could not answer (not on the host: kube-proxy's image carries its own), the
 * #kpd-not-read line that says so; never an empty ruleset.
 */
async function readNft(
  access: NodeAccess,
  record: (cmd: RecordedKey, out: Buffer) => void,
  proxyMode: Promise<string | undefined>,
  opts: CollectOptions,
): Promise<string | undefined> {
  const sets =
    opts.proxyMode === undefined && (opts.configuredProxyMode === 'iptables' || opts.configuredProxyMode === 'ipvs')
      ? access.run('nftSets')
      : undefined
  sets?.catch(() => undefined)
  const mode = opts.proxyMode ?? (await proxyMode)
  const own = mode === 'nftables' ? undefined : await readKubeProxyTables(access, sets)
  if (own !== undefined && (mode === 'iptables' || mode === 'ipvs' || own.length === 0))
    record('nftKubeProxyTable', own)
  // Where the whole ruleset cannot be listed, kube-proxy's own tables are still what was read.
  else {
    const ruleset = await readRuleset(access, record)
    if (ruleset === 'read') return undefined
    if (own !== undefined) record('nftKubeProxyTable', own)
    else if (mode !== 'iptables' && mode !== 'ipvs' && ruleset.kind === 'ran')
      return sectionNotReadLine(ruleset.code, commandWords('nftRuleset')!, ruleset.stderr)
  }
  return undefined
}

/** IPVS mode: recorded only where ipvsadm answers (IPVS nodes); the rest goes with it (its sysctls where asked). */
async function readIpvs(
  access: NodeAccess,
  record: (cmd: RecordedKey, out: Buffer) => void,
  sysctls: boolean,
): Promise<void> {
  const ipvs = await access.run('ipvsadm')
  if (!ranOk(ipvs)) return
  record('ipvsadm', ipvs.stdout)
  const reads = sysctls ? (['ipsetSave', 'kubeIpvs0', 'sysctls'] as const) : (['ipsetSave', 'kubeIpvs0'] as const)
  for (const [cmd, r] of await Promise.all(reads.map(async (cmd) => [cmd, await access.run(cmd)] as const)))
    if (r.kind === 'ran' && r.stdout.length > 0) record(cmd, r.stdout)
    // A sysctl that printed nothing (not on the node, or failing) is recorded as not read, never as no sysctls.
    else if (cmd === 'sysctls' && r.kind === 'ran' && r.code !== 0)
      record(cmd, Buffer.from(sectionNotReadLine(r.code, 'sysctl', r.stderr) + '\n'))
}

/** Bridges, links, neighbours, the fdb; and libcni's result cache (root only: after `privileged`) where the network was read. */
async function readNetwork(
  access: NodeAccess,
  record: (cmd: RecordedKey, out: Buffer) => void,
  privileged: Promise<void>,
): Promise<void> {
  // Both at once (one round of reads, not two); the cache is kept only where the network was read.
  const cniRead = privileged.then(() => access.run('cniResults'))
  cniRead.catch(() => undefined)
  const net = await access.run('network')
  if (net.kind !== 'ran') return
  record('network', net.stdout)
  // grep: 0 lines found, 1 an empty cache; 2 (no such folder, no sudo) leaves it unrecorded, as not read.
  const cni = await cniRead
  if (cni.kind === 'ran' && (cni.code === 0 || cni.code === 1)) record('cniResults', cni.stdout)
}

/**
 * The whole nft ruleset: JSON first (the stable machine format); the text form where this nft has no -j. 'read', or
 * the text form's answer where it failed.
 */
async function readRuleset(
  access: NodeAccess,
  record: (cmd: RecordedKey, out: Buffer) => void,
): Promise<'read' | RunResult> {
  const json = await access.run('nftRulesetJson')
  if (ranOk(json) && isNftJson(json.stdout)) {
    record('nftRulesetJson', json.stdout)
    return 'read'
  }
  const text = await access.run('nftRuleset')
  if (!ranOk(text)) return text
  record('nftRuleset', text.stdout)
  return 'read'
}

/** nft's answer for a table that is not there. */
const tableAbsent = (r: RunResult) => r.kind === 'ran' && r.code !== 0 && /No such file or directory/.test(r.stderr)

/**
 * kube-proxy's tables of both families as one ruleset (JSON where this nft has -j, else text); a family without its
 * table adds nothing. Undefined when nft could not answer (no nft, no permission): the whole ruleset is tried instead.
 */
async function readKubeProxyTables(access: NodeAccess, sets?: Promise<RunResult>): Promise<Buffer | undefined> {
  const families = await kubeProxyTableFamilies(access, sets)
  if (families?.length === 0) return Buffer.alloc(0)
  for (const json of [true, false]) {
    const answers = await Promise.all(
      (families ?? NFT_KUBE_PROXY_FAMILIES).map((family) => access.run('nftKubeProxyTable', {family, json})),
    )
    if (answers.some((r) => r.kind === 'ran' && toolMissing(r))) return undefined
    const tables = answers.filter((r) => !tableAbsent(r))
    // Both families answered (a table or its absence): the read is whole.
    if (tables.every((r) => ranOk(r) && (!json || isNftJson(r.stdout)))) {
      const outs = tables.map((r) => (r as Extract<RunResult, {kind: 'ran'}>).stdout)
      return json ? mergeJsonRulesets(outs) : Buffer.concat(outs)
    }
  }
  return undefined
}

/**
 * The families whose kube-proxy table `nft list sets` (asked already: `sets`) shows; undefined when it did not answer
 * (then each is listed).
 */
async function kubeProxyTableFamilies(
  access: NodeAccess,
  sets?: Promise<RunResult>,
): Promise<NftKubeProxyFamily[] | undefined> {
  const r = await (sets ?? access.run('nftSets'))
  if (!ranOk(r)) return undefined
  const tables = NODE_READS.nftSets.parse(r.stdout.toString('utf8'))
  return NFT_KUBE_PROXY_FAMILIES.filter((family) => tables.some((t) => t.family === family && t.name === 'kube-proxy'))
}

/** Several `nft -j` documents as one: their objects in order, the first metainfo kept. */
function mergeJsonRulesets(outs: Buffer[]): Buffer {
  if (outs.length <= 1) return outs[0] ?? Buffer.alloc(0)
  const objects = outs.flatMap((out, i) => {
    let list: unknown[]
    try {
      list = (JSON.parse(out.toString('utf8')) as {nftables?: unknown[]}).nftables ?? []
    } catch (e) {
      throw new Error(`nft -j list table answered no JSON: ${(e as Error).message}`, {cause: e})
    }
    return i === 0 ? list : list.filter((o) => !(typeof o === 'object' && o !== null && 'metainfo' in o))
  })
  return Buffer.from(JSON.stringify({nftables: objects}) + '\n')
}

function raw(r: RunResult): RawCommandOutput {
  if (r.kind === 'not-recorded') return {code: null, stdout: '', stderr: '', notRead: r.what}
  return {code: r.code, stdout: r.stdout.toString('utf8'), stderr: r.stderr}
}

/** Distinct valid addresses in their canonical spelling, in first-seen order. */
function distinctAddresses(list: string[]): string[] {
  return [...new Set(list.map((a) => parseIp(a)?.text).filter((a): a is string => a !== undefined))]
}

/**
 * The route tables (IPv6's where the Service has IPv6 addresses) and the route to each endpoint, then the sysctls of
 * the interfaces those routes use; beside them, conntrack for the Service's addresses (after `privileged`). Whatever
 * does not wait for another read is asked for at once: one round of reads (one batch over SSH), not one per read.
 */
async function readPath(access: NodeAccess, targets: PathTargets, privileged: Promise<void>): Promise<RawPathReads> {
  const endpoints = distinctAddresses(targets.endpointAddresses)
  const ipv6 = [...endpoints, ...targets.serviceAddresses.map((s) => s.address)].some((a) => parseIp(a)?.family === 6)
  const looked = endpoints.slice(0, MAX_ROUTE_LOOKUPS)
  const interfaces = new Set<string>()
  const routeTable = access.run('routeTable').then(raw)
  const routeTable6 = ipv6 ? access.run('routeTable6').then(raw) : undefined
  // An access that batches the reads asked for at once runs them all in one command: no need to hold any back.
  const routeGets = mapBounded(
    looked,
    access.batchesReads ? Math.max(1, looked.length) : LOOKUP_CONCURRENCY,
    async (address) => {
      const r = raw(await access.run('routeGet', {address}))
      if (r.code === 0) {
        try {
          const dev = NODE_READS.routeGet.parse(r.stdout).dev
          if (dev && isInterfaceName(dev)) interfaces.add(dev)
        } catch {
          // Recorded raw: the parse failure is reported for this lookup.
        }
      }
      return {address, ...r}
    },
  )
  const sysctls = routeGets.then(async () =>
    raw(await access.run('pathSysctls', {interfaces: [...interfaces].sort(), ipv6})),
  )
  const conntrack = readConntrack(access, targets, privileged)
  for (const p of [routeTable, routeTable6, routeGets, sysctls, conntrack]) p?.catch(() => undefined)
  const out: RawPathReads = {routeGet: [], conntrack: []}
  out.routeTable = await routeTable
  if (routeTable6) out.routeTable6 = await routeTable6
  if (endpoints.length > looked.length)
    out.skipped = [
      `ip route get: ${endpoints.length - looked.length} of ${endpoints.length} endpoint addresses not looked up (at most ${MAX_ROUTE_LOOKUPS} per node)`,
    ]
  out.routeGet = await routeGets
  out.sysctls = await sysctls
  out.conntrack.push(...(await conntrack))
  return out
}

/** Each distinct ClusterIP (canonical spelling) with each protocol: what conntrack is asked for. */
function conntrackPairs(targets: PathTargets): Array<{protocol: ConntrackProtocol; address: string}> {
  const pairs = new Map<string, {protocol: ConntrackProtocol; address: string}>()
  for (const {address, protocol} of targets.serviceAddresses) {
    const ip = parseIp(address)?.text
    if (ip && !pairs.has(`${protocol} ${ip}`)) pairs.set(`${protocol} ${ip}`, {protocol, address: ip})
  }
  return [...pairs.values()]
}

/** conntrack's entries for the Service's addresses; it needs root: it waits for the first privileged read to pass. */
function readConntrack(access: NodeAccess, targets: PathTargets, privileged: Promise<void>) {
  return privileged.then(() =>
    Promise.all(
      conntrackPairs(targets).map(async ({protocol, address}) => ({
        protocol,
        address,
        ...raw(await access.run('conntrackList', {protocol, address})),
      })),
    ),
  )
}

/** Whether recorded path reads looked up exactly these targets' routes and conntrack entries. */
function sameTargets(recorded: RawPathReads, targets: PathTargets): boolean {
  const same = (a: string[], b: string[]) => a.length === b.length && a.every((x, i) => x === b[i])
  return (
    same(
      recorded.routeGet.map((r) => r.address),
      distinctAddresses(targets.endpointAddresses).slice(0, MAX_ROUTE_LOOKUPS),
    ) &&
    same(
      recorded.conntrack.map((c) => `${c.protocol} ${c.address}`),
      conntrackPairs(targets).map((c) => `${c.protocol} ${c.address}`),
    )
  )
}

/**
 * kube-proxy's own view: /proxyMode and /metrics on 127.0.0.1:10249, /healthz on :10256 (the defaults). The mode as
 * soon as it answers (the nft read waits for it), the whole status after. Never rejects.
 */
function askKubeProxy(
  access: NodeAccess,
  timeoutMs: number,
): {proxyMode: Promise<string | undefined>; status: Promise<KubeProxyStatus>} {
  const get = (port: number, path: string) => httpGetOnNode(tcpOpener(access, timeoutMs), port, path, 3000)
  const mode = get(10249, '/proxyMode').then(
    (r): KubeProxyStatus => (r.status === 200 ? {proxyMode: r.body.trim()} : {proxyModeError: `HTTP ${r.status}`}),
    (e: Error): KubeProxyStatus => ({proxyModeError: e.message}),
  )
  return {proxyMode: mode.then((m) => m.proxyMode), status: mode.then((m) => askKubeProxyHealth(get, m))}
}

/** kube-proxy's /healthz and /metrics, after its mode. */
async function askKubeProxyHealth(
  get: (port: number, path: string) => ReturnType<typeof httpGetOnNode>,
  mode: KubeProxyStatus,
): Promise<KubeProxyStatus> {
  const out = {...mode}
  try {
    const r = await get(10256, '/healthz')
    out.healthz = parseHealthz(r.status, r.body)
  } catch (e) {
    out.healthzError = (e as Error).message
  }
  try {
    const r = await get(10249, '/metrics')
    if (r.status === 200) out.metrics = parseMetrics(r.body)
    else out.metricsError = `HTTP ${r.status}`
  } catch (e) {
    out.metricsError = (e as Error).message
  }
  return out
}

/**
 * Asks the DNS server for each record type over TCP through the transport (one stream per question, each bounded by
 * its own timeout), else with dig/nslookup on the node; each type's answer or failure is recorded on its own.
 */
async function askDns(access: NodeAccess, q: DnsQuestion, timeoutMs: number): Promise<DnsAnswer> {
  const base = {name: q.name, server: q.server}
  const types = q.types?.length ? q.types : (['A'] as DnsRecordType[])
  const viaTcp = `DNS over TCP through ${access.describe().tcpVia}`
  const answers: DnsRecordAnswer[] = []
  let fallbackWhy: string | undefined
  for (const type of types) {
    const opened = await access.openTcp(q.server, 53, timeoutMs)
    if (opened.kind !== 'open') {
      fallbackWhy = opened.reason
      break
    }
    try {
      answers.push({type, ...(await queryOverStream(opened.stream, q.name, type, DNS_ANSWER_MS))})
    } catch (e) {
      answers.push({type, addresses: [], error: (e as Error).message})
    }
  }
  if (fallbackWhy === undefined) return {...base, method: viaTcp, answers}
  if (answers.length > 0)
    return {
      ...base,
      method: viaTcp,
      answers: [...answers, ...types.slice(answers.length).map((type) => ({type, addresses: [], error: fallbackWhy}))],
    }
  for (const type of types) {
    const r = await access.run('dnsLookup', {name: q.name, server: q.server, type})
    if (r.kind === 'not-recorded') return {...base, method: 'none', answers: [], error: `${fallbackWhy}; and ${r.what}`}
    if (r.code === 127)
      return {
        ...base,
        method: 'none',
        answers: [],
        error: `${fallbackWhy}; and the node has neither dig nor nslookup: run "nslookup ${q.name} ${q.server}" there by hand`,
      }
    const addresses = NODE_READS.dnsLookup.parse(r.stdout.toString(), type)
    // dig +short prints nothing for a name without records of the type; only a failed run is an error.
    const error =
      addresses.length === 0 &&
      (r.code !== 0 || r.stderr.trim() || /;;|\*\*|server can't find/i.test(r.stdout.toString()))
        ? firstLine(r.stderr) || firstLine(r.stdout.toString()) || 'no answer'
        : undefined
    answers.push({type, addresses, ...(error ? {error} : {})})
  }
  return {...base, method: 'dig/nslookup on the node', answers}
}

const firstLine = (text: string) => text.trim().split('\n')[0] ?? ''
