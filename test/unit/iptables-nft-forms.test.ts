import assert from 'node:assert/strict'
import {randomBytes} from 'node:crypto'
import {readFileSync} from 'node:fs'
import {test} from 'node:test'
import {BufferSource} from '../../src/parse/dump-source.js'
import {IptablesSave} from '../../src/parse/iptables-save.js'
import {parseNftDump} from '../../src/parse/nft-dump.js'
import {IptablesTracer} from '../../src/trace/iptables-tracer.js'
import {NftTracer} from '../../src/trace/nft-tracer.js'
import type {Packet, TraceResult} from '../../src/trace/types.js'
import {tryRun} from '../lab/sh.js'

/**
 * iptables-nft's rules in each form a node or a paste gives them: iptables-nft-save (walked by the iptables engine),
 * and `nft list ruleset` text and `nft -j` JSON (walked by the nft engine). The fixtures were recorded from the real
 * tools (iptables v1.8.9 (nf_tables), nftables v1.0.6); the last test makes them again with the tools installed.
 */
const FIXTURE = 'test/fixtures/nft/iptables-nft-forms'
const NODE = '192.168.1.10'

/** "UNKNOWN": nft prints the match or target as `xt …` without its options; the verdict names iptables-nft-save. */
type Expected = Record<string, number> | 'UNKNOWN'
interface Form {
  chain: string
  dport: number
  save: Expected
  text: Expected
  json: Expected
}

const DROP_QUARTER = {DROP: 0.25, ACCEPT: 0.75}
const DROPPED = {DROP: 1}
const FORMS: Form[] = [
  {chain: 'RANDOM', dport: 1001, save: DROP_QUARTER, text: DROP_QUARTER, json: 'UNKNOWN'},
  {
    chain: 'NOT-RANDOM',
    dport: 1002,
    save: {DROP: 0.75, ACCEPT: 0.25},
    text: {DROP: 0.75, ACCEPT: 0.25},
    json: 'UNKNOWN',
  },
  // One packet in four: a share, as the walk cannot know the connection's count.
  {chain: 'NTH', dport: 1003, save: DROP_QUARTER, text: DROP_QUARTER, json: 'UNKNOWN'},
  {chain: 'COMMENT', dport: 1004, save: DROPPED, text: DROPPED, json: DROPPED},
  // --set-xmark 0x8/0xffff0000 then --mark 0x8/0x8: nft prints `meta mark set mark and 0xffff xor 0x8`.
  {chain: 'MARKS', dport: 1005, save: DROPPED, text: DROPPED, json: 'UNKNOWN'},
  // A new connection's mark is 0: --mark 0x10 does not match.
  {chain: 'CONNMARK', dport: 1006, save: {ACCEPT: 1}, text: {ACCEPT: 1}, json: 'UNKNOWN'},
  {chain: 'LIMIT', dport: 1007, save: DROPPED, text: DROPPED, json: DROPPED},
  {chain: 'LOGGED', dport: 1008, save: DROPPED, text: DROPPED, json: DROPPED},
  // nfacct only counts: every packet matches.
  {chain: 'NFACCT', dport: 1009, save: DROPPED, text: DROPPED, json: DROPPED},
]

const packet = (dport: number): Packet => ({
  src: '10.244.1.5',
  dst: '10.244.2.10',
  proto: 'tcp',
  dport,
  sport: 40000,
  inIface: 'cbr0',
  outIface: 'eth0',
})

function shares(r: TraceResult): Expected {
  if (r.outcomes.some((o) => o.verdict === 'UNKNOWN')) {
    for (const o of r.outcomes.filter((x) => x.verdict === 'UNKNOWN'))
      assert.match(
        o.reason ?? '',
        /nft prints it as "xt (match|target) \S+" without its options\): read this table with iptables-nft-save/,
      )
    return 'UNKNOWN'
  }
  const out: Record<string, number> = {}
  for (const o of r.outcomes) out[o.verdict] = Math.round(((out[o.verdict] ?? 0) + o.probability) * 1e6) / 1e6
  return out
}

function assertForms(inputs: {save: string; text: string; json: string}, forms: Form[], what: string): void {
  const save = new IptablesTracer(IptablesSave.parse(new BufferSource(Buffer.from(inputs.save))), {
    localAddresses: [NODE],
  })
  const text = new NftTracer(parseNftDump(inputs.text), {localAddresses: [NODE]})
  const json = new NftTracer(parseNftDump(inputs.json), {localAddresses: [NODE]})
  for (const f of forms) {
    const p = packet(f.dport)
    assert.deepEqual(shares(save.trace(p)), f.save, `${what} iptables-nft-save, ${f.chain}`)
    assert.deepEqual(shares(text.trace(p)), f.text, `${what} nft list ruleset, ${f.chain}`)
    assert.deepEqual(shares(json.trace(p)), f.json, `${what} nft -j list ruleset, ${f.chain}`)
  }
}

test('iptables-nft forms: statistic, comment, mark, connmark, limit, LOG and nfacct as iptables-nft-save and nft print them (recorded)', () => {
  assertForms(
    {
      save: readFileSync(`${FIXTURE}.nft-save.txt`, 'utf8'),
      text: readFileSync(`${FIXTURE}.list.txt`, 'utf8'),
      json: readFileSync(`${FIXTURE}.list.json`, 'utf8'),
    },
    FORMS,
    'recorded',
  )
})

test('iptables-nft forms: loaded with the real iptables-nft, read back with iptables-nft-save, nft and nft -j', (t) => {
  const tools = ['nft', 'iptables-nft-restore', 'iptables-nft-save', 'nfacct']
  if (process.getuid?.() !== 0 || tools.some((c) => tryRun('sh', ['-c', `command -v ${c}`]).code !== 0)) {
    if (process.env.CI) assert.fail(`needs root and ${tools.join(', ')} in CI`)
    t.skip(`needs root and ${tools.join(', ')}`)
    return
  }
  const ns = `kpdxt${randomBytes(4).toString('hex')}`
  assert.equal(tryRun('ip', ['netns', 'add', ns]).code, 0)
  try {
    const inNs = (args: string[], input?: string) => {
      const r = tryRun('ip', ['netns', 'exec', ns, ...args], input)
      assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`)
      return r.stdout
    }
    inNs(['nfacct', 'add', 'counted'])
    inNs(['iptables-nft-restore'], readFileSync(`${FIXTURE}.save`, 'utf8'))
    const live = {
      save: inNs(['iptables-nft-save']),
      text: inNs(['nft', 'list', 'ruleset']),
      json: inNs(['nft', '-j', 'list', 'ruleset']),
    }
    assertForms(live, FORMS, 'live')
    const uncommented = (s: string) => s.replace(/^#.*\n/gm, '')
    assert.equal(
      uncommented(live.save),
      readFileSync(`${FIXTURE}.nft-save.txt`, 'utf8'),
      'the recorded save is what iptables-nft-save prints',
    )
    assert.equal(live.text, readFileSync(`${FIXTURE}.list.txt`, 'utf8'), 'the recorded text is what nft prints')
  } finally {
    tryRun('ip', ['netns', 'del', ns])
  }
})
