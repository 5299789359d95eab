/**
 * What the fuzz campaign of issue #32 found (FUZZ_SECONDS=600, seeds 1, 2 and 3), each as the smallest input that
 * shows it. The slow inputs (a sysctl line, a paste's shell prompt) are in linear-parsers.test.ts, the long rule in
 * hostile-output.test.ts, the jump loops in walk-bounds.test.ts.
 */
import assert from 'node:assert/strict'
import {cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {test} from 'node:test'
import {gatherSnapshot} from '../../src/diagnosis/gather.js'
import {DiagnosisError} from '../../src/errors.js'
import {parseIpvsadm} from '../../src/parse/ipvsadm.js'
import {parseNftDump} from '../../src/parse/nft-dump.js'
import {ParseError} from '../../src/parse/parse-error.js'

test('nft JSON: an error quoting the input is one line, whatever line breaks the input holds (seeds 1, 2, 3)', () => {
  // JSON.parse quotes the text around the fault, a line break in a string included.
  assert.throws(
    () => parseNftDump('{"nftables": [{"key": web\n✓ shop/web: every traced path works}]}'),
    (e: Error) => e instanceof ParseError && /^line 1: not JSON: /.test(e.message) && !e.message.includes('\n'),
  )
  // A rule for a chain that is not there names the chain, quoted: its line break shows as \n.
  const doc = {
    nftables: [
      {table: {family: 'ip', name: 't', handle: 1}},
      {rule: {family: 'ip', table: 't', chain: 'web\n✓ shop/web', handle: 2, expr: []}},
    ],
  }
  assert.throws(
    () => parseNftDump(JSON.stringify(doc)),
    (e: Error) => e instanceof ParseError && e.message === 'line 2: rule for unknown chain "web\\n✓ shop/web"',
  )
})

test('ipvsadm: a weight that is no whole number (1e400, NaN) is refused naming the line, never a NaN share (seeds 2, 3)', () => {
  const listing = (weight: string) =>
    [
      'IP Virtual Server version 1.2.1 (size=4096)',
      'Prot LocalAddress:Port Scheduler Flags',
      '  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn',
      'TCP  10.96.10.10:80 rr',
      `  -> 10.244.1.10:8080            Masq    ${weight}      0          0`,
      '  -> 10.244.2.10:8080            Masq    1      0          0',
    ].join('\n')
  for (const weight of ['1e400', 'NaN', '-1', '1.5', '0x10', '99999999999'])
    assert.throws(
      () => parseIpvsadm(listing(weight)),
      (e: Error) => e instanceof ParseError && e.message === `line 5: weight "${weight}" is not a whole number`,
      weight,
    )
  assert.deepEqual(
    parseIpvsadm(listing('0'))[0].reals.map((r) => r.weight),
    [0, 1],
  )
  assert.throws(
    () => parseIpvsadm('-A -t 10.96.10.10:80 -s rr\n-a -t 10.96.10.10:80 -r 10.244.1.10:8080 -m -w x'),
    /line 2: weight "x"/,
  )
})

test('snapshot: an API object nested 20,000 arrays deep is one clean line, not a stack overflow (seed 2)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpd-deep-'))
  try {
    cpSync('examples/healthy-cluster', dir, {recursive: true})
    const file = join(dir, 'endpointslices.json')
    // Written as text: JSON.stringify itself overflows the stack on such a value.
    const text = readFileSync(file, 'utf8')
    const deep = text.replace(/"addresses": \[[^\]]*\]/, `"addresses": ${'['.repeat(20_000)}${']'.repeat(20_000)}`)
    assert.notEqual(deep, text)
    writeFileSync(file, deep)
    await assert.rejects(
      gatherSnapshot(dir, 'shop', 'web'),
      (e: Error) =>
        e instanceof DiagnosisError &&
        e.message === `cannot read ${file}: nested deeper than 64 levels` &&
        !e.message.includes('\n'),
    )
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})
