import assert from 'node:assert/strict'
import {test} from 'node:test'
import {runBounded} from '../helpers/bounded-run.js'
import {ODD_WHITESPACE} from '../helpers/odd-whitespace.js'

const SWEEP = new URL('../helpers/odd-whitespace.js', import.meta.url).href
const ELEMENTS = new URL('../../src/parse/nft-elements.js', import.meta.url).href
/** Generous: the sweep takes about a second; a parser that loops on a character runs into either limit instead. */
const LIMITS = {heapMb: 512, timeoutMs: 120_000}

test('nft element lists: a vertical tab, form feed or no-break space separates words like a space', async () => {
  for (const ch of ['\v', '\f', '\u00a0', '\u2028', '\ufeff']) {
    const r = await runBounded(
      ELEMENTS,
      'parseElements',
      [`10.96.7.7${ch}.${ch}tcp . 80 : goto svc-x,${ch}10.0.0.0/8`],
      LIMITS,
    )
    assert.deepEqual(
      r,
      {ok: true, value: [{key: ['10.96.7.7', 'tcp', '80'], value: 'goto svc-x'}, {key: ['10.0.0.0/8']}]},
      named(ch),
    )
  }
})

/** The character as a test name shows it: U+000B, not the character itself. */
const named = (ch: string) => `U+${ch.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`

for (const ch of ODD_WHITESPACE)
  test(`every parser reads input with ${named(ch)} in it to a result or a clean parse error`, async () => {
    assert.deepEqual(await runBounded(SWEEP, 'parseWithOddWhitespace', [ch], LIMITS), {ok: true, value: []})
  })
