import {test} from 'node:test'
import assert from 'node:assert/strict'
import {spawnSync} from 'node:child_process'
import {quoteWord, renderArgv, renderPipeline, sshArgv} from '../../src/model/shell.js'
import {printable} from '../../src/report/printable.js'

/** What a real shell makes of the printed line: the argv it would run (printed by a child). */
function argvAfterShell(line: string): string[] {
  const r = spawnSync('sh', ['-c', `set -- ${line}; for a in "$@"; do printf '%s\\0' "$a"; done`], {encoding: 'utf8'})
  return r.stdout.split('\0').slice(0, -1)
}

test('quoted words survive the shell unchanged, hostile ones included', () => {
  const hostile = ["KUBE-SEP-X';id;'", '$(id)', '`id`', 'a b', '<pod>', "it's", '', '-n', 'x\ny', '*']
  for (const w of hostile) assert.deepEqual(argvAfterShell(quoteWord(w)), [w], w)
  assert.equal(renderArgv(['grep', '--', 'KUBE-SVC-67NZLRHBNDSAWJRO']), 'grep -- KUBE-SVC-67NZLRHBNDSAWJRO')
  assert.equal(renderPipeline([['iptables-save'], ['grep', '--', "X';id;'"]]), `iptables-save | grep -- 'X'\\'';id;'\\'''`)
})

test('a remote word is quoted for the remote shell, then the whole for the local one', () => {
  const argv = sshArgv(['ssh', 'node-b'], ['sudo', 'conntrack', '-D', '-d', '10.0.0.1;id'])
  const local = argvAfterShell(renderArgv(argv))
  assert.deepEqual(local.slice(0, 2), ['ssh', 'node-b'])
  assert.deepEqual(argvAfterShell(local[2]), ['sudo', 'conntrack', '-D', '-d', '10.0.0.1;id'])
})

test('terminal controls are stripped from untrusted text, newlines and tabs kept', () => {
  assert.equal(printable('KUBE-SVC\u001b[2J\u001b]0;pwned\u0007-X\u009b'), 'KUBE-SVC-X')
  assert.equal(printable('a\tb\nc\u202ed'), 'a\tb\ncd')
})
