import {notReadMark, type NotRead} from './not-read-mark.js'
import {CNI_RESULTS_DIR, type CniResults} from './cni-results.js'

/** Bridge ports, their hairpin flags, and which pod IP sits behind which port, from the node's `network` output. */
interface BridgePort {
  bridge: string
  port: string
  hairpin: boolean
}

export interface BridgeState {
  ports: BridgePort[]
  promiscuousBridges: Set<string>
  /**
   * pod IP → bridge port: through the CNI result cache (pod IP → host veth, see cni-results.ts) where it was read,
   * else through the neighbour table (IP → MAC) and the bridge FDB (MAC → port), whose entries expire on idle Pods.
   */
  portOfIp: Map<string, string>
  /** pod IP → how its port was found (one evidence line). */
  mappedBy: Map<string, string>
  /** Why the CNI result cache mapped no pod or skipped files (not read, unreadable files, ambiguous addresses). */
  cniNotes?: string[]
  /** The sections whose command failed on the node (not-read-mark.ts lines): empty there because not read. */
  failed?: SectionFailure[]
}

/** Whether the links were read: without them, whether a bridge is promiscuous (hairpin not needed there) is unknown. */
export function linksRead(state: BridgeState): boolean {
  return !state.failed?.some((f) => f.section === 'links')
}

/** A section of the `network` read whose command failed: which section, and the mark's command, status and stderr. */
interface SectionFailure extends NotRead {
  section: string
}

export function parseBridgeState(text: string): BridgeState {
  const sections = new Map<string, string[]>()
  const failed: SectionFailure[] = []
  let current = ''
  for (const line of text.split('\n')) {
    const m = /^## (\w+)$/.exec(line.trim())
    const notRead = m ? undefined : notReadMark(line)
    if (m) {
      current = m[1]
      sections.set(current, [])
    } else if (notRead) failed.push({section: current, ...notRead})
    else if (current && line.trim()) sections.get(current)!.push(line.trim())
  }
  const ports: BridgePort[] = []
  for (const line of sections.get('hairpin') ?? []) {
    const m = /^\/sys\/class\/net\/([^/]+)\/brif\/([^/]+)\/hairpin_mode\s+(\d)$/.exec(line)
    if (m) ports.push({bridge: m[1], port: m[2], hairpin: m[3] === '1'})
  }
  const promiscuousBridges = new Set<string>()
  const bridges = new Set(ports.map((p) => p.bridge))
  for (const line of sections.get('links') ?? []) {
    const m = /^\d+:\s+([^:@\s]+)(?:@\S+)?:\s+<([^>]*)>/.exec(line)
    if (m && bridges.has(m[1]) && m[2].split(',').includes('PROMISC')) promiscuousBridges.add(m[1])
  }
  const macOfIp = new Map<string, string>()
  for (const line of sections.get('neigh') ?? []) {
    const m = /^(\S+)\s+dev\s+(\S+)\s+lladdr\s+([0-9a-f:]{17})/.exec(line)
    if (m) macOfIp.set(m[1], m[3])
  }
  const portOfMac = new Map<string, string>()
  const portNames = new Set(ports.map((p) => p.port))
  for (const line of sections.get('fdb') ?? []) {
    const m = /^([0-9a-f:]{17})\s+dev\s+(\S+)/.exec(line)
    if (m && portNames.has(m[2]) && !/\bpermanent\b/.test(line)) portOfMac.set(m[1], m[2])
  }
  const portOfIp = new Map<string, string>()
  const mappedBy = new Map<string, string>()
  for (const [ip, mac] of macOfIp) {
    const port = portOfMac.get(mac)
    if (port) {
      portOfIp.set(ip, port)
      mappedBy.set(ip, `${ip} → ${port}: neighbour + fdb (MAC ${mac})`)
    }
  }
  return {ports, promiscuousBridges, portOfIp, mappedBy, ...(failed.length > 0 ? {failed} : {})}
}

/**
 * The bridge state with each pod IP the CNI result cache names mapped to its host-side veth (when that veth is a
 * port of a bridge here); the FDB mapping stays for the addresses the cache does not settle. An address claimed by
 * two attachments on two different ports (a stale file) is left to the FDB.
 */
export function withCniResults(state: BridgeState, cni: CniResults): BridgeState {
  const portNames = new Set(state.ports.map((p) => p.port))
  const claims = new Map<string, Map<string, string>>()
  for (const a of cni.attachments) {
    const veths = a.hostInterfaces.filter((i) => portNames.has(i))
    if (veths.length !== 1) continue
    for (const ip of a.podIps) {
      const byPort = claims.get(ip) ?? new Map<string, string>()
      claims.set(ip, byPort)
      byPort.set(veths[0], a.file)
    }
  }
  const portOfIp = new Map(state.portOfIp)
  const mappedBy = new Map(state.mappedBy)
  const notes = cni.ignored.map((i) => `CNI result cache: ${i.file} skipped: ${i.reason}`)
  for (const [ip, byPort] of claims) {
    if (byPort.size !== 1) {
      notes.push(
        `CNI result cache: ${ip} is claimed by ${[...byPort.values()].join(', ')} (a stale file?): left to the fdb`,
      )
      continue
    }
    const [[port, file]] = [...byPort]
    portOfIp.set(ip, port)
    mappedBy.set(ip, `${ip} → ${port}: CNI result cache (${CNI_RESULTS_DIR}/${file})`)
  }
  return {...state, portOfIp, mappedBy, ...(notes.length > 0 ? {cniNotes: notes} : {})}
}
