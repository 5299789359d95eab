import {test} from 'node:test'
import assert from 'node:assert/strict'
import {spawnSync} from 'node:child_process'
import {pathToFileURL} from 'node:url'
import {resolve} from 'node:path'
import {collatesAsEnglish, compareNames} from '../../src/model/name-order.js'
import {lcg} from '../helpers/seeded.js'

/** Seeded strings: the same every run. */
function strings(seed: number, alphabet: string, count: number): string[] {
  const next = lcg(seed)
  return Array.from({length: count}, () => {
    let s = ''
    for (let n = next(8); n > 0; n--) s += alphabet[next(alphabet.length)]
    return s
  })
}

test("names, addresses and ports sort as localeCompare sorts them, whatever the locale's collation", () => {
  const cases = [
    ...strings(1, 'abcdefghijklmnopqrstuvwxyz0123456789-.:/_', 4000),
    ...strings(2, 'ab-.:9AZäé ✓', 2000),
    'node-a',
    'node-a.example',
    'node-b',
    'node',
    '10.244.2.7:8080',
    '10.244.2.11:8080',
    'fd00::a:8080',
    '',
  ]
  for (let i = 0; i + 1 < cases.length; i++) {
    const [a, b] = [cases[i], cases[i + 1]]
    assert.equal(
      Math.sign(compareNames(a, b)),
      Math.sign(a.localeCompare(b)),
      `${JSON.stringify(a)} against ${JSON.stringify(b)}`,
    )
  }
  const sorted = [...cases].sort(compareNames)
  assert.deepEqual(
    sorted,
    [...cases].sort((a, b) => a.localeCompare(b)),
  )
})

test('another default locale is compared by its collation (Lithuanian sorts y before j)', () => {
  const moduleUrl = pathToFileURL(resolve('dist/src/model/name-order.js')).href
  const script = `import(${JSON.stringify(moduleUrl)}).then((m) => console.log(Math.sign(m.compareNames('y', 'j')), Math.sign('y'.localeCompare('j'))))`
  const run = (env: Record<string, string>) =>
    spawnSync(process.execPath, ['-e', script], {
      encoding: 'utf8',
      env: {PATH: process.env.PATH ?? '', ...env},
    }).stdout.trim()
  assert.equal(run({LANG: 'lt_LT.UTF-8'}), '-1 -1')
  assert.equal(run({LC_ALL: 'lt_LT.UTF-8', LANG: 'en_US.UTF-8'}), '-1 -1')
  assert.equal(run({LANG: 'C.UTF-8'}), '1 1')
})

test('the locales whose collation is English', () => {
  for (const locale of [undefined, 'C', 'C.UTF-8', 'POSIX', 'en', 'en_US.UTF-8', 'en_GB.utf8'])
    assert.equal(collatesAsEnglish(locale), true, String(locale))
  for (const locale of ['lt_LT.UTF-8', 'de_DE.UTF-8', 'da', 'en_US@collation=phonebook', 'enx'])
    assert.equal(collatesAsEnglish(locale), false, locale)
})
