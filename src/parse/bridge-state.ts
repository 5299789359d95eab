/** Bridge ports, their hairpin flags, and which pod IP sits behind which port, from the node's `network` output. */
interface BridgePort {
  bridge: string
  port: string
  hairpin: boolean
}

export interface BridgeState {
  ports: BridgePort[]
  promiscuousBridges: Set<string>
  /** pod IP → bridge port, through the neighbour table (IP → MAC) and the bridge FDB (MAC → port). */
  portOfIp: Map<string, string>
}

export function parseBridgeState(text: string): BridgeState {
  const sections = new Map<string, string[]>()
  let current = ''
  for (const line of text.split('\n')) {
    const m = /^## (\w+)$/.exec(line.trim())
    if (m) {
      current = m[1]
      sections.set(current, [])
    } else if (current && line.trim()) sections.get(current)!.push(line.trim())
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
  for (const [ip, mac] of macOfIp) {
    const port = portOfMac.get(mac)
    if (port) portOfIp.set(ip, port)
  }
  return {ports, promiscuousBridges, portOfIp}
}
