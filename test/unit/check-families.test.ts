import assert from 'node:assert/strict'
import {readdirSync, readFileSync} from 'node:fs'
import {dirname, join} from 'node:path'
import {test} from 'node:test'
import {fileURLToPath} from 'node:url'
import {CATALOGUE} from '../../src/checks/catalogue.js'
import {CHECK_FAMILIES} from '../helpers/check-families.js'

const HERE = dirname(fileURLToPath(import.meta.url))
const declared = Object.values(CHECK_FAMILIES).flat() as string[]

test('every catalogue code belongs to a check family, and every family code is in the catalogue', () => {
  const codes = CATALOGUE.map((e) => e.code)
  assert.deepEqual(
    codes.filter((c) => !declared.includes(c)),
    [],
    'codes of no family: their cases fire them nowhere that is checked',
  )
  assert.deepEqual(
    declared.filter((c) => !codes.includes(c)),
    [],
    'family codes the catalogue does not have',
  )
  assert.equal(new Set(declared).size, declared.length, 'a code in two families')
})

test('every check family has its case file, which runs its tables through checkFamily', () => {
  const files = readdirSync(HERE)
    .map((f) => /^checks-(.+)\.test\.js$/.exec(f)?.[1])
    .filter((f) => f !== undefined)
    .sort()
  assert.deepEqual(files, Object.keys(CHECK_FAMILIES).sort())
  for (const family of files) {
    const text = readFileSync(join(HERE, `checks-${family}.test.js`), 'utf8')
    assert.ok(text.includes(`checkFamily('${family}', `), `checks-${family}.test.ts calls checkFamily('${family}', …)`)
  }
})
