import {BufferSource, type DumpSource} from '../../parse/dump-source.js'
import {withCniResults} from '../../parse/bridge-state.js'
import {notReadMark} from '../../parse/not-read-mark.js'
import {NftRuleset} from '../../parse/nft-ruleset.js'
import type {IptablesSave} from '../../parse/iptables-save.js'
import type {DnsAnswer, DnsRecordAnswer} from '../probe/dns-probe.js'
import type {KubeProxyStatus} from '../../parse/kube-proxy-status.js'
import {BACKEND_SAVES, commandWords, NODE_READS as reads} from './node-reads.js'
import type {BackendSave, EmptyRulesRead, NodeObservation} from '../observation.js'
import {NODE_FILES, type NodeFile, type NodeRecording} from './node-files.js'
import {interpretPathReads, notReadReason, type RawPathReads} from './path-reads.js'

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

/** Rules are parsed chain by chain when first walked: a broken rule's error then names the file it is in. */
function named(dump: IptablesSave, file: string): IptablesSave {
  dump.file = file
  return dump
}

/** A read of only white space (looked at up to 4 KiB: a larger one is a dump, judged by its parser). */
const isBlank = (source: DumpSource) =>
  source.size <= 4096 && source.read(0, source.size).toString('latin1').trim() === ''

/** What an empty read printed, in the report's words. */
function printedNothing(source: DumpSource): string {
  if (source.size === 0) return '0 bytes'
  return isBlank(source) ? `only white space, ${source.size} bytes` : `no table, ${source.size} bytes`
}

const emptyReadError = (e: EmptyRulesRead) =>
  `${e.command} returned nothing (${e.printed}, ${e.file}): no rules were read`

/**
 * The IPv4 rules read printed no table, and nothing else read shows kube-proxy's rules in a mode that does not need
 * it (nftables mode's kube-proxy table, IPVS virtual servers): the read returned nothing, which says nothing of what
 * kube-proxy programmed. A save with a table and no kube-proxy chain (`*nat`, `COMMIT`) is a read: not programmed.
 */
function emptyRulesRead(obs: NodeObservation, source: DumpSource | undefined): EmptyRulesRead | undefined {
  const save = obs.iptables
  if (!save || !source || save.tableNames().length > 0) return undefined
  if (obs.nft?.tables.some((t) => t.name === 'kube-proxy')) return undefined
  if ((obs.ipvs?.virtualServers.length ?? 0) > 0) return undefined
  const nftHoldsRules = !!obs.nft?.table('ip nat')?.chains.get('KUBE-SERVICES')
  const backendHolds = obs.backends?.find((b) => b.family === 4 && b.dump?.hasChain('nat', 'KUBE-SERVICES'))?.backend
  const rulesIn = nftHoldsRules ? 'nft' : backendHolds
  return {
    command: reads.iptablesSave.argv.join(' '),
    file: reads.iptablesSave.recorded.file,
    printed: printedNothing(source),
    ...(rulesIn ? {rulesIn} : {}),
  }
}

/**
 * One backend's own save, parsed when a check first asks for it: most runs ask only for the backend the node's
 * iptables-save does not show (the leftover check), and nothing of the one it shows.
 */
function backendSave(
  family: 4 | 6,
  backend: 'legacy' | 'nft',
  command: (typeof BACKEND_SAVES)[number]['command'],
  source: DumpSource,
): BackendSave {
  let parsed: IptablesSave | undefined | null = null
  let unreadable: string | undefined
  return {
    family,
    backend,
    get dump() {
      if (parsed === null)
        try {
          parsed = named(reads[command].parse(source), reads[command].recorded.file)
        } catch (e) {
          // An unreadable extra backend dump only loses the leftover check, which coverage says.
          parsed = undefined
          unreadable = `${reads[command].recorded.file} unreadable: ${(e as Error).message}`
        }
      return parsed
    },
    get unreadable() {
      return this.dump === undefined ? unreadable : undefined
    },
  }
}

/**
 * Why a recorded read was not made, where the file's first line is its #kpd-not-read mark: the command's words and
 * why, in the report's words.
 */
