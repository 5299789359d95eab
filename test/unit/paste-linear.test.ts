import assert from 'node:assert/strict'
import {test} from 'node:test'
import {runBounded} from '../helpers/bounded-run.js'
import {PASTE_WORST_CASES} from '../helpers/paste-worst-cases.js'

const WORST_CASES = new URL('../helpers/paste-worst-cases.js', import.meta.url).href

/**
 * Normalising a paste is linear in its size. Each input below is a megabyte built to make a backtracking expression
 * quadratic: linear, it takes milliseconds; quadratic, hours (the 200 KB case of issue #32 took 58 s, and 1 MB is 25
 * times the work). The child's time limit sits between the two by a factor of a thousand either way, so no machine is
 * fast enough to pass a quadratic normaliser or slow enough to fail a linear one; CPU-time ratios of small inputs were
 * the other choice, and are noisier than this.
 */
const BYTES = 1 << 20
const LIMITS = {heapMb: 512, timeoutMs: 60_000}

for (const name of Object.keys(PASTE_WORST_CASES))
  test(`paste normaliser: ${name}, 1 MB, is normalised in linear time`, async () => {
    const r = await runBounded<number>(WORST_CASES, 'normaliseWorstCase', [name, BYTES], LIMITS)
    assert.equal(r.ok, true, JSON.stringify(r))
  })
