import assert from 'node:assert/strict'
import {existsSync} from 'node:fs'
import {test} from 'node:test'
import {tryRun} from '../lab/sh.js'

/** Why the e2e lab cannot run here, or undefined when it can. In CI this is a failure, not a skip. */
function labUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'not root'
  for (const tool of [
    'ip',
    'iptables-restore',
    'iptables-save',
    'socat',
    'dnsmasq',
    'ssh-keygen',
    'openssl',
    'bridge',
  ]) {
    if (tryRun('sh', ['-c', `command -v ${tool}`]).code !== 0) return `${tool} is not installed`
  }
  if (!existsSync('/usr/sbin/sshd')) return '/usr/sbin/sshd is not installed (openssh-server)'
  const probe = `kpdprobe${process.pid}`
  const r = tryRun('ip', ['netns', 'add', probe])
  if (r.code !== 0) return `cannot create network namespaces: ${r.stderr.trim()}`
  tryRun('ip', ['netns', 'del', probe])
  return undefined
}

/**
 * The preamble of every e2e lab file: why the lab cannot run here (undefined when it can), said loudly on stderr; in
 * CI a failing test rather than a skip. Pass the result as the suites' `skip`.
 */
export function labGuard(): string | undefined {
  const why = labUnavailable()
  if (why) {
    process.stderr.write(`\n!!! e2e lab cannot run here: ${why} !!!\n\n`)
    if (process.env.CI) test('e2e lab can run in CI', () => assert.fail(`the e2e lab cannot run: ${why}`))
  }
  return why
}