function notReadOf(recorded: string | undefined): {command: string; reason: string} | undefined {
  const mark = notReadMark(recorded?.split('\n')[0] ?? '')
  return mark && {command: mark.command, reason: notReadReason(mark.command, mark)}
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
    const save = dump(reads.iptablesSave.recorded.file)
    // Only white space is an empty read (emptyRulesRead says so), not a malformed dump.
    const read = save && isBlank(save) ? new BufferSource(Buffer.alloc(0)) : save
    if (read) obs.iptables = named(reads.iptablesSave.parse(read), reads.iptablesSave.recorded.file)
  } catch (e) {
    return {name, reachable: false, error: `${reads.iptablesSave.recorded.file} unreadable: ${(e as Error).message}`}
  }
  try {
    const save6 = dump(reads.ip6tablesSave.recorded.file)
    if (save6) obs.ip6tables = named(reads.ip6tablesSave.parse(save6), reads.ip6tablesSave.recorded.file)
  } catch {
    // Unreadable IPv6 rules leave the node's IPv6 family unjudged, said in what was not checked.
  }
  try {
    // Both forms of the ruleset (nftRulesetJson, nftRuleset) are recorded as one file: the parser tells them apart.
    const nft = text(reads.nftRuleset.recorded.file)
    if (nft !== undefined && nft.trim() !== '') obs.nft = reads.nftRuleset.parse(nft)
  } catch (e) {
    return {name, reachable: false, error: `${reads.nftRuleset.recorded.file} unreadable: ${(e as Error).message}`}
  }
  const nftNotRead = notReadOf(text(NODE_FILES.nftNotRead))
  if (nftNotRead) obs.nftNotRead = nftNotRead.reason
  try {
    // No kube-proxy table in either family is an empty read, and still a read: nothing of nftables mode is left.
    const own = obs.nft ? undefined : text(reads.nftKubeProxyTable.recorded.file)
    if (own !== undefined) {
      obs.nft = own.trim() === '' ? new NftRuleset() : reads.nftKubeProxyTable.parse(own)
      obs.nftKubeProxyTablesOnly = true
    }
  } catch (e) {
    return {
      name,
      reachable: false,
      error: `${reads.nftKubeProxyTable.recorded.file} unreadable: ${(e as Error).message}`,
    }
  }
  for (const {family, backend, command} of BACKEND_SAVES) {
    const source = dump(reads[command].recorded.file)
    if (source && source.size > 0) (obs.backends ??= []).push(backendSave(family, backend, command, source))
  }
  // One #kpd-not-read line per backend save that could not run, each read back by its command's words.
  for (const line of text(NODE_FILES.backendsNotRead)?.split('\n') ?? []) {
    const failed = notReadOf(line)
    const save = failed && BACKEND_SAVES.find((b) => commandWords(b.command) === failed.command)
    if (save) (obs.backendsNotRead ??= []).push({family: save.family, backend: save.backend, reason: failed.reason})
  }
  if (rec.has(reads.ipvsadm.recorded.file)) {
    try {
      const kubeIpvs0 = text(reads.kubeIpvs0.recorded.file)
      obs.ipvs = {
        virtualServers: reads.ipvsadm.parse(text(reads.ipvsadm.recorded.file) ?? ''),
        ipsets: reads.ipsetSave.parse(text(reads.ipsetSave.recorded.file) ?? ''),
        vips: kubeIpvs0 !== undefined ? reads.kubeIpvs0.parse(kubeIpvs0) : undefined,
        sysctls: reads.sysctls.parse(text(reads.sysctls.recorded.file) ?? ''),
      }
      const sysctlsNotRead = notReadOf(text(reads.sysctls.recorded.file))
      if (sysctlsNotRead) obs.ipvs.sysctlsNotRead = sysctlsNotRead.reason
    } catch (e) {
      return {name, reachable: false, error: `IPVS dumps unreadable: ${(e as Error).message}`}
    }
  }
  const emptyRead = emptyRulesRead(obs, dump(reads.iptablesSave.recorded.file))
  if (emptyRead) return {name, reachable: false, error: emptyReadError(emptyRead), emptyRead}
  if (!obs.iptables && !obs.nft) {
    const nft = text(reads.nftRuleset.recorded.file)
    return {
      name,
      reachable: false,
      error:
        nft === undefined
          ? `neither ${reads.iptablesSave.recorded.file} nor ${reads.nftRuleset.recorded.file} is there`
          : `nft list ruleset returned nothing (${printedNothing(new BufferSource(Buffer.from(nft)))}, ${reads.nftRuleset.recorded.file}) and ${reads.iptablesSave.recorded.file} is not there: no rules were read`,
    }
  }
  const network = text(reads.network.recorded.file)
  if (network !== undefined) {
    const cni = text(reads.cniResults.recorded.file)
    const bridges = reads.network.parse(network)
    obs.network =
      cni !== undefined
        ? withCniResults(bridges, reads.cniResults.parse(cni))
        : {...bridges, cniNotes: ['CNI result cache (/var/lib/cni/results) not read']}
  }
  const cilium = text(reads.ciliumServiceList.recorded.file)
  if (cilium !== undefined) {
    try {
      obs.ciliumServices = reads.ciliumServiceList.parse(cilium)
    } catch (e) {
      return {
        name,
        reachable: false,
        error: `${reads.ciliumServiceList.recorded.file} unreadable: ${(e as Error).message}`,
      }
    }
  }
  const agentNotRead = text(NODE_FILES.agentNotRead)?.trim()
  if (agentNotRead) obs.agentNotRead = agentNotRead
  obs.kubeProxy = shaped(parseJson<KubeProxyStatus>(rec.get(NODE_FILES.kubeProxy)), isKubeProxyStatus)
  obs.dns = dnsAnswerOf(parseJson<unknown>(rec.get(NODE_FILES.dns)))
  const pathReads = parseJson<RawPathReads>(rec.get(NODE_FILES.pathReads))
  if (pathReads && Array.isArray(pathReads.routeGet) && Array.isArray(pathReads.conntrack))
    obs.path = interpretPathReads(pathReads)
  if (!obs.kubeProxy) delete obs.kubeProxy
  if (!obs.dns) delete obs.dns
  return obs
}
