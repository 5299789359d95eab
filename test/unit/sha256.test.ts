import assert from 'node:assert/strict'
import {createHash} from 'node:crypto'
import {test} from 'node:test'
import {sha256} from '../../src/util/sha256.js'

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex')

test('SHA-256 matches the FIPS 180-4 examples', () => {
  assert.equal(hex(sha256('')), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855')
  assert.equal(hex(sha256('abc')), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad')
  assert.equal(
    hex(sha256('abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq')),
    '248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1',
  )
})

/** A seeded generator (mulberry32): the same inputs every run. */
function seeded(seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s + 0x6d2b79f5) >>> 0
    let t = s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32
  }
}

test('SHA-256 gives node:crypto digest for every length across block edges, and non-ASCII text', () => {
  const random = seeded(28)
  const alphabet = 'abcXYZ019/:-._ éß→✓😀'
  for (let length = 0; length <= 300; length++) {
    const text = Array.from({length}, () => [...alphabet][Math.floor(random() * [...alphabet].length)]).join('')
    assert.equal(hex(sha256(text)), createHash('sha256').update(text, 'utf8').digest('hex'), `length ${length}`)
  }
})
