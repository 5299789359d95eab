import assert from 'node:assert/strict'
import {readFileSync} from 'node:fs'
import {test} from 'node:test'
import {CHECKS} from '../../src/checks/index.js'
import {CATALOGUE} from '../../src/checks/catalogue.js'
import {withCodesTable} from '../tools/codes-table.js'

const readme = readFileSync('README.md', 'utf8')

/** The README's sections by their "## " title, in order, each with its text. */
function sections(): Array<{title: string; body: string}> {
  return readme
    .split(/\n(?=## )/)
    .slice(1)
    .map((part) => ({title: part.slice(3, part.indexOf('\n')), body: part}))
}

test('the README opens with what the tool does, then Install, then the set-up section', () => {
  const intro = readme.slice(0, readme.indexOf('\n## '))
  assert.match(
    intro,
    /^# kproxy-doctor\n\n\*\*kproxy-doctor\*\* tells .* where the packet path to a Kubernetes Service breaks/,
  )
  assert.ok(!intro.includes('```'), 'no command before the tool is explained')
  assert.deepEqual(
    sections()
      .slice(0, 2)
      .map((s) => s.title),
    ['Install', 'Set-up from a clone'],
  )
})

test('Install shows npm, npx and the kubectl plugin, and the plugin it names is the one package.json installs', () => {
  const install = sections()[0].body
  assert.match(install, /^npm install -g kproxy-doctor\b/m)
  assert.match(install, /^npx kproxy-doctor svc /m)
  assert.match(install, /^npm pack && npm install -g \.\/kproxy-doctor-\*\.tgz/m)
  assert.match(install, /^kubectl kproxy-doctor svc web -n shop/m)
  const pkg = JSON.parse(readFileSync('package.json', 'utf8'))
  assert.ok(pkg.bin['kubectl-kproxy_doctor'] && install.includes('`kubectl-kproxy_doctor`'))
})

test('the set-up section holds exactly two commands: the demo, and the one CI runs', () => {
  const setup = sections()[1].body
  const blocks = [...setup.matchAll(/```sh\n([\s\S]*?)```/g)]
  assert.equal(blocks.length, 1)
  const commands = blocks[0][1].trim().split('\n')
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
