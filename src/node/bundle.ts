import {existsSync, readFileSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {FileSource} from '../parse/dump-source.js'
import {IptablesSave} from '../parse/iptables-save.js'
import {parseBridgeState, type BridgeState} from '../parse/bridge-state.js'
import type {NftRuleset} from '../parse/nft-ruleset.js'
import {parseNftDump} from '../parse/nft-dump.js'
import type {DnsAnswer} from './dns-probe.js'
import type {KubeProxyStatus} from '../parse/kube-proxy-status.js'
import {IpsetState} from '../parse/ipset-save.js'
import {parseDeviceAddresses, parseIpvsadm, parseSysctl, type VirtualServer} from '../parse/ipvsadm.js'

/** The files one node's folder of a bundle holds. */
export const NODE_FILES = {
  iptablesSave: 'iptables-save.txt',
  nftRuleset: 'nft-ruleset.txt',
  iptablesLegacySave: 'iptables-legacy-save.txt',
  iptablesNftSave: 'iptables-nft-save.txt',
  ipvsadm: 'ipvsadm.txt',
  ipset: 'ipset.txt',
  kubeIpvs0: 'kube-ipvs0.txt',
  sysctl: 'sysctl.txt',
  network: 'network.txt',
  dns: 'dns.json',
  kubeProxy: 'kube-proxy.json',
  error: 'error.txt',
} as const

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
  nft?: NftRuleset
  /** The two iptables backends read one by one, where the node has both tools: leftovers hide in the unused one. */
  backends?: Array<{backend: 'legacy' | 'nft'; dump: IptablesSave}>
  /** IPVS mode: virtual servers, ipsets, addresses on kube-ipvs0, the sysctls it needs. */
  ipvs?: IpvsState
  network?: BridgeState
  dns?: DnsAnswer
  kubeProxy?: KubeProxyStatus
}

export function writeNodeError(dir: string, message: string): void {
  writeFileSync(join(dir, NODE_FILES.error), message.split('\n')[0] + '\n')
}

/** Reads a node's folder (written live by collect-node.ts, or shipped in a snapshot). */
export function readNodeBundle(dir: string, name: string): NodeObservation {
  const file = (f: string) => join(dir, f)
  if (!existsSync(dir)) return {name, reachable: false, error: 'not in the snapshot'}
  if (existsSync(file(NODE_FILES.error))) return {name, reachable: false, error: readFileSync(file(NODE_FILES.error), 'utf8').trim()}
  const obs: NodeObservation = {name, reachable: true}
  try {
    if (existsSync(file(NODE_FILES.iptablesSave))) obs.iptables = IptablesSave.parse(new FileSource(file(NODE_FILES.iptablesSave)))
  } catch (e) {
    return {name, reachable: false, error: `${NODE_FILES.iptablesSave} unreadable: ${(e as Error).message}`}
  }
  try {
    const nftFile = file(NODE_FILES.nftRuleset)
    if (existsSync(nftFile) && readFileSync(nftFile, 'utf8').trim() !== '') obs.nft = parseNftDump(readFileSync(nftFile, 'utf8'))
  } catch (e) {
    return {name, reachable: false, error: `${NODE_FILES.nftRuleset} unreadable: ${(e as Error).message}`}
  }
  for (const [backend, f] of [
    ['legacy', NODE_FILES.iptablesLegacySave],
    ['nft', NODE_FILES.iptablesNftSave],
  ] as const) {
    try {
      if (existsSync(file(f)) && readFileSync(file(f)).length > 0) (obs.backends ??= []).push({backend, dump: IptablesSave.parse(new FileSource(file(f)))})
    } catch {
      // An unreadable extra backend dump only loses the leftover check.
    }
  }
  if (existsSync(file(NODE_FILES.ipvsadm))) {
    try {
      const read = (f: string) => (existsSync(file(f)) ? readFileSync(file(f), 'utf8') : '')
      obs.ipvs = {
        virtualServers: parseIpvsadm(read(NODE_FILES.ipvsadm)),
        ipsets: IpsetState.parse(read(NODE_FILES.ipset)),
        vips: existsSync(file(NODE_FILES.kubeIpvs0)) ? parseDeviceAddresses(read(NODE_FILES.kubeIpvs0)) : undefined,
        sysctls: parseSysctl(read(NODE_FILES.sysctl)),
      }
    } catch (e) {
      return {name, reachable: false, error: `IPVS dumps unreadable: ${(e as Error).message}`}
    }
  }
  if (!obs.iptables && !obs.nft) return {name, reachable: false, error: `neither ${NODE_FILES.iptablesSave} nor ${NODE_FILES.nftRuleset} is there`}
  if (existsSync(file(NODE_FILES.network))) obs.network = parseBridgeState(readFileSync(file(NODE_FILES.network), 'utf8'))
  if (existsSync(file(NODE_FILES.kubeProxy))) {
    try {
      obs.kubeProxy = JSON.parse(readFileSync(file(NODE_FILES.kubeProxy), 'utf8')) as KubeProxyStatus
    } catch {
      obs.kubeProxy = undefined
    }
  }
  if (existsSync(file(NODE_FILES.dns))) {
    try {
      obs.dns = JSON.parse(readFileSync(file(NODE_FILES.dns), 'utf8')) as DnsAnswer
    } catch {
      obs.dns = undefined
    }
  }
  return obs
}
