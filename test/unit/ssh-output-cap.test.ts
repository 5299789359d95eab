import assert from 'node:assert/strict'
import {test} from 'node:test'
import {gzipSync} from 'node:zlib'
import {linesOfBatch, type CommandLine} from '../../src/node/node-commands.js'
import {answerBatch, answerFirstExec, isFirstExec} from '../helpers/batch-answer.js'
import type {ExecResult} from '../../src/node/transport/ssh/ssh-session.js'
import {SshNodeAccess, type SshChannel} from '../../src/node/transport/ssh/ssh-transport.js'
import {COMMAND_OUTPUT_CAP_BYTES, DUMP_OUTPUT_CAP_BYTES} from '../../src/util/output-cap.js'

const MiB = 1024 * 1024

/**
 * A root login on a node with gzip whose dumps come back as `dump` (compressed, as the node's gzip sent it, when
 * `compression`); `caps` collects the output cap each command line was run with.
 */
function session(
  dump: Buffer,
  opts: {compression?: boolean; maxOutputBytes?: number; caps?: string[]} = {},
): SshChannel {
  return {
    host: {hostName: '10.0.0.7', port: 22, compression: opts.compression ?? true},
    maxOutputBytes: opts.maxOutputBytes,
    exec(command: CommandLine, _timeoutMs?: number, maxOutputBytes?: number): Promise<ExecResult> {
      opts.caps?.push(`${linesOfBatch(command).join(' + ')} ${maxOutputBytes ?? 'default'}`)
      return Promise.resolve(
        isFirstExec(command)
          ? answerFirstExec(command)
          : answerBatch(command, () => ({code: 0, stdout: dump, stderr: ''})),
      )
    },
    forward: () => Promise.reject(new Error('no forwarding here')),
    close() {},
  }
}

/** An iptables-save dump of `bytes` (rules of kube-proxy's shape), as a node with 12,000 Services prints about 36.5 MiB. */
function bigDump(bytes: number): string {
  const rule =
    '-A KUBE-SEP-ABCDEFGHIJKLMNOP -p tcp -m comment --comment "shop/web:http" -m tcp -j DNAT --to-destination 10.244.1.7:8080\n'
  return `*nat\n${rule.repeat(Math.ceil(bytes / rule.length))}COMMIT\n`
}

test('a gzip bomb under Compression yes stops at the cap once decompressed, naming the command and the cap', async () => {
  // 40 MiB of zeros in about 40 KB: past a 32 MiB cap once decompressed.
  const bomb = gzipSync(Buffer.alloc(40 * MiB), {level: 9})
  assert.ok(bomb.length < 100_000)
  await assert.rejects(new SshNodeAccess(session(bomb, {maxOutputBytes: 32 * MiB})).run('iptablesSave'), {
    message:
      '"iptables-save" printed more than 32 MiB once decompressed (Compression yes): stopped there (the cap on one command\'s output)',
  })
  // Under the cap, the same dump is read whole.
  const fine = gzipSync(Buffer.from('*nat\nCOMMIT\n\n#kpd-exit 0\n'))
  const r = await new SshNodeAccess(session(fine)).run('iptablesSave')
  assert.deepEqual(r.kind === 'ran' && [r.code, r.stdout.toString()], [0, '*nat\nCOMMIT\n'])
  await assert.rejects(
    new SshNodeAccess(session(gzipSync(Buffer.alloc(2048)), {maxOutputBytes: 1024})).run('iptablesSave'),
    {
      message:
        '"iptables-save" printed more than 1024 bytes once decompressed (Compression yes): stopped there (the cap on one command\'s output)',
    },
  )
})

test("a 12,000-Service node's dump (past the command cap) reads whole over SSH, compressed or not: the dumps get the dump cap", async () => {
  const dump = bigDump(40 * MiB)
  assert.ok(dump.length > COMMAND_OUTPUT_CAP_BYTES)
  for (const compression of [false, true]) {
    const caps: string[] = []
    const wire = compression ? gzipSync(Buffer.from(`${dump}\n#kpd-exit 0\n`), {level: 1}) : Buffer.from(dump)
    const access = new SshNodeAccess(session(wire, {compression, caps}))
    const r = await access.run('iptablesSave')
    assert.deepEqual(r.kind === 'ran' && [r.code, r.stdout.length], [0, dump.length], `compression ${compression}`)
    // The small reads keep the command cap; only the dump is given the dump cap.
    assert.deepEqual(caps, [
      ...(compression
        ? [
            'id -u + command -v gzip + iptables -V + ip6tables -V default',
            `{ iptables-save; printf '\\n#kpd-exit %d\\n' "$?"; } | gzip -1 ${DUMP_OUTPUT_CAP_BYTES}`,
          ]
        : ['id -u + iptables -V + ip6tables -V default', `iptables-save ${DUMP_OUTPUT_CAP_BYTES}`]),
    ])
  }
})
