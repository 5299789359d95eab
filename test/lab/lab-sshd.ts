import type {ChildProcess} from 'node:child_process'
import {readFileSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {freePort} from '../helpers/free-port.js'
import {madeOncePerRun} from './run-once.js'
import {run, startDaemon} from './sh.js'

/**
 * A lab node's SSH: a real sshd inside the node's network namespace on its 127.0.0.1:22, reached from the host through
 * a socat relay on the host's 127.0.0.1 (nothing joins the host's interfaces). Shared by the e2e lab and the bench.
 */

/**
 * The client's key pair (`dir`/id_ed25519) and the authorized_keys every lab sshd accepts, made once per test run;
 * returns the private key.
 */
export function labClientKey(dir: string): string {
  madeOncePerRun('client-key', dir, (to) => {
    run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(to, 'id_ed25519')])
    writeFileSync(join(to, 'authorized_keys'), readFileSync(join(to, 'id_ed25519.pub')))
  })
  return join(dir, 'id_ed25519')
}

/**
 * A node's host key pair (`dir`/hostkey-KEY), made once per test run; returns the public key as known_hosts wants it
 * ("type base64").
 */
export function labHostKey(dir: string, key: string): string {
  madeOncePerRun(`hostkey-${key}`, dir, (to) =>
    run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(to, `hostkey-${key}`)]),
  )
  return readFileSync(join(dir, `hostkey-${key}.pub`), 'utf8')
    .split(' ')
    .slice(0, 2)
    .join(' ')
}

/** Writes node KEY's sshd_config (key-only root login, PidFile and host key in `dir`); returns its path. */
export function writeSshdConfig(dir: string, key: string, opts: {forwarding: boolean; forceCommand?: string}): string {
  const cfg = join(dir, `sshd-${key}.conf`)
  writeFileSync(
    cfg,
    [
      'ListenAddress 127.0.0.1',
      'Port 22',
      `HostKey ${join(dir, `hostkey-${key}`)}`,
      `PidFile ${join(dir, `sshd-${key}.pid`)}`,
      `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
      'PermitRootLogin prohibit-password',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'UsePAM no',
      'StrictModes no',
      `AllowTcpForwarding ${opts.forwarding ? 'yes' : 'no'}`,
      ...(opts.forceCommand ? [`ForceCommand ${opts.forceCommand}`] : []),
      'LogLevel ERROR',
      '',
    ].join('\n'),
  )
  return cfg
}

/**
 * Hides root's shell start-up files from a lab sshd and its commands. sshd runs every command through root's shell,
 * and Debian's bash reads ~/.bashrc for a command sent over SSH: whatever the machine's user put there (pyenv's shim
 * rehash under a lock, on this one) ran for every command the doctor sends and made lab nodes time out for reasons no
 * real node has. The bind mounts are made in the mount namespace `ip netns exec` gives sshd (a slave of the host's),
 * or one `unshare --mount` gives it: the host's files are untouched and still seen everywhere else.
 */
export const HIDE_SHELL_STARTUP =
  'home=$(getent passwd root | cut -d: -f6); for f in .bashrc .bash_profile .bash_login .profile; do [ -f "$home/$f" ] && mount --bind /dev/null "$home/$f"; done; true'

/** Starts sshd in the foreground inside `ns` with config `cfg`, after `before` (a shell snippet; "$1".. are `args`). */
export function startSshdInNs(
  ns: string,
  cfg: string,
  logs: string[],
  before?: {script: string; args: string[]},
): ChildProcess {
  const start = `${HIDE_SHELL_STARTUP}; ${before ? `${before.script}; ` : ''}exec /usr/sbin/sshd -D -e -f "$${(before?.args.length ?? 0) + 1}"`
  return startDaemon('ip', ['netns', 'exec', ns, 'sh', '-c', start, 'lab-sshd', ...(before?.args ?? []), cfg], logs)
}

/** A relay on the host's 127.0.0.1 (a free port) to `ns`'s 127.0.0.1:22; returns the port and the relay process. */
export async function startSshRelay(
  dir: string,
  key: string,
  ns: string,
  logs: string[],
): Promise<{port: number; proc: ChildProcess}> {
  const port = await freePort()
  const relay = join(dir, `relay-${key}.sh`)
  writeFileSync(relay, `#!/bin/sh\nexec ip netns exec ${ns} socat STDIO TCP:127.0.0.1:22\n`, {mode: 0o755})
  const proc = startDaemon('socat', [`TCP-LISTEN:${port},bind=127.0.0.1,reuseaddr,fork`, `EXEC:${relay}`], logs)
  return {port, proc}
}

/** A Host block of the client's ssh_config for a lab node behind its relay. */
export function sshClientHost(host: {
  name: string
  port: number
  identity: string
  knownHosts: string
  hostKeyAlias?: string
  compression?: boolean
}): string[] {
  return [
    `Host ${host.name}`,
    '  HostName 127.0.0.1',
    `  Port ${host.port}`,
    '  User root',
    `  IdentityFile ${host.identity}`,
    `  UserKnownHostsFile ${host.knownHosts}`,
    '  IdentitiesOnly yes',
    ...(host.hostKeyAlias ? [`  HostKeyAlias ${host.hostKeyAlias}`] : []),
    ...(host.compression ? ['  Compression yes'] : []),
    '',
  ]
}
