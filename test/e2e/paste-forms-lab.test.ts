/**
 * The paste forms `trace` accepts that iptables itself prints, round-tripped through the real tools in a network
 * namespace this test creates (and removes by name): the paste fixture's nat table restored with iptables-restore,
 * then `iptables -S -v` (counters "-c P B") and `iptables -t nat -S` + `iptables -S` pasted one after the other must
 * trace as `iptables-save` of the same namespace does; `iptables -L -n -v` is refused with the command to run.
 */
import assert from 'node:assert/strict'
import {readFileSync} from 'node:fs'
import {after, before, describe, test} from 'node:test'
import {labGuard} from '../helpers/lab-guard.js'
import {runCli} from '../helpers/run-cli.js'
import {inNs, run, tryRun} from '../lab/sh.js'

const why = labGuard()
const NS = `kpdpaste${process.pid}`
const POD = ['--src', '10.244.3.20', '--dst', '10.96.20.30', '--dport', '443']
const FILTER_REJECT =
  '-A FORWARD -d 10.96.30.40/32 -p tcp -m comment --comment "shop/orders:http has no endpoints" -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable'

/** The fixture's `iptables -t nat -S` as restore input (-N lines as declarations, the -P lines' policies kept). */
function restoreInput(): string {
  const lines = readFileSync('test/fixtures/pastes/iptables-S-with-prompt.txt', 'utf8').split('\n')
  const policies = lines.filter((l) => l.startsWith('-P ')).map((l) => l.replace(/^-P (\S+) (\S+)$/, ':$1 $2 [0:0]'))
  const chains = lines.filter((l) => l.startsWith('-N ')).map((l) => l.replace(/^-N (\S+)$/, ':$1 - [0:0]'))
  const rules = lines.filter((l) => l.startsWith('-A '))
  return ['*nat', ...policies, ...chains, ...rules, 'COMMIT', '*filter', FILTER_REJECT, 'COMMIT', ''].join('\n')
}

async function traced(paste: string, packet = POD) {
  const r = await runCli(['trace', '--iptables-save', '-', ...packet, '-o', 'json'], {}, 60_000, paste)
  assert.equal(r.code, 0, r.stderr)
  return r.json
}

const shape = (j: {verdict: string; destinations: string[]; masquerade: boolean}) => ({
  verdict: j.verdict,
  destinations: j.destinations,
  masquerade: j.masquerade,
})

describe('paste forms round-tripped through the real iptables', {skip: why}, () => {
  before(() => {
    run('ip', ['netns', 'add', NS])
    inNs(NS, 'iptables-restore', [], restoreInput())
  })
  after(() => {
    tryRun('ip', ['netns', 'del', NS])
  })

  test('`iptables -S -v` (counters) traces as iptables-save does', async () => {
    const save = inNs(NS, 'iptables-save', ['-t', 'nat'])
    const listed = inNs(NS, 'iptables', ['-t', 'nat', '-S', '-v'])
    assert.match(listed, / -c \d+ \d+ -j KUBE-SERVICES/, 'real iptables prints counters before -j')
    const whole = await traced(save)
    assert.equal(whole.verdict, 'DNAT')
    const fromList = await traced(`# iptables -t nat -S -v\n${listed}`)
    assert.deepEqual(shape(fromList), shape(whole))
    assert.ok(fromList.notes.some((n: string) => n.startsWith('removed packet counters ("-c PACKETS BYTES"')))
  })

  test('`iptables -t nat -S` then `iptables -S`, pasted with their prompts: two tables, as iptables-save has them', async () => {
    const nat = inNs(NS, 'iptables', ['-t', 'nat', '-S'])
    const filter = inNs(NS, 'iptables', ['-S'])
    const paste = `$ sudo iptables -t nat -S\n${nat}$ sudo iptables -S\n${filter}`
    const save = inNs(NS, 'iptables-save', [])
    const orders = ['--src', '10.244.3.20', '--dst', '10.96.30.40', '--dport', '80']
    for (const packet of [POD, orders]) {
      const fromSave = await traced(save, packet)
      const fromPaste = await traced(paste, packet)
      assert.deepEqual(shape(fromPaste), shape(fromSave), packet.join(' '))
    }
    assert.equal((await traced(save, orders)).verdict, 'REJECT')
  })

  test('`iptables -L -n -v` is refused with the command to run instead', async () => {
    const listing = inNs(NS, 'iptables', ['-t', 'nat', '-L', '-n', '-v'])
    const r = await runCli(
      ['trace', '--iptables-save', '-', ...POD],
      {},
      60_000,
      `$ iptables -t nat -L -n -v\n${listing}`,
    )
    assert.equal(r.code, 2)
    assert.match(
      r.stderr,
      /^kproxy-doctor: stdin: line 2: this is `iptables -L` output, .*: run `iptables-save -t nat` on the node and paste that\n$/,
    )
  })
})
