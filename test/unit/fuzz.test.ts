/**
 * Seeded, time-bounded fuzzing of every parser, the tracers, what a trace prints, and the snapshot reader (the
 * targets: test/helpers/fuzz-targets.ts). Each target runs in a child process with a heap and a time limit, so an
 * input that hangs or exhausts memory fails here with its replay (seed and input number) instead of hanging the run.
 *
 * FUZZ_SEED=n replays a run; FUZZ_SECONDS=n changes the time spent (default 20 s over all targets, as in CI).
 * A longer campaign: FUZZ_SECONDS=600 FUZZ_SEED=n node --test dist/test/unit/fuzz.test.js
 */
import assert from 'node:assert/strict'
import {test} from 'node:test'
import {runBounded} from '../helpers/bounded-run.js'
import {FUZZ_TARGETS} from '../helpers/fuzz-targets.js'

const SEED = Number(process.env.FUZZ_SEED ?? 20261123) >>> 0
const TOTAL_MS = Number(process.env.FUZZ_SECONDS ?? 20) * 1000
const TARGETS = new URL('../helpers/fuzz-targets.js', import.meta.url).href
/** A child's heap: what the largest mutated dumps need, with room; an input that needs more is a finding. */
const HEAP_MB = 1536
/** Beyond its slice, what a child may take to start and to finish its last input (each input: 4 s at most). */
const GRACE_MS = 60_000

test(`fuzz: parsers and tracers give a result or a clean parse error, quickly, and print no control (seed ${SEED})`, async () => {
  const sliceMs = (TOTAL_MS * 0.8) / FUZZ_TARGETS.length
  const ran: string[] = []
  for (const [index, name] of FUZZ_TARGETS.entries()) {
    const r = await runBounded<{inputs: number; refused: number}>(TARGETS, 'fuzzTarget', [index, SEED, sliceMs], {
      heapMb: HEAP_MB,
      timeoutMs: sliceMs + GRACE_MS,
    })
    assert.ok(r.ok, `${name} (seed ${SEED}; replay: FUZZ_SEED=${SEED}): ${r.ok ? '' : `${r.why}: ${r.detail}`}`)
    ran.push(`${name}: ${r.value.inputs} inputs, ${r.value.refused} refused`)
  }
  console.log(`fuzz seed ${SEED}:\n  ${ran.join('\n  ')}`)
})

test(`fuzz: the snapshot reader gives a diagnosis or one clean line, whatever a bundle file holds (seed ${SEED})`, async () => {
  const ms = TOTAL_MS * 0.2
  const r = await runBounded<{inputs: number}>(TARGETS, 'fuzzSnapshots', [SEED, ms], {
    heapMb: HEAP_MB,
    timeoutMs: ms + GRACE_MS,
  })
  assert.ok(r.ok, `snapshots (seed ${SEED}; replay: FUZZ_SEED=${SEED}): ${r.ok ? '' : `${r.why}: ${r.detail}`}`)
  console.log(`fuzz seed ${SEED}: snapshots: ${r.value.inputs} bundles`)
})
