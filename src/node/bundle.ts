import {existsSync, mkdirSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {BufferSource, type DumpSource} from '../parse/dump-source.js'
import {openRegularFile, readRegularFile} from '../parse/regular-file.js'
import {IptablesSave} from '../parse/iptables-save.js'
import {parseBridgeState, withCniResults, type BridgeState} from '../parse/bridge-state.js'
import {parseCniResults} from '../parse/cni-results.js'
import {NftRuleset} from '../parse/nft-ruleset.js'
import {parseNftDump} from '../parse/nft-dump.js'
import type {DnsAnswer, DnsRecordAnswer} from './dns-probe.js'
import type {KubeProxyStatus} from '../parse/kube-proxy-status.js'
import {IpsetState} from '../parse/ipset-save.js'
import {parseDeviceAddresses, parseIpvsadm, parseSysctl, type VirtualServer} from '../parse/ipvsadm.js'
import {BACKEND_SAVES, type NodeCommand} from './node-commands.js'
import {interpretPathReads, type PathObservation, type RawPathReads} from './path-reads.js'

/** The files one node's folder of a bundle holds. */
export const NODE_FILES = {
  iptablesSave: 'iptables-save.txt',
  ip6tablesSave: 'ip6tables-save.txt',
  nftRuleset: 'nft-ruleset.txt',
  /** Where nftables mode does not run: kube-proxy's own nft tables only (`nft list table ip|ip6 kube-proxy`), its leftovers. */
  nftKubeProxyTables: 'nft-kube-proxy-tables.txt',
  iptablesLegacySave: 'iptables-legacy-save.txt',
  iptablesNftSave: 'iptables-nft-save.txt',
  ip6tablesLegacySave: 'ip6tables-legacy-save.txt',
  ip6tablesNftSave: 'ip6tables-nft-save.txt',
  ipvsadm: 'ipvsadm.txt',
  ipset: 'ipset.txt',
  kubeIpvs0: 'kube-ipvs0.txt',
  sysctl: 'sysctl.txt',
  network: 'network.txt',
  /** libcni's result cache as `grep -r -H` printed it (pod IP → host veth). */
  cniResults: 'cni-results.txt',
  dns: 'dns.json',
  kubeProxy: 'kube-proxy.json',
  /** Packet-path reads (sysctls, routes, route lookups, conntrack), raw, with exit codes and stderr. */
  pathReads: 'path-reads.json',
  error: 'error.txt',
} as const

export type NodeFile = (typeof NODE_FILES)[keyof typeof NODE_FILES]

/** The file that records each command's raw output (both nft forms share one file; the content tells them apart). */
export const RECORDED_AS: Partial<Record<NodeCommand, NodeFile>> = {
  iptablesSave: NODE_FILES.iptablesSave,
  ip6tablesSave: NODE_FILES.ip6tablesSave,
  nftRulesetJson: NODE_FILES.nftRuleset,
  nftRuleset: NODE_FILES.nftRuleset,
  iptablesLegacySave: NODE_FILES.iptablesLegacySave,
  iptablesNftSave: NODE_FILES.iptablesNftSave,
  ip6tablesLegacySave: NODE_FILES.ip6tablesLegacySave,
  ip6tablesNftSave: NODE_FILES.ip6tablesNftSave,
  ipvsadm: NODE_FILES.ipvsadm,
  ipsetSave: NODE_FILES.ipset,
  kubeIpvs0: NODE_FILES.kubeIpvs0,
  sysctls: NODE_FILES.sysctl,
  network: NODE_FILES.network,
  cniResults: NODE_FILES.cniResults,
}

/** Whether recorded nft output is `nft -j` JSON (the nft files hold either form; the content tells them apart). */
export function isNftJson(out: Buffer): boolean {
  return out.toString('utf8', 0, Math.min(out.length, 64)).trimStart().startsWith('{')
}

/** One node's raw reads, in memory, by bundle file name: what `collect` writes and `--snapshot` reads back. */
export type NodeRecording = Map<NodeFile, Buffer>

export interface IpvsState {
  virtualServers: VirtualServer[]
  ipsets: IpsetState
  /** Addresses bound to kube-ipvs0; undefined when the device was not read. */
  vips?: string[]
  sysctls: Record<string, string>
}

export interface NodeObservation {
  name: string
  reachable: boolean
  error?: string
  iptables?: IptablesSave
  /** ip6tables-save: the IPv6 rules of a Service's IPv6 family (iptables and IPVS modes); undefined when not read. */
  ip6tables?: IptablesSave
  nft?: NftRuleset
  /** The nft read held only kube-proxy's tables (nftables mode does not run there): other tables were not read. */
  nftKubeProxyTablesOnly?: true
  /** Each family's two iptables backends read one by one, where the node has both tools: leftovers hide in the unused one. */
  backends?: Array<{family: 4 | 6; backend: 'legacy' | 'nft'; dump: IptablesSave}>
  /** IPVS mode: virtual servers, ipsets, addresses on kube-ipvs0, the sysctls it needs. */
  ipvs?: IpvsState
  network?: BridgeState
  dns?: DnsAnswer
  kubeProxy?: KubeProxyStatus
  /** Forwarding sysctls, routes to the endpoints, conntrack entries for the Service's addresses. */
  path?: PathObservation
}

/** After one Service of a scan is judged: each dump drops the parsed chains only that Service asked for. */
export function forgetOneOffChains(observations: NodeObservation[]): void {
  for (const o of observations) {
    o.iptables?.forgetOneOffChains()
    o.ip6tables?.forgetOneOffChains()
    for (const b of o.backends ?? []) b.dump.forgetOneOffChains()
  }
}

/** The recording of a node that could not be read: its first error line. */
export function errorRecording(message: string): NodeRecording {
  return new Map([[NODE_FILES.error, Buffer.from(message.split('\n')[0] + '\n')]])
}

function parseJson<T>(buf: Buffer | undefined): T | undefined {
  if (!buf) return undefined
  try {
    return JSON.parse(buf.toString('utf8')) as T
  } catch {
    return undefined
  }
}

/** A recorded JSON file is used only in the shape this tool writes it; anything else counts as not recorded. */
function shaped<T>(value: T | undefined, is: (v: unknown) => boolean): T | undefined {
  return value !== undefined && is(value) ? value : undefined
}

const optional = (v: unknown, type: 'string' | 'number' | 'boolean') => v === undefined || typeof v === type
const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

function isDnsRecordAnswer(v: unknown): boolean {
  return (
    isRecord(v) &&
    (v.type === 'A' || v.type === 'AAAA') &&
    Array.isArray(v.addresses) &&
    v.addresses.every((a) => typeof a === 'string') &&
    optional(v.rcode, 'string') &&
    optional(v.error, 'string')
  )
}

/**
 * A recorded dns.json as this tool reads it: one answer per record type asked. A bundle written before AAAA questions
 * holds one A answer at the top level (rcode, addresses, error), read as that; its AAAA is not asked.
 */
function dnsAnswerOf(v: unknown): DnsAnswer | undefined {
  if (
    !isRecord(v) ||
    typeof v.name !== 'string' ||
    typeof v.server !== 'string' ||
    typeof v.method !== 'string' ||
    !optional(v.error, 'string')
  )
    return undefined
  const base = {name: v.name, server: v.server, method: v.method}
  const error = v.error ? {error: v.error as string} : {}
  if (Array.isArray(v.answers))
    return v.answers.every(isDnsRecordAnswer) ? {...base, answers: v.answers as DnsRecordAnswer[], ...error} : undefined
  if (!isDnsRecordAnswer({type: 'A', addresses: v.addresses, rcode: v.rcode})) return undefined
  if (v.method === 'none') return {...base, answers: [], ...error}
  return {
    ...base,
    answers: [
      {type: 'A', addresses: v.addresses as string[], ...(v.rcode ? {rcode: v.rcode as string} : {}), ...error},
    ],
  }
}

function isKubeProxyStatus(v: unknown): boolean {
  if (!isRecord(v)) return false
  const h = v.healthz
  const healthzOk =
    h === undefined ||
    (isRecord(h) &&
      typeof h.status === 'number' &&
      optional(h.lastUpdated, 'string') &&
      optional(h.currentTime, 'string') &&
      optional(h.nodeEligible, 'boolean'))
  const m = v.metrics
  const metricsOk = m === undefined || (isRecord(m) && Object.values(m).every((x) => typeof x === 'number'))
  return (
    healthzOk &&
    metricsOk &&
    ['proxyMode', 'proxyModeError', 'healthzError', 'metricsError'].every((k) => optional(v[k], 'string'))
  )
}

/** Parses one node's recording (read live by collect-node.ts, or loaded from a snapshot folder). */
export function parseNodeRecording(
  name: string,
  rec: NodeRecording,
  onDisk: Map<NodeFile, DumpSource> = new Map(),
): NodeObservation {
  const text = (f: NodeFile) => rec.get(f)?.toString('utf8')
  const dump = (f: NodeFile): DumpSource | undefined => {
    const bytes = rec.get(f)
    return onDisk.get(f) ?? (bytes ? new BufferSource(bytes) : undefined)
  }
  const error = text(NODE_FILES.error)
  if (error !== undefined) return {name, reachable: false, error: error.trim()}
  const obs: NodeObservation = {name, reachable: true}
  try {
    const save = dump(NODE_FILES.iptablesSave)
    if (save) obs.iptables = IptablesSave.parse(save)
  } catch (e) {
    return {name, reachable: false, error: `${NODE_FILES.iptablesSave} unreadable: ${(e as Error).message}`}
  }
  try {
    const save6 = dump(NODE_FILES.ip6tablesSave)
    if (save6) obs.ip6tables = IptablesSave.parse(save6)
  } catch {
    // Unreadable IPv6 rules leave the node's IPv6 family unjudged, said in what was not checked.
  }
  try {
    const nft = text(NODE_FILES.nftRuleset)
    if (nft !== undefined && nft.trim() !== '') obs.nft = parseNftDump(nft)
  } catch (e) {
    return {name, reachable: false, error: `${NODE_FILES.nftRuleset} unreadable: ${(e as Error).message}`}
  }
  try {
    // No kube-proxy table in either family is an empty read, and still a read: nothing of nftables mode is left.
    const own = obs.nft ? undefined : text(NODE_FILES.nftKubeProxyTables)
    if (own !== undefined) {
      obs.nft = own.trim() === '' ? new NftRuleset() : parseNftDump(own)
      obs.nftKubeProxyTablesOnly = true
    }
  } catch (e) {
    return {name, reachable: false, error: `${NODE_FILES.nftKubeProxyTables} unreadable: ${(e as Error).message}`}
  }
  for (const {family, backend, command} of BACKEND_SAVES) {
    try {
      const source = dump(RECORDED_AS[command]!)
      if (source && source.size > 0) (obs.backends ??= []).push({family, backend, dump: IptablesSave.parse(source)})
    } catch {
      // An unreadable extra backend dump only loses the leftover check.
    }
  }
  if (rec.has(NODE_FILES.ipvsadm)) {
    try {
      const kubeIpvs0 = text(NODE_FILES.kubeIpvs0)
      obs.ipvs = {
        virtualServers: parseIpvsadm(text(NODE_FILES.ipvsadm) ?? ''),
        ipsets: IpsetState.parse(text(NODE_FILES.ipset) ?? ''),
        vips: kubeIpvs0 !== undefined ? parseDeviceAddresses(kubeIpvs0) : undefined,
        sysctls: parseSysctl(text(NODE_FILES.sysctl) ?? ''),
      }
    } catch (e) {
      return {name, reachable: false, error: `IPVS dumps unreadable: ${(e as Error).message}`}
    }
  }
  if (!obs.iptables && !obs.nft)
    return {name, reachable: false, error: `neither ${NODE_FILES.iptablesSave} nor ${NODE_FILES.nftRuleset} is there`}
  const network = text(NODE_FILES.network)
  if (network !== undefined) {
    const cni = text(NODE_FILES.cniResults)
    const bridges = parseBridgeState(network)
    obs.network =
      cni !== undefined
        ? withCniResults(bridges, parseCniResults(cni))
        : {...bridges, cniNotes: ['CNI result cache (/var/lib/cni/results) not read']}
  }
  obs.kubeProxy = shaped(parseJson<KubeProxyStatus>(rec.get(NODE_FILES.kubeProxy)), isKubeProxyStatus)
  obs.dns = dnsAnswerOf(parseJson<unknown>(rec.get(NODE_FILES.dns)))
  const pathReads = parseJson<RawPathReads>(rec.get(NODE_FILES.pathReads))
  if (pathReads && Array.isArray(pathReads.routeGet) && Array.isArray(pathReads.conntrack))
    obs.path = interpretPathReads(pathReads)
  if (!obs.kubeProxy) delete obs.kubeProxy
  if (!obs.dns) delete obs.dns
  return obs
}

/** The iptables dumps of a snapshot: left on disk when large and read chain by chain as the diagnosis asks. */
const DUMPS_ON_DISK: ReadonlySet<NodeFile> = new Set([
  NODE_FILES.iptablesSave,
  NODE_FILES.ip6tablesSave,
  ...BACKEND_SAVES.map((b) => RECORDED_AS[b.command]!),
])
const ON_DISK_OVER_BYTES = 8 << 20

/** Loads a node's folder of a bundle into memory (only the files a bundle holds). */
export function loadNodeRecording(dir: string): NodeRecording | undefined {
  return loadNodeFiles(dir, false)?.rec
}

/**
 * How many bytes of large iptables dumps may still be loaded into memory rather than read from disk chain by chain.
 * `svc` and `trace` load none (one Service reads a few chains of a dump); a scan reads every Service's chains, one
 * read per chain per node, so it loads dumps whole while they fit its budget.
 */
export interface DumpMemoryBudget {
  bytes: number
}

const NO_DUMP_IN_MEMORY: DumpMemoryBudget = {bytes: 0}

function loadNodeFiles(
  dir: string,
  largeDumpsOnDisk: boolean,
  budget: DumpMemoryBudget = NO_DUMP_IN_MEMORY,
): {rec: NodeRecording; onDisk: Map<NodeFile, DumpSource>} | undefined {
  if (!existsSync(dir)) return undefined
  const rec: NodeRecording = new Map()
  const onDisk = new Map<NodeFile, DumpSource>()
  for (const f of Object.values(NODE_FILES)) {
    const path = join(dir, f)
    if (!existsSync(path)) continue
    try {
      if (largeDumpsOnDisk && DUMPS_ON_DISK.has(f)) {
        const source = openRegularFile(path)
        if (source.size > ON_DISK_OVER_BYTES && source.size > budget.bytes) {
          onDisk.set(f, source)
          continue
        }
        if (source.size > ON_DISK_OVER_BYTES) budget.bytes -= source.size
        source.close()
      }
      rec.set(f, readRegularFile(path))
    } catch (e) {
      // A symlink, FIFO or device in a bundle: that node is unreadable, named with the file; no byte of it is read.
      for (const source of onDisk.values()) source.close()
      return {rec: errorRecording(`${f}: ${(e as Error).message}`), onDisk: new Map()}
    }
  }
  return {rec, onDisk}
}

/**
 * Loads a node's folder of a snapshot bundle; a large iptables dump is left on disk past the budget (see
 * DUMPS_ON_DISK). A folder that is not there is the node's error.
 */
export function loadNodeBundle(
  dir: string,
  budget?: DumpMemoryBudget,
): {rec: NodeRecording; onDisk: Map<NodeFile, DumpSource>} {
  return loadNodeFiles(dir, true, budget) ?? {rec: errorRecording('not in the snapshot'), onDisk: new Map()}
}

/** Reads a node's folder of a snapshot bundle; a large iptables dump is not loaded whole (see DUMPS_ON_DISK). */
export function readNodeBundle(dir: string, name: string, budget?: DumpMemoryBudget): NodeObservation {
  const {rec, onDisk} = loadNodeBundle(dir, budget)
  return parseNodeRecording(name, rec, onDisk)
}

/** Writes a node's recording as its folder of a bundle. */
export function writeNodeRecording(dir: string, rec: NodeRecording): void {
  mkdirSync(dir, {recursive: true})
  for (const [f, content] of rec) writeFileSync(join(dir, f), content, {mode: 0o600})
}
