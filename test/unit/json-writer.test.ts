import assert from 'node:assert/strict'
import {test} from 'node:test'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {gatherSnapshot} from '../../src/diagnosis/gather.js'
import {escapeJsonControls, writeJson} from '../../src/report/json-writer.js'
import {buildReport} from '../../src/report/report.js'

/** Everything writeJson writes, and the size of its largest piece. */
function written(value: unknown): {text: string; pieces: number; largest: number} {
  const pieces: string[] = []
  writeJson(value, (chunk) => pieces.push(chunk))
  return {text: pieces.join(''), pieces: pieces.length, largest: Math.max(...pieces.map((p) => p.length))}
}

test('writeJson writes what JSON.stringify(value, null, 2) does, with a newline', async () => {
  const g = await gatherSnapshot('examples/broken-cluster', 'shop', 'web')
  const report = buildReport(diagnose(g.cluster, g.observations), {explain: true})
  const odd = {
    a: [1, undefined, () => 1, null, -0, NaN, Infinity, 1e21, 'x'],
    b: undefined,
    c: {},
    d: [],
    e: {f: [[], [{}]], g: new Date(0), h: 'ünïcödé \ud800 "quoted" \\ \n \u0001'},
    [Symbol('s')]: 1,
    i: true,
    j: new Map([['k', 1]]),
  }
  for (const value of [report, odd, [], {}, 'text', 42, null, [[[]]]])
    assert.equal(written(value).text, JSON.stringify(value, null, 2) + '\n')
})

test('writeJson escapes what JSON.stringify leaves raw and a terminal acts on; the value parses back the same', () => {
  const value = {s: 'del\x7f c1\x9b nel\x85 bidi\u202e ls\u2028 ps\u2029 bom\ufeff zw\u200b tag\u{e0001} esc\x1b nl\n'}
  const text = written(value).text
  // eslint-disable-next-line no-control-regex -- the controls are what the test looks for
  assert.doesNotMatch(text, /[\x7f-\x9f\u2028\u2029\u202e\ufeff\u200b\u{e0001}\x1b]/u)
  assert.deepEqual(JSON.parse(text), value)
  assert.equal(escapeJsonControls('"\u2028"'), '"\\u2028"')
})

test('writeJson writes a document larger than the longest string V8 makes, in pieces of about 64 KB', () => {
  // 513 references to one 1 MiB string: 538 million characters of JSON, over V8's 536,870,888 (2^29 - 24).
  const N = 513
  const big = 'x'.repeat(1 << 20)
  const value = {outcomes: Array.from({length: N}, () => big)}
  assert.throws(() => JSON.stringify(value), RangeError)
  let chars = 0
  let pieces = 0
  let largest = 0
  writeJson(value, (chunk) => {
    chars += chunk.length
    pieces++
    largest = Math.max(largest, chunk.length)
  })
  // Each element on its own line: four spaces, the quoted string, a comma (none after the last), a line break.
  const expected = N * (4 + (1 << 20) + 2 + 2) - 1 + '{\n  "outcomes": [\n'.length + '  ]\n}\n'.length
  assert.equal(chars, expected)
  assert.ok(pieces >= N, `${pieces} pieces`)
  assert.ok(largest <= (1 << 16) + (1 << 20) + 16, `the largest piece is ${largest} characters`)
})

test('escapeJsonControls escapes exactly the C1 controls, U+2028, U+2029 and format characters, of every code point', () => {
  // The character set the output promises, in this Node.js's Unicode: its quick search for candidates must miss none.
  const promised = /^[\u007f-\u009f\u2028\u2029\p{Cf}]$/u
  const wrong: string[] = []
  for (let c = 0; c <= 0x10ffff; c++) {
    if (c >= 0xd800 && c <= 0xdfff) continue
    const ch = String.fromCodePoint(c)
    const text = `"a→✓${ch}"`
    const escaped = escapeJsonControls(text) !== text
    if (escaped !== promised.test(ch)) wrong.push(c.toString(16))
  }
  assert.deepEqual(wrong, [])
})
