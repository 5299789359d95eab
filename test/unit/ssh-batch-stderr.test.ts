/**
 * A batch's stderr over a real SSH session (SshSession against an in-process ssh2 server that runs each line with this
 * machine's `sh` or `bash`, fake programs first on PATH): every read's stderr comes back to that read, whole, however
 * long the others' are. A batch's stderr holds each read's after the others' (the lowest index last), so a cap on the
 * exec's stderr as one command's (its first 4 KB, for messages) dropped the last reads' stderr: on an iptables-nft node
 * ip6tables' "incompatible" warnings came first and a failing route lookup's "Network is unreachable" was lost
 * ("exited 2: no message"), turning KPD-ROUTE-MISSING into a not-checked row (path-reads-lab, s42live's 4-exec layout).
 */
import assert from 'node:assert/strict'
import {spawn} from 'node:child_process'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {test} from 'node:test'
import ssh2 from 'ssh2'
import {SshSession} from '../../src/node/transport/ssh/ssh-session.js'
import {SshNodeAccess, type SshChannel} from '../../src/node/transport/ssh/ssh-transport.js'
import type {RunResult} from '../../src/node/transport/node-access.js'
import {sshKeyPair} from '../helpers/ssh-keys.js'

/** What the server sends of a command's stderr in one packet: the client sees it in that many pieces. */
const PACKET = 512

/**
 * An SSH server on loopback that runs each exec with `shell -c`, `bin` first on PATH, and sends its stderr in PACKET
 * byte packets (as sshd sends what it reads from the command's pipe, in pieces); its port.
 */
