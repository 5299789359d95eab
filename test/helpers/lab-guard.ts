import {existsSync} from 'node:fs'
import {tryRun} from '../lab/sh.js'

/** Why the e2e lab cannot run here, or undefined when it can. In CI this is a failure, not a skip. */
export function labUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'not root'
  for (const tool of ['ip', 'iptables-restore', 'iptables-save', 'socat', 'dnsmasq', 'ssh-keygen', 'openssl', 'bridge']) {
    if (tryRun('sh', ['-c', `command -v ${tool}`]).code !== 0) return `${tool} is not installed`
  }
  if (!existsSync('/usr/sbin/sshd')) return '/usr/sbin/sshd is not installed (openssh-server)'
  const probe = `kpdprobe${process.pid}`
  const r = tryRun('ip', ['netns', 'add', probe])
  if (r.code !== 0) return `cannot create network namespaces: ${r.stderr.trim()}`
  tryRun('ip', ['netns', 'del', probe])
  return undefined
}
