import assert from 'node:assert/strict'
import {readFileSync} from 'node:fs'
import {test} from 'node:test'
import {CHECKS} from '../../src/checks/index.js'
import {CATALOGUE} from '../../src/checks/catalogue.js'
import {withCodesTable} from '../tools/codes-table.js'

const readme = readFileSync('README.md', 'utf8')

test('the README opens with exactly two commands, and CI runs the second', () => {
  const first = /```sh\n([\s\S]*?)```/.exec(readme)
  assert.ok(first && readme.indexOf(first[0]) < readme.indexOf('\n## '), 'the first code block comes before any section')
  const commands = first![1].trim().split('\n')
  assert.equal(commands.length, 2)
  assert.match(commands[0], /npm run demo/)
  assert.ok(readFileSync('.ci/run', 'utf8').includes(commands[1]), '.ci/run runs the README test command')
})

test('the README code table is the one generated from the catalogue (npm run codes:readme)', () => {
  assert.equal(readme, withCodesTable(readme), 'README.md and src/checks/catalogue.ts differ: run npm run codes:readme')
})

test('every check takes its code from the catalogue, and every catalogue code has a check', () => {
  assert.deepEqual(CHECKS.map((c) => c.meta.code).sort(), CATALOGUE.map((e) => e.code).sort())
  for (const c of CHECKS)
    assert.equal(
      c.meta,
      CATALOGUE.find((e) => e.code === c.meta.code),
    )
})
