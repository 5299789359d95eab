import assert from 'node:assert/strict'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {test} from 'node:test'
import {readNftFile} from '../../src/model/modes/dump-files.js'
import {NftRuleset} from '../../src/parse/nft-ruleset.js'

/**
 * A kube-proxy-shaped ruleset of `services` Services (a chain per Service and per endpoint, a map of them all), larger
 * than one 4 MiB piece of the streaming index from about 12,000 Services on.
 */
function ruleset(services: number): string {
  const lines = [
    'table ip kube-proxy {',
    '\tcomment "rules for kube-proxy"',
    '\tmap service-ips {',
    '\t\ttype ipv4_addr . inet_proto . inet_service : verdict',
    '\t\tcomment "ClusterIP, ExternalIP and LoadBalancer IP traffic"',
  ]
  const ip = (i: number) => `10.96.${(i >> 8) & 255}.${i & 255}`
  const els: string[] = []
  for (let i = 0; i < services; i++) els.push(`${ip(i)} . tcp . 80 comment "ns/svc-${i}:http" : goto service-${i}`)
  lines.push(`\t\telements = { ${els.join(',\n\t\t\t     ')} }`, '\t}')
  lines.push(
    '\tchain nat-prerouting {',
    '\t\ttype nat hook prerouting priority dstnat; policy accept;',
    '\t\tjump services',
  )
  lines.push('\t}', '\tchain services {', '\t\tip daddr . meta l4proto . th dport vmap @service-ips', '\t}')
  for (let i = 0; i < services; i++) {
    lines.push(`\tchain service-${i} {`)
    lines.push(`\t\tnumgen random mod 2 vmap { 0 : goto endpoint-${i}-a, 1 : goto endpoint-${i}-b }`, '\t}')
    for (const e of ['a', 'b'])
      lines.push(
        `\tchain endpoint-${i}-${e} {`,
        `\t\tmeta l4proto tcp dnat to 10.244.${i & 255}.${e === 'a' ? 1 : 2}:8080`,
        '\t}',
      )
  }
  lines.push('}', '')
  return lines.join('\n')
}

function withFile<T>(text: string, use: (file: string) => T): T {
  const dir = mkdtempSync(join(tmpdir(), 'kpd-nft-index-'))
  try {
    const file = join(dir, 'ruleset.nft')
    writeFileSync(file, text)
    return use(file)
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
}

test('nft index: a ruleset file of several pieces has every chain in order, each rule with its own line', () => {
  const text = ruleset(15_000)
  assert.ok(text.length > 4 << 20, `${text.length} bytes: more than one piece`)
  const lines = text.split('\n')
  const headers = lines.flatMap((l, i) => (/^\tchain (\S+) \{$/.test(l) ? [{name: l.slice(7, -2), line: i + 1}] : []))
  withFile(text, (file) => {
    const {ruleset: rs, notes} = readNftFile(file)
    try {
      assert.deepEqual(notes, [])
      const t = rs.table('ip kube-proxy')!
      assert.deepEqual(
        [...t.chains.keys()],
        headers.map((h) => h.name),
      )
      for (const h of [headers[0], headers[1], ...headers.slice(-3), headers[Math.floor(headers.length / 2)]]) {
        const chain = t.chains.get(h.name)!
        assert.equal(chain.line, h.line, h.name)
        assert.ok(chain.rules.length > 0, h.name)
        for (const r of chain.rules) assert.equal(lines[r.line - 1].trim(), r.text, `${h.name} line ${r.line}`)
      }
      assert.deepEqual(
        rs.baseChains('prerouting', ['ip', 'inet']).map((c) => [c.name, c.line, c.base]),
        [['nat-prerouting', headers[0].line, {type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept'}]],
      )
      assert.equal(t.sets.get('service-ips')!.elements.length, 15_000)
      assert.equal(t.chains.get('no-such-chain'), undefined)
    } finally {
      rs.close()
    }
  })
})

test('nft index: a file read as it is and the same text in memory give the same ruleset', () => {
  const text = ruleset(300)
  withFile(text, (file) => {
    const {ruleset: fromFile} = readNftFile(file)
    const inMemory = NftRuleset.parse(text)
    const whole = (rs: NftRuleset) =>
      rs.tables.map((t) => ({...t, chains: [...t.chains.values()], sets: [...t.sets.values()]}))
    assert.deepEqual(whole(fromFile), whole(inMemory))
    fromFile.close()
  })
})

test('nft index: a paste the normaliser changes far into a large file (an `nft -a` handle) is normalised', () => {
  const text = ruleset(15_000).replace(
    '\tchain endpoint-14999-b {\n\t\tmeta l4proto tcp dnat to 10.244.151.2:8080\n',
    '\tchain endpoint-14999-b {\n\t\tmeta l4proto tcp dnat to 10.244.151.2:8080 # handle 7\n',
  )
  assert.ok(text.includes('# handle 7') && text.indexOf('# handle 7') > 4 << 20)
  withFile(text, (file) => {
    const {ruleset: rs, notes} = readNftFile(file)
    assert.deepEqual(notes, ['removed 1 "# handle N" comment (`nft -a` output)'])
    assert.deepEqual(
      rs
        .table('ip kube-proxy')!
        .chains.get('endpoint-14999-b')!
        .rules.map((r) => r.text),
      ['meta l4proto tcp dnat to 10.244.151.2:8080'],
    )
  })
})

test('nft index: a chain defined again keeps its first place and takes the last body (and base) it is given', () => {
  const text = [
    'table ip t {',
    '\tchain a {',
    '\t\ttype nat hook prerouting priority 0; policy accept;',
    '\t\tjump b',
    '\t}',
    '\tchain b {',
    '\t\taccept',
    '\t}',
    '\tchain c {',
    '\t\ttype filter hook input priority 0; policy accept;',
    '\t}',
    // Read as text (a no-break space ends the line), the same name as a header read from the bytes.
    '\tchain b {\u00a0',
    '\t\tdrop',
    '\t}',
    '\tchain a {',
    '\t\tjump c',
    '\t}',
    '\tchain "d" {',
    '\t\ttype nat hook output priority 0; policy accept;',
    '\t}',
    '\tchain c {',
    '\t\ttype filter hook input priority 5; policy drop;',
    '\t}',
    '}',
    '',
  ].join('\n')
  for (const rs of [NftRuleset.parse(text), withFile(text, (file) => readNftFile(file).ruleset)]) {
    const t = rs.table('ip t')!
    assert.equal(t.chains.size, 4)
    assert.deepEqual([...t.chains.keys()], ['a', 'b', 'c', 'd'])
    assert.deepEqual(
      [...t.chains.values()].map((c) => [c.name, c.line, c.rules.map((r) => r.text)]),
      [
        ['a', 15, ['jump c']],
        ['b', 12, ['drop']],
        ['c', 21, []],
        ['d', 18, []],
      ],
    )
    assert.deepEqual(
      t.chains.bases().map((c) => [c.name, c.base]),
      [
        ['c', {type: 'filter', hook: 'input', priority: 5, policy: 'drop'}],
        ['d', {type: 'nat', hook: 'output', priority: 0, policy: 'accept'}],
      ],
    )
    assert.equal(t.chains.get('b')!.rules[0].line, 13)
    assert.equal(t.chains.has('e'), false)
  }
})
