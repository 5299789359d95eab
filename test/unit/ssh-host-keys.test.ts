/**
 * Host keys as the SSH transport judges them, against a real OpenSSH sshd on loopback that has an ed25519 and an RSA
 * host key: the algorithms offered follow what known_hosts holds, @revoked is refused, a changed key is refused even
 * when the SSH config turns strict checking off, and an unknown key accepted by the config is said as a warning.
 */
import assert from 'node:assert/strict'
import {spawn, spawnSync, type ChildProcess} from 'node:child_process'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {after, before, test} from 'node:test'
import {knownHostsName} from '../../src/node/transport/ssh/known-hosts.js'
import type {SshHostConfig} from '../../src/node/transport/ssh/ssh-config.js'
import {SshSession} from '../../src/node/transport/ssh/ssh-session.js'
import {freePort} from '../helpers/free-port.js'
import {HIDE_SHELL_STARTUP} from '../lab/lab-sshd.js'
import {sshKeyPair} from '../helpers/ssh-keys.js'

const sshdPath = spawnSync('sh', ['-c', 'command -v sshd || ls /usr/sbin/sshd'], {encoding: 'utf8'})
  .stdout.trim()
  .split('\n')[0]
const asRoot = process.getuid?.() === 0

interface Pair {
  path: string
  /** `TYPE BASE64` as known_hosts and authorized_keys list it. */
  pub: string
}

function keygen(dir: string, name: string, type: 'ed25519' | 'rsa'): Pair {
  const pair = sshKeyPair(type)
  const path = join(dir, name)
  writeFileSync(path, pair.private, {mode: 0o600})
  return {path, pub: pair.public.trim().split(/\s+/).slice(0, 2).join(' ')}
}

let dir = ''
let port = 0
let server: ChildProcess | undefined
let hostEd: Pair
let hostRsa: Pair
let otherRsa: Pair
let user: Pair

before(async () => {
  if (!sshdPath || !asRoot) return
  mkdirSync('/run/sshd', {recursive: true}) // sshd's privilege separation folder (what its package's unit creates)
  dir = mkdtempSync(join(tmpdir(), 'kpd-hostkeys-'))
  hostEd = keygen(dir, 'host_ed25519', 'ed25519')
  hostRsa = keygen(dir, 'host_rsa', 'rsa')
  otherRsa = keygen(dir, 'other_rsa', 'rsa')
  user = keygen(dir, 'user_ed25519', 'ed25519')
  writeFileSync(join(dir, 'authorized_keys'), `${user.pub}\n`, {mode: 0o600})
  port = await freePort()
  const config = join(dir, 'sshd_config')
  writeFileSync(
    config,
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${hostEd.path}`,
      `HostKey ${hostRsa.path}`,
      `PidFile ${join(dir, 'sshd.pid')}`,
      `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
      'StrictModes no',
      'PermitRootLogin prohibit-password',
      'UsePAM no',
      'PasswordAuthentication no',
      '',
    ].join('\n'),
  )
  // In a mount namespace of its own, without root's shell start-up files (see HIDE_SHELL_STARTUP); exec keeps its pid.
  server = spawn(
    'unshare',
    [
      '--mount',
      '--propagation',
      'private',
      'sh',
      '-c',
      `${HIDE_SHELL_STARTUP}; exec "$0" -D -e -f "$1"`,
      sshdPath,
      config,
    ],
    {stdio: ['ignore', 'ignore', 'pipe']},
  )
  let stderr = ''
  server.stderr!.on('data', (d: Buffer) => (stderr += d.toString()))
  await new Promise<void>((resolve, reject) => {
    const started = Date.now()
    const poll = () => {
      if (/Server listening/.test(stderr)) return resolve()
      if (server!.exitCode !== null || Date.now() - started > 10_000)
        return reject(new Error(`sshd did not start: ${stderr}`))
      setTimeout(poll, 50)
    }
    poll()
  })
})

after(() => {
  server?.kill()
  if (dir) rmSync(dir, {recursive: true, force: true})
})

