import {parseIp} from '../net/address.js'

/**
 * libcni's result cache (containernetworking/cni libcni/api.go `cacheAdd`): one file per attachment,
 * `/var/lib/cni/results/<network>-<containerID>-<ifName>`, mode 0600 in a 0700 directory, one line of JSON
 * (`json.Marshal`) `{"kind":"cniCacheV1","containerId","ifName","networkName","result":{"interfaces":[…],"ips":[…]}}`.
 * containerd (go-cni) and CRI-O (ocicni) write it on every pod sandbox's ADD and remove it on DEL, so it is there
 * for an idle Pod, unlike the bridge FDB and neighbour entries. The bridge plugin's result (kubenet, flannel)
 * lists the bridge and the host-side veth without `sandbox`, and the pod's interface with its netns as `sandbox`;
 * each `ips` entry names its interface by index.
 */
export const CNI_RESULTS_DIR = '/var/lib/cni/results'

/** One cache file as read: the pod's addresses and the host-side interfaces of that attachment. */
interface CniAttachment {
  file: string
  containerId: string
  network: string
  ifName: string
  /** Addresses on the pod's (sandboxed) interface, canonical spelling, no prefix length. */
  podIps: string[]
  /** Interfaces without a sandbox: the bridge and the host-side veth (the caller tells them apart). */
  hostInterfaces: string[]
}

export interface CniResults {
  attachments: CniAttachment[]
  /** Files not used, each with why (never a crash: a truncated or foreign file is only skipped). */
  ignored: Array<{file: string; reason: string}>
}

const MAX_FILES = 4096
const MAX_FILE_BYTES = 256 * 1024
/** libcni's own rules make every part of the name of this alphabet (ValidateContainerID, ValidateNetworkName; ifName has no ':' or '/'). */
const FILE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.@+-]{0,254}$/

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

/** Parses `grep -r -H -s . /var/lib/cni/results` output: `PATH:LINE` lines, grouped back into files. */
export function parseCniResults(text: string): CniResults {
  const out: CniResults = {attachments: [], ignored: []}
  const files = new Map<string, string[]>()
  const prefix = `${CNI_RESULTS_DIR}/`
  for (const line of text.split('\n')) {
    if (!line.startsWith(prefix)) continue
    const colon = line.indexOf(':', prefix.length)
    if (colon < 0) continue
    const name = line.slice(prefix.length, colon)
    const lines = files.get(name) ?? []
    if (lines.length === 0) files.set(name, lines)
    lines.push(line.slice(colon + 1))
  }
  let seen = 0
  for (const [file, lines] of files) {
    if (++seen > MAX_FILES) {
      out.ignored.push({file, reason: `more than ${MAX_FILES} cache files: the rest not read`})
      continue
    }
    if (!FILE_NAME.test(file)) {
      out.ignored.push({
        file: JSON.stringify(file).slice(0, 80),
        reason: 'not a libcni cache file name (a subfolder or unexpected characters)',
      })
      continue
    }
    const body = lines.join('\n')
    if (Buffer.byteLength(body) > MAX_FILE_BYTES) {
      out.ignored.push({file, reason: `larger than ${MAX_FILE_BYTES / 1024} KiB`})
      continue
    }
    const parsed = attachment(file, body)
    if ('reason' in parsed) out.ignored.push({file, reason: parsed.reason})
    else out.attachments.push(parsed)
  }
  return out
}

function attachment(file: string, body: string): CniAttachment | {reason: string} {
  let doc: unknown
  try {
    doc = JSON.parse(body)
  } catch (e) {
    return {reason: `not JSON (${(e as Error).message.split('\n')[0].slice(0, 80)})`}
  }
  if (!isRecord(doc)) return {reason: 'not a JSON object'}
  if (doc.kind !== 'cniCacheV1')
    return {reason: `kind ${JSON.stringify(doc.kind ?? null).slice(0, 40)}, not cniCacheV1`}
  const {containerId, networkName, ifName, result} = doc
  if (typeof containerId !== 'string' || typeof networkName !== 'string' || typeof ifName !== 'string')
    return {reason: 'containerId, networkName or ifName missing'}
  if (!isRecord(result)) return {reason: 'no result'}
  const interfaces = Array.isArray(result.interfaces) ? result.interfaces : undefined
  if (!interfaces || !Array.isArray(result.ips))
    return {reason: 'the result has no interfaces or ips (a CNI result before 0.3.0?)'}
  const sandboxed = (i: unknown) => isRecord(i) && typeof i.sandbox === 'string' && i.sandbox !== ''
  const hostInterfaces = interfaces
    .filter((i) => isRecord(i) && typeof i.name === 'string' && !sandboxed(i))
    .map((i) => (i as {name: string}).name)
  const podIps: string[] = []
  for (const entry of result.ips) {
    if (!isRecord(entry) || typeof entry.address !== 'string') continue
    const index = entry.interface
    // An address whose interface is named must sit on the pod's side; one without an index is the pod's by the spec.
    if (typeof index === 'number' && !sandboxed(interfaces[index])) continue
    const ip = parseIp(entry.address.split('/')[0])
    if (ip && !podIps.includes(ip.text)) podIps.push(ip.text)
  }
  if (podIps.length === 0) return {reason: 'no address on the pod interface'}
  return {file, containerId, network: networkName, ifName, podIps, hostInterfaces}
}
