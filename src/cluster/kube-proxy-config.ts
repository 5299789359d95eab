import {createRequire} from 'node:module'
import type * as Yaml from 'yaml'
import {inCidr} from '../net/address.js'
import {DEFAULT_MASQUERADE_BIT, type KubeProxyConfig} from './types.js'

/** yaml, loaded when a configuration is read: most runs (a snapshot without the ConfigMap, -o json) never need it. */
const loadModule = createRequire(import.meta.url)

interface KubeProxyConfiguration {
  mode?: unknown
  clusterCIDR?: unknown
  nodePortAddresses?: unknown
  iptables?: {masqueradeBit?: unknown; masqueradeAll?: unknown; localhostNodePorts?: unknown}
  ipvs?: {scheduler?: unknown; strictARP?: unknown}
}

/** Reads the fields the diagnosis needs from a KubeProxyConfiguration (the kubeadm ConfigMap's config.conf). */
export function parseKubeProxyConfig(yaml: string, source: string): KubeProxyConfig {
  let doc: KubeProxyConfiguration
  try {
    const {parse} = loadModule('yaml') as typeof Yaml
    doc = (parse(yaml) ?? {}) as KubeProxyConfiguration
  } catch (e) {
    return defaultKubeProxyConfig(`${source} is not valid YAML: ${(e as Error).message.split('\n')[0]}`)
  }
  if (typeof doc !== 'object' || Array.isArray(doc))
    return defaultKubeProxyConfig(`${source} is not a KubeProxyConfiguration`)
  const config: KubeProxyConfig = {
    mode: text(doc.mode) ?? '',
    masqueradeBit: DEFAULT_MASQUERADE_BIT,
    masqueradeAll: false,
    localhostNodePorts: true,
    source,
  }
  const clusterCIDR = text(doc.clusterCIDR)
  if (clusterCIDR) config.clusterCIDR = clusterCIDR
  const bit = doc.iptables?.masqueradeBit
  if (typeof bit === 'number' && Number.isInteger(bit) && bit >= 0 && bit <= 31) config.masqueradeBit = bit
  if (doc.iptables?.masqueradeAll === true) config.masqueradeAll = true
  if (doc.iptables?.localhostNodePorts === false || !nodePortsOnLoopback(doc.nodePortAddresses))
    config.localhostNodePorts = false
  const scheduler = text(doc.ipvs?.scheduler)
  if (scheduler) config.ipvsScheduler = scheduler
  if (typeof doc.ipvs?.strictARP === 'boolean') config.ipvsStrictARP = doc.ipvs.strictARP
  return config
}

export function defaultKubeProxyConfig(reason: string): KubeProxyConfig {
  return {
    mode: '',
    masqueradeBit: DEFAULT_MASQUERADE_BIT,
    masqueradeAll: false,
    localhostNodePorts: true,
    source: `defaults (${reason})`,
  }
}

/** nodePortAddresses unset or empty means every local address; otherwise a CIDR must hold 127.0.0.1 ("primary" does not). */
function nodePortsOnLoopback(addresses: unknown): boolean {
  if (!Array.isArray(addresses) || addresses.length === 0) return true
  return addresses.some((a) => typeof a === 'string' && inCidr(a, '127.0.0.1'))
}

function text(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined
}
