/**
 * known_hosts: @revoked keys are refused whatever other lines say, and the host key algorithms offered follow the key
 * types known_hosts holds for the host, proven against a real sshd that has both an ed25519 and an RSA key.
 */
import assert from 'node:assert/strict'
import {spawn, spawnSync} from 'node:child_process'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {test} from 'node:test'
import ssh2 from 'ssh2'
import {checkKnownHosts, hostKeyAlgorithms, knownHostsName} from '../../src/node/transport/ssh/known-hosts.js'
import {freePort} from '../helpers/free-port.js'
import {sshKeyPair} from '../helpers/ssh-keys.js'

const blob = (pub: string) => Buffer.from(pub.trim().split(/\s+/)[1], 'base64')

/** A host key pair in OpenSSH's formats (what sshd reads and known_hosts lists), made by ssh2. */
function keygen(dir: string, type: 'ed25519' | 'rsa'): {path: string; pub: string} {
  const pair = sshKeyPair(type)
  const path = join(dir, `host_${type}`)
  writeFileSync(path, pair.private, {mode: 0o600})
  return {path, pub: pair.public.trim()}
}

test('known_hosts: a @revoked key is refused even where another line lists it; revoked keys offer no algorithm', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpd-kh-'))
  try {
    const ed = keygen(dir, 'ed25519')
    const rsa = keygen(dir, 'rsa')
    const [edType, edKey] = ed.pub.split(/\s+/)
    const [rsaType, rsaKey] = rsa.pub.split(/\s+/)
    const file = join(dir, 'known_hosts')
    writeFileSync(
      file,
      [
        `node-a ${edType} ${edKey}`,
        `@revoked * ${edType} ${edKey}`,
        `node-a ${rsaType} ${rsaKey}`,
        `@cert-authority *.example ${rsaType} ${rsaKey}`,
        '',
      ].join('\n'),
    )
    assert.deepEqual(checkKnownHosts([file], 'node-a', blob(ed.pub)), {status: 'revoked', file})
    assert.deepEqual(
      checkKnownHosts([file], 'node-b', blob(ed.pub)),
      {status: 'revoked', file},
      '@revoked * covers every host',
    )
    assert.deepEqual(checkKnownHosts([file], 'node-a', blob(rsa.pub)), {status: 'match', file})
    assert.deepEqual(
      checkKnownHosts([file], 'node-b', blob(rsa.pub)),
      {status: 'unknown'},
      'a @cert-authority line is not a host key',
    )
    assert.deepEqual(hostKeyAlgorithms([file], 'node-a'), ['rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa'])
    assert.equal(hostKeyAlgorithms([file], 'node-b'), undefined)
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})

/** The host key a real sshd presents when offered `algorithms` (undefined: ssh2's defaults). Only the handshake runs. */
function presentedKey(port: number, algorithms: string[] | undefined): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const client = new ssh2.Client()
    const timer = setTimeout(() => {
      client.end()
      reject(new Error('no host key within 10 s'))
    }, 10_000)
    client.on('error', () => undefined)
    client.connect({
      host: '127.0.0.1',
      port,
      username: 'nobody',
      readyTimeout: 10_000,
      ...(algorithms ? {algorithms: {serverHostKey: algorithms as never}} : {}),
      hostVerifier: (key: Buffer) => {
        clearTimeout(timer)
        resolve(key)
        client.end()
        return false
      },
    })
  })
}

test('known_hosts holding only a node\'s RSA key: offering what it holds gets the RSA key, not a false "changed key"', async (t) => {
  const sshd = spawnSync('sh', ['-c', 'command -v sshd || ls /usr/sbin/sshd'], {encoding: 'utf8'})
    .stdout.trim()
    .split('\n')[0]
  if (!sshd) return t.skip('no sshd on this machine')
  const dir = mkdtempSync(join(tmpdir(), 'kpd-kh-sshd-'))
  const ed = keygen(dir, 'ed25519')
  const rsa = keygen(dir, 'rsa')
  const port = await freePort()
  const config = join(dir, 'sshd_config')
  writeFileSync(
    config,
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${ed.path}`,
      `HostKey ${rsa.path}`,
      `PidFile ${join(dir, 'sshd.pid')}`,
      'UsePAM no',
      'PasswordAuthentication no',
      '',
    ].join('\n'),
  )
  const server = spawn(sshd, ['-D', '-e', '-f', config], {stdio: ['ignore', 'ignore', 'pipe']})
  let stderr = ''
  server.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
  try {
    await new Promise<void>((resolve, reject) => {
      const started = Date.now()
      const poll = () => {
        if (/Server listening/.test(stderr)) return resolve()
        if (server.exitCode !== null || Date.now() - started > 10_000)
          return reject(new Error(`sshd did not start: ${stderr}`))
        setTimeout(poll, 50)
      }
      poll()
    })
    const knownHosts = join(dir, 'known_hosts')
    const name = knownHostsName('127.0.0.1', port)
    writeFileSync(knownHosts, `${name} ${rsa.pub.split(/\s+/).slice(0, 2).join(' ')}\n`)
    const byDefault = await presentedKey(port, undefined)
    assert.equal(
      checkKnownHosts([knownHosts], name, byDefault).status,
      'mismatch',
      "ssh2's defaults get the ed25519 key: the false man-in-the-middle",
    )
    const offered = hostKeyAlgorithms([knownHosts], name)
    assert.deepEqual(offered, ['rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa'])
    const negotiated = await presentedKey(port, offered)
    assert.deepEqual(checkKnownHosts([knownHosts], name, negotiated), {status: 'match', file: knownHosts})
  } finally {
    server.kill()
    rmSync(dir, {recursive: true, force: true})
  }
})
