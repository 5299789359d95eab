import assert from 'node:assert/strict'
import {test} from 'node:test'
import {nestsDeeperThan} from '../../src/parse/json-depth.js'
import {Prng} from '../helpers/seeded.js'

/** The definition, walked with a stack of its own: the root is 0 deep, what an array or object holds one more. */
function deepest(root: unknown): number {
  let most = 0
  const stack: Array<[unknown, number]> = [[root, 0]]
  while (stack.length > 0) {
    const [x, depth] = stack.pop()!
    most = Math.max(most, depth)
    if (typeof x === 'object' && x !== null)
      for (const y of Array.isArray(x) ? x : Object.values(x)) stack.push([y, depth + 1])
  }
  return most
}

function randomDocument(rng: Prng, levels: number): unknown {
  const pick = rng.int(levels > 0 ? 6 : 3)
  if (pick === 0) return rng.int(100)
  if (pick === 1) return rng.chance(0.5) ? null : `s${rng.int(9)}`
  if (pick === 2) return rng.chance(0.5) ? [] : {}
  const children = Array.from({length: 1 + rng.int(3)}, () => randomDocument(rng, levels - 1))
  if (pick === 3) return children
  return Object.fromEntries(children.map((c, i) => [`k${i}`, c]))
}

test('nestsDeeperThan: a value inside max arrays or objects is max deep, empty ones hold nothing deeper', () => {
  assert.equal(nestsDeeperThan(1, 0), false)
  assert.equal(nestsDeeperThan([], 0), false)
  assert.equal(nestsDeeperThan({}, 0), false)
  assert.equal(nestsDeeperThan([1], 0), true)
  assert.equal(nestsDeeperThan([1], 1), false)
  assert.equal(nestsDeeperThan({a: null}, 0), true)
  assert.equal(nestsDeeperThan([[[]]], 1), true)
  assert.equal(nestsDeeperThan([[[]]], 2), false)
  assert.equal(nestsDeeperThan({a: [{b: 'x'}]}, 2), true)
  assert.equal(nestsDeeperThan({a: [{b: 'x'}]}, 3), false)
  assert.equal(nestsDeeperThan(JSON.parse('{"__proto__": [[1]]}'), 2), true)
  assert.equal(nestsDeeperThan(1, -1), true)
})

test('nestsDeeperThan answers as the depth of the deepest value says, on seeded random documents', () => {
  const rng = new Prng(20261127)
  for (let i = 0; i < 400; i++) {
    const doc = JSON.parse(JSON.stringify(randomDocument(rng, 7))) as unknown
    const depth = deepest(doc)
    for (let max = 0; max <= 8; max++) assert.equal(nestsDeeperThan(doc, max), depth > max, JSON.stringify(doc))
  }
})

test('nestsDeeperThan: a document nested far deeper than the stack is answered without walking it all', () => {
  const n = 200_000
  assert.equal(nestsDeeperThan(JSON.parse('['.repeat(n) + ']'.repeat(n)), 64), true)
  assert.equal(nestsDeeperThan(JSON.parse('{"a":'.repeat(n) + '1' + '}'.repeat(n)), 64), true)
})
