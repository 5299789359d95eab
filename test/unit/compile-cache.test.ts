import assert from 'node:assert/strict'
import {mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join, resolve} from 'node:path'
import {pathToFileURL} from 'node:url'
import {after, describe, test} from 'node:test'
import {runCli} from '../helpers/run-cli.js'
import {COMMANDS} from '../../src/main.js'

// bin/program.js keeps V8's code cache of the program per command word (Node.js 20; Node.js >= 22.1 keeps its own).
// What a user sees must not depend on it: the same bytes and exit code with a cache, without one, with a broken one.
const program = (await import(pathToFileURL(resolve('bin/program.js')).href)) as {
  COMMAND_WORDS: string[]
  commandWord: (argv: string[]) => string
}
const hasOwnCache = 'enableCompileCache' in (await import('node:module'))
const example = ['svc', 'web', '-n', 'shop', '--snapshot', 'examples/broken-cluster']
const tmp = mkdtempSync(join(tmpdir(), 'kpd-compile-cache-'))
after(() => rmSync(tmp, {recursive: true, force: true}))
let folders = 0
/** A fresh cache home: returns the XDG_CACHE_HOME and the folder the caches go in. */
function cacheHome(): {env: Record<string, string>; dir: string} {
  const home = join(tmp, String(folders++))
  return {env: {XDG_CACHE_HOME: home, NODE_DISABLE_COMPILE_CACHE: ''}, dir: join(home, 'kproxy-doctor')}
}
const files = (dir: string) => {
  try {
    return readdirSync(dir).sort()
  } catch {
    return []
  }
}

test('the command words are the first words of the commands src/main.ts lists', () => {
  assert.deepEqual(program.COMMAND_WORDS, [...new Set(Object.keys(COMMANDS).map((id) => id.split(':')[0]))].sort())
})

test('a command line names the cache of its command word', () => {
  const cases: Array<[string[], string]> = [
    [example, 'svc'],
    [['--context', 'prod', 'svc', 'web'], 'svc'],
    [['collect', 'svc', 'web'], 'collect'],
    [['--version'], 'version'],
    [['version'], 'version'],
    [['-h'], 'help'],
    [['svc', '--help'], 'svc'],
    [['web'], 'other'],
    [[], 'other'],
    [['--', 'svc'], 'other'],
  ]
  for (const [argv, word] of cases) assert.equal(program.commandWord(argv), word, argv.join(' '))
})

describe('the code cache (Node.js 20)', {skip: hasOwnCache && 'this Node.js keeps its own compile cache'}, () => {
  test('svc prints the same with no cache, a cache written by a first run, and that cache read', async () => {
    const {env, dir} = cacheHome()
    const none = await runCli(example, {NODE_DISABLE_COMPILE_CACHE: '1', XDG_CACHE_HOME: join(tmp, 'unused')})
    assert.deepEqual(files(join(tmp, 'unused')), [], 'NODE_DISABLE_COMPILE_CACHE: nothing written')
    assert.equal(none.code, 1, none.stderr)
    const first = await runCli(example, env)
    const written = files(dir)
    assert.equal(written.length, 1)
    assert.match(written[0], new RegExp(`^svc-[0-9a-f]{16}-${process.version}-${process.arch}\\.v8cache$`))
    const mtime = statSync(join(dir, written[0])).mtimeMs
    const second = await runCli(example, env)
    for (const r of [first, second]) assert.deepEqual(r, none)
    assert.equal(statSync(join(dir, written[0])).mtimeMs, mtime, 'a cache V8 took is not written again')
    const version = await runCli(['--version'], env)
    assert.equal(version.code, 0)
    assert.deepEqual(
      files(dir).map((f) => f.split('-')[0]),
      ['svc', 'version'],
    )
  })

  test('a cache V8 refuses is compiled without and written anew; a usage error writes none', async () => {
    const {env, dir} = cacheHome()
    const good = await runCli(example, env)
    const [name] = files(dir)
    writeFileSync(join(dir, name), 'not a code cache')
    const refused = await runCli(example, env)
    assert.deepEqual(refused, good)
    assert.notEqual(readFileSync(join(dir, name), 'utf8'), 'not a code cache')
    const usage = cacheHome()
    const bad = await runCli(['svc', 'web', '--no-such-flag'], usage.env)
    assert.equal(bad.code, 2)
    assert.deepEqual(files(usage.dir), [])
  })

  test('a cache folder that cannot be made changes nothing the user sees', async () => {
    const home = join(tmp, 'a-file')
    writeFileSync(home, '')
    const r = await runCli(example, {XDG_CACHE_HOME: home, NODE_DISABLE_COMPILE_CACHE: ''})
    const none = await runCli(example, {NODE_DISABLE_COMPILE_CACHE: '1'})
    assert.deepEqual(r, none)
  })
})
