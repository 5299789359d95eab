/**
 * Issue #32 (low): the address caches (parseIp, parseCidr: tracers ask for the same texts often) keep no key longer
 * than an address, so a node's or a paste's long texts cannot fill them.
 */
import assert from 'node:assert/strict'
import {test} from 'node:test'
import {setFlagsFromString} from 'node:v8'
import {runInNewContext} from 'node:vm'
import {parseCidr, parseIp} from '../../src/net/address.js'

setFlagsFromString('--expose_gc')
const gc = runInNewContext('gc') as () => void

test('address caches: 4,000 distinct 100 KB texts are no address and leave the heap as it was (cached: about 100 MB)', () => {
  // The longest address texts are still addresses (and cached: asked again, the same answer).
  assert.equal(parseIp('[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]')?.family, 6)
  assert.equal(parseCidr('ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255/128')?.family, 6)
  gc()
  const before = process.memoryUsage().heapUsed
  for (let i = 0; i < 4000; i++) {
    const text = `10.0.${i % 256}.${'1'.repeat(100_000)}`
    assert.equal(parseIp(text), undefined)
    assert.equal(parseCidr(`${text}/24`), undefined)
  }
  gc()
  const grownMb = (process.memoryUsage().heapUsed - before) / (1024 * 1024)
  assert.ok(grownMb < 20, `the heap grew ${grownMb.toFixed(0)} MB`)
})
