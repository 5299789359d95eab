import {existsSync, readFileSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {FileSource} from '../parse/dump-source.js'
import {IptablesSave} from '../parse/iptables-save.js'
import {parseBridgeState, type BridgeState} from '../parse/bridge-state.js'
import type {DnsAnswer} from './dns-probe.js'

/** The files one node's folder of a bundle holds. */
export const NODE_FILES = {
  iptablesSave: 'iptables-save.txt',
  network: 'network.txt',
  dns: 'dns.json',
  error: 'error.txt',
} as const

export interface NodeObservation {
  name: string
  reachable: boolean
  error?: string
  iptables?: IptablesSave
  network?: BridgeState
  dns?: DnsAnswer
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
  if (existsSync(file(NODE_FILES.network))) obs.network = parseBridgeState(readFileSync(file(NODE_FILES.network), 'utf8'))
  if (existsSync(file(NODE_FILES.dns))) {
    try {
      obs.dns = JSON.parse(readFileSync(file(NODE_FILES.dns), 'utf8')) as DnsAnswer
    } catch {
      obs.dns = undefined
    }
  }
  return obs
}
