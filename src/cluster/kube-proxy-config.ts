import {DEFAULT_MASQUERADE_BIT, type KubeProxyConfig} from './types.js'

/**
 * Reads the few fields the diagnosis needs from a KubeProxyConfiguration YAML (the kubeadm ConfigMap's
 * config.conf). Only plain "key: value" scalars at top level and under "iptables:" are read.
 */
export function parseKubeProxyConfig(yaml: string, source: string): KubeProxyConfig {
  const config: KubeProxyConfig = {mode: '', masqueradeBit: DEFAULT_MASQUERADE_BIT, masqueradeAll: false, source}
  let section = ''
  for (const raw of yaml.split('\n')) {
    const line = raw.replace(/\s+#.*$/, '')
    const m = /^(\s*)([A-Za-z][\w-]*):\s*(.*)$/.exec(line)
    if (!m) continue
    const [, indent, key, rawValue] = m
    const value = rawValue.trim().replace(/^["']|["']$/g, '')
    if (indent.length === 0) {
      section = value === '' ? key : ''
      if (key === 'mode') config.mode = value
      else if (key === 'clusterCIDR' && value) config.clusterCIDR = value
    } else if (section === 'iptables') {
      if (key === 'masqueradeBit' && /^\d+$/.test(value)) config.masqueradeBit = Number(value)
      else if (key === 'masqueradeAll') config.masqueradeAll = value === 'true'
    } else if (section === 'ipvs') {
      if (key === 'scheduler' && value) config.ipvsScheduler = value
      else if (key === 'strictARP') config.ipvsStrictARP = value === 'true'
    }
  }
  return config
}

export function defaultKubeProxyConfig(reason: string): KubeProxyConfig {
  return {mode: '', masqueradeBit: DEFAULT_MASQUERADE_BIT, masqueradeAll: false, source: `defaults (${reason})`}
}
