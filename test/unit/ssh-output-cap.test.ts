import assert from 'node:assert/strict'
import {test} from 'node:test'
import {gzipSync} from 'node:zlib'
import type {CommandLine} from '../../src/node/node-commands.js'
import type {ExecResult} from '../../src/node/transport/ssh/ssh-session.js'
import {SshNodeAccess, type SshChannel} from '../../src/node/transport/ssh/ssh-transport.js'

/** A root login on a node with gzip whose dumps come back as `dump` (already compressed, as the node's gzip sent it). */
function session(dump: Buffer, maxOutputBytes?: number): SshChannel {
  return {
    host: {hostName: '10.0.0.7', port: 22, compression: true},
    maxOutputBytes,
    exec(command: CommandLine): Promise<ExecResult> {
      if (command === 'id -u') return Promise.resolve({code: 0, stdout: Buffer.from('0\n'), stderr: ''})
      if (command === 'command -v gzip')
        return Promise.resolve({code: 0, stdout: Buffer.from('/bin/gzip\n'), stderr: ''})
      return Promise.resolve({code: 0, stdout: dump, stderr: ''})
    },
    forward: () => Promise.reject(new Error('no forwarding here')),
    close() {},
  }
}

test('a gzip bomb under Compression yes stops at the cap once decompressed, naming the command and the cap', async () => {
  // 40 MiB of zeros in about 40 KB: past the 32 MiB cap once decompressed.
  const bomb = gzipSync(Buffer.alloc(40 * 1024 * 1024), {level: 9})
  assert.ok(bomb.length < 100_000)
  await assert.rejects(new SshNodeAccess(session(bomb)).run('iptablesSave'), {
    message:
      '"iptables-save" printed more than 32 MiB once decompressed (Compression yes): stopped there (the cap on one command\'s output)',
  })
  // Under the cap, the same dump is read whole.
  const fine = gzipSync(Buffer.from('*nat\nCOMMIT\n\n#kpd-exit 0\n'))
  const r = await new SshNodeAccess(session(fine)).run('iptablesSave')
  assert.deepEqual(r.kind === 'ran' && [r.code, r.stdout.toString()], [0, '*nat\nCOMMIT\n'])
  // The session's own cap applies to the decompressed size too.
  await assert.rejects(new SshNodeAccess(session(gzipSync(Buffer.alloc(2048)), 1024)).run('iptablesSave'), {
    message:
      '"iptables-save" printed more than 1024 bytes once decompressed (Compression yes): stopped there (the cap on one command\'s output)',
  })
})
