import assert from 'node:assert/strict'
import {readFileSync} from 'node:fs'
import {test} from 'node:test'
import {CHECKS} from '../../src/checks/index.js'

const readme = readFileSync('README.md', 'utf8')

test('the README opens with exactly two commands, and CI runs the second', () => {
  const first = /```sh\n([\s\S]*?)```/.exec(readme)
  assert.ok(first && readme.indexOf(first[0]) < readme.indexOf('\n## '), 'the first code block comes before any section')
  const commands = first![1].trim().split('\n')
  assert.equal(commands.length, 2)
  assert.match(commands[0], /npm run demo/)
  assert.ok(readFileSync('.ci/run', 'utf8').includes(commands[1]), '.ci/run runs the README test command')
})

test('every finding code is documented in the README', () => {
  for (const c of CHECKS) assert.ok(readme.includes(`| \`${c.meta.code}\` | ${c.meta.severity} |`), `${c.meta.code} missing from the README table`)
})
