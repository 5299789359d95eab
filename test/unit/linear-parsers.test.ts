import assert from 'node:assert/strict'
import {test} from 'node:test'
import {runBounded} from '../helpers/bounded-run.js'
import {WORST_CASES} from '../helpers/linear-worst-cases.js'

const CASES = new URL('../helpers/linear-worst-cases.js', import.meta.url).href

/**
 * Parsing and normalising pastes is linear in the input's size. Each input below is a megabyte built to make a
 * backtracking expression quadratic: linear, it takes milliseconds; quadratic, hours (the 200 KB paste of issue #32
 * took 58 s, and 1 MB is 25 times the work). The child's time limit sits between the two by a factor of a thousand
 * either way, so no machine is fast enough to pass a quadratic parser or slow enough to fail a linear one; CPU-time
 * ratios of small inputs were the other choice, and are noisier than this.
 */
const BYTES = 1 << 20
const LIMITS = {heapMb: 512, timeoutMs: 60_000}

for (const name of Object.keys(WORST_CASES))
  test(`${name}, 1 MB, is read in linear time`, async () => {
    const r = await runBounded<number>(CASES, 'runWorstCase', [name, BYTES], LIMITS)
    assert.equal(r.ok, true, JSON.stringify(r))
  })
