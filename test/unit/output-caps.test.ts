/**
 * The cap on what one node command may print through a Pod (issue #32): a whole dump of a large node must fit, every
 * other read keeps the tighter cap.
 */
import assert from 'node:assert/strict'
import {mkdtempSync, rmSync, statSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {test} from 'node:test'
import {generateBundle} from '../../bench/generate.js'
import {outputCapBytes} from '../../src/node/node-commands.js'
import {NODE_READS, readOf, type NodeCommandKey} from '../../src/node/read/node-reads.js'
import {COMMAND_OUTPUT_CAP_BYTES, DUMP_OUTPUT_CAP_BYTES} from '../../src/util/output-cap.js'

const KEYS = Object.keys(NODE_READS) as NodeCommandKey[]

test("kube-proxy's iptables-save at 12,000 Services fits the cap of a dump read through a Pod (it did not fit 32 MiB)", () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpd-cap-'))
  try {
    const {dump} = generateBundle(dir, 12_000)
    const bytes = statSync(dump).size
    assert.ok(bytes > COMMAND_OUTPUT_CAP_BYTES, `${bytes} bytes: the command cap would refuse it`)
    assert.ok(bytes * 4 < outputCapBytes(readOf('iptablesSave')), `${bytes} bytes: room to grow under the dump cap`)
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})

test('the dumps get the dump cap, every other read the command cap', () => {
  assert.deepEqual(
    KEYS.filter((k) => outputCapBytes(readOf(k)) === DUMP_OUTPUT_CAP_BYTES),
    KEYS.filter((k) => readOf(k).compressible),
  )
  assert.deepEqual(
    KEYS.filter((k) => outputCapBytes(readOf(k)) === COMMAND_OUTPUT_CAP_BYTES),
    KEYS.filter((k) => !readOf(k).compressible),
  )
  assert.ok(KEYS.some((k) => readOf(k).compressible) && KEYS.includes('iptablesSave' as NodeCommandKey))
  assert.equal(outputCapBytes(undefined), COMMAND_OUTPUT_CAP_BYTES)
})
