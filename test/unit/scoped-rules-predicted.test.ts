import assert from 'node:assert/strict'
import {test} from 'node:test'
import {readScopedRules, type RulesScope} from '../../src/node/read/scoped-rules.js'
import type {NodeAccess, RunResult} from '../../src/node/transport/node-access.js'
import type {ArgsOf, NodeCommandKey} from '../../src/node/read/node-reads.js'
import type {IptablesTable} from '../../src/node/read/command-arguments.js'

/** A node's iptables (iptables-nft 1.8.9) as `iptables -S CHAIN` answers it: each chain's -S lines by "table chain". */
function fakeNode(chains: Record<string, string[]>): NodeAccess & {rounds: string[][]} {
  const rounds: string[][] = []
  const run = async <K extends NodeCommandKey>(key: K, ...args: ArgsOf<K>): Promise<RunResult> => {
    if (key === 'iptablesVersion')
      return {kind: 'ran', code: 0, stdout: Buffer.from('iptables v1.8.9 (nf_tables)\n'), stderr: ''}
    assert.equal(key, 'iptablesChains')
    const {reads} = args[0] as {reads: Array<{table: IptablesTable; chain: string}>}
    rounds.push(reads.map((r) => `${r.table} ${r.chain}`))
    const out = reads.map(({table, chain}) => {
      const lines = chains[`${table} ${chain}`]
      if (lines) return `${lines.join('\n')}\n#kpd-chain 0`
      const builtin = ['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING'].includes(chain)
      return builtin ? `-P ${chain} ACCEPT\n#kpd-chain 0` : '#kpd-chain 1'
    })
    return {kind: 'ran', code: 0, stdout: Buffer.from(out.join('\n') + '\n'), stderr: ''}
  }
  return {
    rounds,
    run: run as NodeAccess['run'],
    openTcp: async () => ({kind: 'refused', outcome: 'not-probed', reason: 'no'}),
    readFile: async () => ({kind: 'missing', reason: 'no'}),
    describe: () => ({transport: 'ssh', address: 'fake', tcpVia: 'nothing'}),
    close: () => {},
  }
}

const SVC = 'KUBE-SVC-AAAAAAAAAAAAAAAA'
const SEP = 'KUBE-SEP-BBBBBBBBBBBBBBBB'
const CHAINS: Record<string, string[]> = {
  'nat PREROUTING': ['-P PREROUTING ACCEPT', '-A PREROUTING -j KUBE-SERVICES'],
  'nat KUBE-SERVICES': ['-N KUBE-SERVICES', `-A KUBE-SERVICES -d 10.96.0.5/32 -p tcp -m tcp --dport 80 -j ${SVC}`],
  [`nat ${SVC}`]: [`-N ${SVC}`, `-A ${SVC} -j ${SEP}`],
  [`nat ${SEP}`]: [`-N ${SEP}`, `-A ${SEP} -p tcp -m tcp -j DNAT --to-destination 10.244.1.5:8080`],
  'filter FORWARD': ['-P FORWARD ACCEPT', '-A FORWARD -j KUBE-FORWARD'],
  'filter KUBE-FORWARD': ['-N KUBE-FORWARD', '-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP'],
  // There, but nothing the Service's packets pass jumps to it; and it jumps on to a chain of its own.
  'filter KUBE-NODEPORTS': ['-N KUBE-NODEPORTS', '-A KUBE-NODEPORTS -j KUBE-ELSEWHERE'],
  'filter KUBE-ELSEWHERE': ['-N KUBE-ELSEWHERE', '-A KUBE-ELSEWHERE -j DROP'],
}

const SCOPE: RulesScope = {addresses: ['10.96.0.5'], ports: [80], chains: [{table: 'nat', chain: 'KUBE-SERVICES'}]}

test('chain by chain read: predicted chains save rounds and change nothing read (unreached ones and what they jump to are left out, absent ones are no failure)', async () => {
  const plain = fakeNode(CHAINS)
  const without = await readScopedRules(plain, 4, SCOPE)
  const ahead = fakeNode(CHAINS)
  const predicted: RulesScope['predicted'] = [
    {table: 'filter', chain: 'KUBE-FORWARD'},
    {table: 'filter', chain: 'KUBE-NODEPORTS'},
    {table: 'filter', chain: 'KUBE-PROXY-FIREWALL'},
    {table: 'nat', chain: SEP},
  ]
  const withPredicted = await readScopedRules(ahead, 4, {...SCOPE, predicted})
  assert.ok(without.kind === 'read' && withPredicted.kind === 'read')
  const lines = (dump: Buffer) => dump.toString().split('\n').slice(1).sort()
  assert.deepEqual(lines(withPredicted.dump), lines(without.dump))
  assert.ok(without.dump.toString().includes(`-A ${SEP} -p tcp`), 'the endpoint chain is read')
  assert.ok(!without.dump.toString().includes('KUBE-NODEPORTS'), 'an unreached chain is not part of the read')
  // Without predictions: built-ins and KUBE-SERVICES, then the Service's chain and KUBE-FORWARD, then its endpoint.
  assert.equal(plain.rounds.length, 3)
  assert.equal(ahead.rounds.length, 2)
  assert.ok(!ahead.rounds.flat().includes('filter KUBE-ELSEWHERE'), 'an unreached chain is not followed')
})
