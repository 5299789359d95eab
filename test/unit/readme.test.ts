/**
 * The README and the docs/ it links stay true: the README's shape (what it does, Install, the two set-up commands), its
 * install routes, the example reports against what the tool prints, every flag they name against --help, the code
 * table against the catalogue, and every relative link against the files and headings it names.
 */
import assert from 'node:assert/strict'
import {existsSync, readdirSync, readFileSync} from 'node:fs'
import {dirname, join, normalize} from 'node:path'
import {test} from 'node:test'
import {CHECKS} from '../../src/checks/index.js'
import {CATALOGUE} from '../../src/checks/catalogue.js'
import {CODES_DOC, withCodesTable} from '../tools/codes-table.js'
import {runCli} from '../helpers/run-cli.js'

const readme = readFileSync('README.md', 'utf8')
const DOCS = readdirSync('docs')
  .filter((f) => f.endsWith('.md'))
  .map((f) => `docs/${f}`)
/** Every user document: the README and docs/*.md, by path. */
const documents = new Map([['README.md', readme], ...DOCS.map((p) => [p, readFileSync(p, 'utf8')] as [string, string])])

/** The README's sections by their "## " title, in order, each with its text. */
function sections(): Array<{title: string; body: string}> {
  return readme
    .split(/\n(?=## )/)
    .slice(1)
    .map((part) => ({title: part.slice(3, part.indexOf('\n')), body: part}))
}

/** A document's fenced code blocks (``` at any indentation), each as its lines, and the text outside them. */
function split(markdown: string): {blocks: string[][]; prose: string} {
  const blocks: string[][] = []
  const prose: string[] = []
  let block: string[] | null = null
  for (const line of markdown.split('\n')) {
    if (/^\s*```/.test(line)) {
      if (block) blocks.push(block)
      block = block ? null : []
    } else if (block) block.push(line)
    else prose.push(line)
  }
  assert.equal(block, null, 'every code block is closed')
  return {blocks, prose: prose.join('\n')}
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

test('the README is a five-minute read: at most 250 lines, and it links every file in docs/', () => {
  assert.ok(readme.split('\n').length <= 250, `README.md has ${readme.split('\n').length} lines`)
  const readMore = sections().find((s) => s.title === 'Read more')
  assert.ok(readMore, 'a "Read more" section')
  for (const doc of DOCS) assert.ok(readMore.body.includes(`](${doc})`), `"Read more" links ${doc}`)
})

test('Install gives the routes that work today (from a clone) and the registry and krew ones only as to come', () => {
  const install = sections()[0].body
  const commands = split(install).blocks.flat()
  assert.match(commands[0], /^npm ci && npm pack && npm install -g \.\/kproxy-doctor-\*\.tgz/)
  assert.ok(commands.some((c) => /^kubectl kproxy-doctor svc web -n shop/.test(c)))
  const pkg = JSON.parse(readFileSync('package.json', 'utf8'))
  assert.ok(pkg.bin['kubectl-kproxy_doctor'] && install.includes('`kubectl-kproxy_doctor`'))
  assert.ok(pkg.scripts.prepack.includes('npm run build'), 'npm pack builds the package (why npm ci comes first)')

  // Not released yet: no command block of the README or docs/ may install or run kproxy-doctor from the registry,
  // and Install says those routes are to come. The first release changes these lines together with the docs.
  const fromRegistry = /\bnpx (--yes )?kproxy-doctor\b|npm (install|i) (-g |--global )?kproxy-doctor\b|krew install/
  const registryCommands = [...documents].flatMap(([path, text]) =>
    split(text)
      .blocks.flat()
      .filter((l) => fromRegistry.test(l))
      .map((l) => `${path}: ${l.trim()}`),
  )
  assert.deepEqual(registryCommands, [], 'not released yet: no command block installs from the registry')
  assert.match(install, /not on the npm registry yet/)
  assert.match(install, /After the first release \(not yet\), `npm install -g kproxy-doctor`/)
  assert.match(
    readFileSync('plugins/kproxy-doctor.template.yaml', 'utf8'),
    /sha256: '\{\{SHA256:/,
    'the krew manifest is a template',
  )
})

test('the set-up section holds exactly two commands: the demo, and the one CI runs', () => {
  const setup = sections()[1].body
  const blocks = [...setup.matchAll(/```sh\n([\s\S]*?)```/g)]
  assert.equal(blocks.length, 1)
  const commands = blocks[0][1].trim().split('\n')
  assert.deepEqual(commands, ['npm ci && npm run demo', 'bash scripts/install-test-deps.sh && npm ci && npm test'])
  assert.ok(readFileSync('.ci/run', 'utf8').includes(commands[1]), '.ci/run runs the README test command')
  const others = [...documents]
    .filter(([path]) => path !== 'README.md')
    .flatMap(([, text]) => split(text).blocks.flat())
    .concat(split(readme.replace(setup, '')).blocks.flat())
  assert.deepEqual(
    others.filter((l) => /npm run demo|install-test-deps/.test(l)),
    [],
    'no second set-up command elsewhere',
  )
})

/** Each example report: a code block whose first line is `$ kproxy-doctor ARGS`, the rest what it prints. */
function examples(): Array<{where: string; args: string[]; expected: string[]}> {
  return [...documents].flatMap(([path, text]) =>
    split(text)
      .blocks.filter((b) => b[0]?.startsWith('$ kproxy-doctor '))
      .map((b) => ({where: path, args: b[0].split(/\s+/).slice(2), expected: b.slice(1)})),
  )
}

test("the README's example report is the demo's command and what it prints at 80 columns; so is each docs example", async () => {
  const all = examples()
  const inReadme = all.filter((e) => e.where === 'README.md')
  assert.equal(inReadme.length, 1, 'one example report in the README')
  const demo = JSON.parse(readFileSync('package.json', 'utf8')).scripts.demo as string
  assert.equal(/node bin\/run\.js ([^;]*);/.exec(demo)?.[1], inReadme[0].args.join(' '), 'npm run demo runs it')
  assert.ok(all.length > 1, 'docs/usage.md shows --explain the same way')
  for (const {where, args, expected} of all) {
    const r = await runCli(args, {COLUMNS: '80'})
    assert.ok(r.code === 0 || r.code === 1, r.stderr)
    const printed = r.stdout.replace(/\n$/, '').split('\n')
    const regenerate = `${where}: kproxy-doctor ${args.join(' ')} prints otherwise (regenerate with COLUMNS=80 NO_COLOR=1 node bin/run.js ${args.join(' ')})`
    // A line "…" stands for printed lines left out; the parts around it are printed as shown, in order.
    const parts = expected.join('\n').split('\n…\n')
    if (parts.length === 1) assert.deepEqual(printed, expected, regenerate)
    else {
      const text = printed.join('\n')
      assert.ok(text.startsWith(parts[0] + '\n'), regenerate)
      assert.ok(text.endsWith('\n' + parts.at(-1)!), regenerate)
      let from = 0
      for (const part of parts) {
        const at = text.indexOf(part, from)
        assert.ok(at >= from, `${regenerate}: "${part.split('\n')[0]}"`)
        from = at + part.length
      }
    }
  }
})

const COMMANDS = ['svc', 'scan', 'collect svc', 'trace']
const FLAG = /(?<![\w-])(--?[a-zA-Z][\w-]*)/g

/** Each kproxy-doctor command line in the code blocks (synopsis lines starting with "[" continue it): command, flags. */
function commandLines(): Array<{where: string; command: string; flags: string[]; line: string}> {
  const found: Array<{where: string; command: string; flags: string[]; line: string}> = []
  for (const [path, text] of documents) {
    for (const block of split(text).blocks) {
      let current: (typeof found)[number] | null = null
      for (const raw of block) {
        const line = raw.replace(/(^|\s)#.*$/, '')
        if (current && /^\s+\[/.test(line)) {
          current.flags.push(...[...line.matchAll(FLAG)].map((m) => m[1]))
          continue
        }
        current = null
        const words = line.replace(/^\s*\$ /, '').split(/\s+/)
        const at = words.indexOf('kproxy-doctor')
        if (at < 0) continue
        const command = COMMANDS.find((c) => words.slice(at + 1, at + 1 + c.split(' ').length).join(' ') === c)
        if (!command) continue
        const rest = words.slice(at + 1 + command.split(' ').length)
        const end = rest.findIndex((w) => ['|', '&&', ';'].includes(w) || /^\d?>/.test(w))
        const args = (end < 0 ? rest : rest.slice(0, end)).join(' ')
        current = {where: path, command, flags: [...args.matchAll(FLAG)].map((m) => m[1]), line: raw.trim()}
        found.push(current)
      }
    }
  }
  return found
}

test('every flag a command line in the README or docs/ gives is in its --help, and every flag is documented', async () => {
  const lines = commandLines()
  const allText = [...documents.values()].join('\n')
  for (const command of COMMANDS) {
    const help = await runCli([...command.split(' '), '--help'])
    assert.equal(help.code, 0, help.stderr)
    const listed = new Set([...help.stdout.matchAll(FLAG)].map((m) => m[1]))
    const mine = lines.filter((l) => l.command === command)
    assert.ok(mine.length > 0, `a ${command} command line in the docs`)
    for (const l of mine)
      for (const flag of l.flags)
        assert.ok(listed.has(flag), `${l.where}: ${flag} is not a flag of ${command}: ${l.line}`)
    const long = [...help.stdout.matchAll(/^\s+(?:-\w, )?(--[\w-]+)/gm)].map((m) => m[1]).filter((f) => f !== '--help')
    assert.ok(long.length > 3, help.stdout)
    for (const flag of long)
      assert.ok(
        new RegExp(`${flag}(?![\\w-])`).test(allText),
        `${command} ${flag} is named nowhere in README.md or docs/`,
      )
  }
})

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens; repeats get -1, -2, … */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>()
  const out = new Set<string>()
  for (const m of split(markdown).prose.matchAll(/^#{1,6} (.+)$/gm)) {
    const base = m[1]
      .toLowerCase()
      .replace(/[^\p{L}\p{N} _-]/gu, '')
      .replace(/ /g, '-')
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    out.add(n === 0 ? base : `${base}-${n}`)
  }
  return out
}

test('every relative link in the README and docs/ names a file that exists, and a heading of it after #', () => {
  let checked = 0
  for (const [path, text] of documents) {
    for (const m of split(text).prose.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1]
      if (/^[a-z]+:/.test(target)) continue
      const [file, anchor] = target.split('#')
      const resolved = file === '' ? path : normalize(join(dirname(path), file))
      assert.ok(existsSync(resolved), `${path}: ${target}: no ${resolved}`)
      if (anchor !== undefined) {
        const heads = anchors(documents.get(resolved) ?? readFileSync(resolved, 'utf8'))
        assert.ok(
          heads.has(anchor),
          `${path}: ${target}: no heading #${anchor} in ${resolved} (${[...heads].join(' ')})`,
        )
      }
      checked++
    }
  }
  assert.ok(checked > 20, `${checked} links checked`)
})

test(`the code table in ${CODES_DOC} is the one generated from the catalogue (npm run codes:docs)`, () => {
  const doc = documents.get(CODES_DOC)!
  assert.equal(doc, withCodesTable(doc), `${CODES_DOC} and src/checks/catalogue.ts differ: run npm run codes:docs`)
})

test('every check takes its code from the catalogue, and every catalogue code has a check', () => {
  assert.deepEqual(CHECKS.map((c) => c.meta.code).sort(), CATALOGUE.map((e) => e.code).sort())
  for (const c of CHECKS)
    assert.equal(
      c.meta,
      CATALOGUE.find((e) => e.code === c.meta.code),
    )
})