/** Connects as root with the test's user key, known_hosts holding `lines`, the config's StrictHostKeyChecking as given. */
async function connect(
  lines: string[],
  strict?: string,
  insecure = false,
): Promise<{warning?: string} | {error: string}> {
  const knownHosts = join(dir, `known_hosts-${Math.random().toString(36).slice(2)}`)
  writeFileSync(knownHosts, lines.map((l) => `${l}\n`).join(''))
  const host: SshHostConfig = {
    alias: 'node-a',
    hostName: '127.0.0.1',
    port,
    user: 'root',
    identityFiles: [user.path],
    userKnownHostsFiles: [knownHosts],
    strictHostKeyChecking: strict,
    identitiesOnly: true,
  }
  try {
    const session = await SshSession.connect(host, {insecureIgnoreHostKey: insecure, timeoutMs: 10_000})
    const r = await session.exec('id -u' as never)
    session.close()
    assert.equal(r.stdout.toString().trim(), '0', 'the session really runs commands')
    return {warning: session.hostKeyWarning}
  } catch (e) {
    return {error: (e as Error).message}
  } finally {
    rmSync(knownHosts, {force: true})
  }
}

const skip = !sshdPath ? 'no sshd on this machine' : !asRoot ? 'needs root (sshd logs in as root)' : false
const name = () => knownHostsName('127.0.0.1', port)

test(
  "more commands at once than sshd's MaxSessions (10) on one connection: each waits its turn and runs",
  {skip},
  async () => {
    const knownHosts = join(dir, 'known_hosts-sessions')
    writeFileSync(knownHosts, `${name()} ${hostEd.pub}\n`)
    const session = await SshSession.connect(
      {
        alias: 'node-a',
        hostName: '127.0.0.1',
        port,
        user: 'root',
        identityFiles: [user.path],
        userKnownHostsFiles: [knownHosts],
        identitiesOnly: true,
      },
      {insecureIgnoreHostKey: false, timeoutMs: 10_000},
    )
    try {
      const results = await Promise.all(Array.from({length: 25}, () => session.exec('sleep 0.2; id -u' as never)))
      assert.deepEqual(
        results.map((r) => [r.code, r.stdout.toString().trim()]),
        Array.from({length: 25}, () => [0, '0']),
      )
    } finally {
      session.close()
    }
  },
)

test(
  'known_hosts holding only the RSA key: the RSA key is asked for and matches (no false man-in-the-middle)',
  {skip},
  async () => {
    assert.deepEqual(await connect([`${name()} ${hostRsa.pub}`]), {warning: undefined})
  },
)

test(
  'a @revoked key is refused, also with StrictHostKeyChecking no and with --insecure-ignore-host-key',
  {skip},
  async () => {
    const revoked = `@revoked ${name()} ${hostEd.pub}`
    const expected = {error: `host key of ${name()} is marked @revoked in ${'FILE'}: refusing to connect`}
    for (const [strict, insecure] of [
      [undefined, false],
      ['no', false],
      [undefined, true],
    ] as const) {
      const r = await connect([revoked], strict, insecure)
      assert.ok('error' in r, `${strict} ${insecure}: refused`)
      assert.equal(r.error.replace(/ in \S+known_hosts-\w+:/, ' in FILE:'), expected.error)
    }
  },
)

test(
  'a changed key is refused whatever the SSH config says; only --insecure-ignore-host-key lets it through',
  {skip},
  async () => {
    for (const strict of [undefined, 'yes', 'no', 'accept-new']) {
      const r = await connect([`${name()} ${otherRsa.pub}`], strict)
      assert.ok(
        'error' in r && /does not match .*: refusing to connect \(possible man-in-the-middle\)$/.test(r.error),
        `${strict}: ${JSON.stringify(r)}`,
      )
    }
    assert.deepEqual(
      await connect([`${name()} ${otherRsa.pub}`], undefined, true),
      {warning: undefined},
      'the flag is warned about once per run by the caller',
    )
  },
)

test(
  'an unknown key: refused by default, accepted with a warning when the SSH config turns checking off',
  {skip},
  async () => {
    const refused = await connect([])
    assert.ok(
      'error' in refused &&
        /is not in known_hosts .*: add it \(ssh-keyscan\) or pass --insecure-ignore-host-key$/.test(refused.error),
      JSON.stringify(refused),
    )
    for (const strict of ['no', 'off', 'accept-new']) {
      assert.deepEqual(await connect([], strict), {
        warning: `host key of ${name()} is not in known_hosts and was accepted unchecked (StrictHostKeyChecking in the SSH config): a man-in-the-middle would go unnoticed`,
      })
    }
  },
)