async function shellServer(shell: string, bin: string): Promise<{port: number; close: () => void}> {
  const hostKey = sshKeyPair('ed25519')
  const server = new ssh2.Server({hostKeys: [hostKey.private]}, (client) => {
    client.on('authentication', (ctx) => ctx.accept())
    client.on('error', () => undefined)
    client.on('ready', () => {
      client.on('session', (acceptSession) => {
        acceptSession().on('exec', (accept, _reject, info) => {
          const channel = accept()
          const child = spawn(shell, ['-c', info.command], {
            env: {...process.env, PATH: `${bin}:${process.env.PATH}`},
            stdio: ['ignore', 'pipe', 'pipe'],
          })
          child.stdout.on('data', (chunk: Buffer) => channel.write(chunk))
          child.stderr.on('data', (chunk: Buffer) => {
            for (let at = 0; at < chunk.length; at += PACKET) channel.stderr.write(chunk.subarray(at, at + PACKET))
          })
          child.on('close', (code) => {
            channel.exit(code ?? 255)
            channel.end()
          })
        })
      })
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {port: (server.address() as {port: number}).port, close: () => server.close()}
}

/** ip6tables-legacy-save's stderr on an iptables-nft node: one warning per chain of kube-proxy's (about 2.5 KB). */
const WARNINGS = Array.from(
  {length: 24},
  (_, i) =>
    `ip6tables v1.8.9 (nf_tables): chain \`KUBE-SEP-${String(i).padStart(16, 'X')}' in table \`nat' is incompatible, use 'nft' tool.\n`,
).join('')
const UNREACHABLE = 'RTNETLINK answers: Network is unreachable\n'

/** A session as node-a to the test server on `port`, with a key of its own kept in `bin`. */
async function connectTo(port: number, bin: string): Promise<SshSession> {
  const key = sshKeyPair('ed25519')
  writeFileSync(join(bin, 'id_ed25519'), key.private, {mode: 0o600})
  return SshSession.connect(
    {
      alias: 'node-a',
      hostName: '127.0.0.1',
      port,
      user: 'root',
      identityFiles: [join(bin, 'id_ed25519')],
      identitiesOnly: true,
      userKnownHostsFiles: [],
    },
    {insecureIgnoreHostKey: true, timeoutMs: 20_000},
  )
}

const outcome = (r: RunResult) => (r.kind === 'ran' ? [r.code, r.stdout.toString(), r.stderr] : r.what)

for (const shell of ['sh', 'bash'])
  test(`ssh batch over a real session (${shell}): each read's stderr comes back to it whole, however long the stderr of the reads beside it`, async () => {
    const bin = mkdtempSync(join(tmpdir(), 'kpd-batch-stderr-'))
    const script = (body: string) => `#!/bin/sh\n${body}\n`
    const program = (name: string, body: string) => writeFileSync(join(bin, name), script(body), {mode: 0o755})
    writeFileSync(join(bin, 'warnings6'), WARNINGS)
    writeFileSync(join(bin, 'warnings4'), WARNINGS.replaceAll('ip6', 'ip'))
    program('ip6tables-legacy-save', `cat '${join(bin, 'warnings6')}' >&2`)
    program('iptables-legacy-save', `cat '${join(bin, 'warnings4')}' >&2`)
    program('ip', `printf 'RTNETLINK answers: Network is unreachable\\n' >&2; exit 2`)
    program('ipvsadm', `echo "Can't initialize ipvs: Protocol not available" >&2; exit 2`)
    const server = await shellServer(shell, bin)
    const session = await connectTo(server.port, bin)
    try {
      const access = new SshNodeAccess(session)
      await access.usesSudo()
      // One batch, one exec: the route table's read (the lowest index) prints its stderr last.
      const answers = await Promise.all([
        access.run('routeTable'),
        access.run('ipvsadm'),
        access.run('iptablesLegacySave'),
        access.run('ip6tablesLegacySave'),
      ])
      assert.deepEqual(answers.map(outcome), [
        [2, '', UNREACHABLE],
        [2, '', "Can't initialize ipvs: Protocol not available\n"],
        [0, '', WARNINGS.replaceAll('ip6', 'ip')],
        [0, '', WARNINGS],
      ])
      // A character cut between two packets: the read's stderr alone begins the exec's, so byte PACKET - 1 is the first
      // of "é"'s two bytes.
      program('cilium-dbg', `printf '%s\\303\\251\\n' '${'x'.repeat(PACKET - 1)}' >&2; exit 1`)
      assert.deepEqual(outcome(await access.run('ciliumServiceList')), [1, '', `${'x'.repeat(PACKET - 1)}é\n`])
    } finally {
      session.close()
      server.close()
      rmSync(bin, {recursive: true, force: true})
    }
  })

for (const shell of ['sh', 'bash'])
  test(`ssh batch stopped at its output cap (${shell}): a read that ended before the stop but whose lane had not printed its stderr says its messages were not received, never that it said nothing`, async () => {
    const bin = mkdtempSync(join(tmpdir(), 'kpd-batch-stopped-'))
    const program = (name: string, body: string) =>
      writeFileSync(join(bin, name), `#!/bin/sh\n${body}\n`, {mode: 0o755})
    // The rule counters' lane (one read after another): one chain read, one gone. Its stderr is printed once the lane
    // after it (iptables-save, flooding past the cap) has ended, which the stop comes before.
    program(
      'iptables',
      `for a; do c=$a; done; if [ "$c" = KUBE-GONE ]; then echo 'iptables: No chain/target/match by that name.' >&2; exit 1; fi; echo "-N $c"`,
    )
    program('iptables-save', `yes -- '-A KUBE-FLOOD -j ACCEPT' | head -c 1048576`)
    const server = await shellServer(shell, bin)
    const session = await connectTo(server.port, bin)
    try {
      // The session's cap on a dump lowered to 64 KiB (SshChannel's maxOutputBytes): the flood stops the batch there.
      const channel: SshChannel = {
        host: session.host,
        stepMs: session.stepMs,
        maxOutputBytes: 65536,
        exec: (...a) => session.exec(...a),
        forward: (ip, port) => session.forward(ip, port),
        close: () => session.close(),
      }
      const access = new SshNodeAccess(channel)
      await access.usesSudo()
      const answers = await Promise.allSettled([
        access.run('ruleCounters', {family: 4, table: 'nat', chain: 'KUBE-SERVICES'}),
        access.run('ruleCounters', {family: 4, table: 'nat', chain: 'KUBE-GONE'}),
        access.run('iptablesSave'),
      ])
      const stop = `"iptables-save" printed more than 65536 bytes: stopped there (the cap on one command's output)`
      const unheard = `(its messages were not received: ${stop}, in the same SSH command, before they were printed)\n`
      assert.deepEqual(
        answers.map((a) => (a.status === 'fulfilled' ? outcome(a.value) : (a.reason as Error).message)),
        [[0, '-N KUBE-SERVICES\n', unheard], [1, '', unheard], stop],
      )
    } finally {
      session.close()
      server.close()
      rmSync(bin, {recursive: true, force: true})
    }
  })
