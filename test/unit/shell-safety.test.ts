import {test} from 'node:test'
import assert from 'node:assert/strict'
import {spawnSync} from 'node:child_process'
import {quoteWord, renderArgv, renderPipeline, sshArgv} from '../../src/model/shell.js'
import {printable} from '../../src/report/printable.js'
import {buildCommandLine} from '../../src/node/node-commands.js'

/** What a real shell makes of the printed line: the argv it would run (printed by a child). */
function argvAfterShell(line: string): string[] {
  const r = spawnSync('sh', ['-c', `set -- ${line}; for a in "$@"; do printf '%s\\0' "$a"; done`], {encoding: 'utf8'})
  return r.stdout.split('\0').slice(0, -1)
}

test('quoted words survive the shell unchanged, hostile ones included', () => {
  const hostile = ["KUBE-SEP-X';id;'", '$(id)', '`id`', 'a b', '<pod>', "it's", '', '-n', 'x\ny', '*']
  for (const w of hostile) assert.deepEqual(argvAfterShell(quoteWord(w)), [w], w)
  assert.equal(renderArgv(['grep', '--', 'KUBE-SVC-67NZLRHBNDSAWJRO']), 'grep -- KUBE-SVC-67NZLRHBNDSAWJRO')
  assert.equal(
    renderPipeline([['iptables-save'], ['grep', '--', "X';id;'"]]),
    `iptables-save | grep -- 'X'\\'';id;'\\'''`,
  )
})

test('a remote word is quoted for the remote shell, then the whole for the local one', () => {
  const argv = sshArgv(['ssh', 'node-b'], ['sudo', 'conntrack', '-D', '-d', '10.0.0.1;id'])
  const local = argvAfterShell(renderArgv(argv))
  assert.deepEqual(local.slice(0, 2), ['ssh', 'node-b'])
  assert.deepEqual(argvAfterShell(local[2]), ['sudo', 'conntrack', '-D', '-d', '10.0.0.1;id'])
})

test('terminal controls in untrusted text are shown as their escapes, line breaks and tabs included (#32)', () => {
  assert.equal(printable('KUBE-SVC\u001b[2J\u001b]0;pwned\u0007-X\u009b'), 'KUBE-SVC\\x1b[2J\\x1b]0;pwned\\x07-X\\x9b')
  assert.equal(printable('a\tb\nc\u202ed\r\u2028\ufeff\u{e0001}'), 'a\\tb\\nc\\u202ed\\r\\u2028\\ufeff\\u{e0001}')
  assert.equal(printable('plain ✓ → ünïcödé 名前'), 'plain ✓ → ünïcödé 名前')
})

test('chain by chain reads: only chain names of the allowed shape, single-quoted, as root, in bounded batches', () => {
  const read = (chain: string, table = 'nat') => ({family: 4 as const, reads: [{table: table as 'nat', chain}]})
  assert.equal(
    buildCommandLine('iptablesChains', true, {
      family: 6,
      reads: [{table: 'filter', chain: 'KUBE-SVC-67NZLRHBNDSAWJRO'}],
    }),
    `ip6tables --modprobe=/bin/false -w 5 -t filter -S 'KUBE-SVC-67NZLRHBNDSAWJRO'; echo "#kpd-chain $?"`,
  )
  for (const hostile of ["X';id;'", '$(id)', 'a b', '-F', '', 'x'.repeat(29), 'cali-fw\nid'])
    assert.throws(() => buildCommandLine('iptablesChains', true, read(hostile)), /is not a chain name/, hostile)
  for (const ok of ['cali-fw-cali1234', 'DOCKER-ISOLATION-STAGE-1', 'KUBE-ROUTER-INPUT', 'f2b-sshd', 'x'.repeat(28)])
    assert.ok(buildCommandLine('iptablesChains', true, read(ok)).includes(`-S '${ok}'`))
  assert.throws(
    () => buildCommandLine('iptablesChains', true, read('INPUT', 'security; id')),
    /is not an iptables table/,
  )
  assert.throws(() => buildCommandLine('iptablesChains', false, read('INPUT')), /as root only/)
  assert.throws(
    () =>
      buildCommandLine('iptablesChains', true, {
        family: 4,
        reads: Array.from({length: 257}, () => ({table: 'nat' as const, chain: 'INPUT'})),
      }),
    /1 to 256 chains/,
  )
  assert.throws(
    () => buildCommandLine('iptablesChains', true, {family: 5 as 4, reads: [{table: 'nat', chain: 'INPUT'}]}),
    /not an IP family/,
  )
})
