// Loads the program (dist/bundle/kproxy-doctor.cjs, one CommonJS script) and runs a command line with it, for
// bin/run.js and bin/kubectl-kproxy_doctor. Compiling the program is most of a short run's start-up, so what a run
// compiled is kept for the next (the code cache of V8, the JavaScript engine) in the user's cache folder:
//   $XDG_CACHE_HOME/kproxy-doctor, else ~/.cache/kproxy-doctor   (NODE_DISABLE_COMPILE_CACHE=1: none read or written)
// Node.js >= 22.1 keeps it itself (module.enableCompileCache). Node.js 20 has no compile cache, so the script is
// compiled here with V8's cached data: one cache file per command word (svc, trace, --version, ...), as each compiles
// other parts of the program, named by the program's build (its first line) and the Node.js version and CPU; V8 itself
// refuses data made by another V8 or with other flags, and then the run compiles as without a cache and writes it anew.
// Nothing is written after a usage error (exit 2), nor when the folder cannot be written; nothing is ever printed.
// CommonJS (bin/package.json), as bin/run.js.
const {mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync} = require('node:fs')
const nodeModule = require('node:module')
const {homedir} = require('node:os')
const {dirname, join} = require('node:path')
const {Script} = require('node:vm')

const ROOT = join(__dirname, '..')
const PROGRAM = join(ROOT, 'dist/bundle/kproxy-doctor.cjs')
/** The first words of the program's commands (src/main.ts COMMANDS; test/unit/compile-cache.test.ts compares them). */
const COMMAND_WORDS = ['cleanup', 'collect', 'completion', 'help', 'scan', 'svc', 'trace', 'version']
/** How many caches of one command word are kept (the newest). */
const KEPT_PER_WORD = 4
/** The line scripts/bundle.mjs puts first in the program: the hash of the rest. */
const BUILD_LINE = /^\/\/ kproxy-doctor build ([0-9a-f]{16,64})$/

/** Runs one command line: `options` as src/main.ts runCli takes them, but `root`, which is this package's folder. */
function runProgram(argv, options = {}) {
  const {runCli} = loadProgram(argv)
  return runCli(argv, {...options, root: ROOT})
}

function loadProgram(argv) {
  const dir = process.env.NODE_DISABLE_COMPILE_CACHE ? undefined : cacheFolder()
  if (dir && typeof nodeModule.enableCompileCache === 'function') nodeModule.enableCompileCache(dir)
  if (!dir || typeof nodeModule.enableCompileCache === 'function') return nodeModule.createRequire(PROGRAM)(PROGRAM)
  return runWithCodeCache(dir, commandWord(argv))
}

function cacheFolder() {
  try {
    return join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'kproxy-doctor')
  } catch {
    return undefined
  }
}

/** Which part of the program the run will compile: its command's first word, `version`, `help` or `other`. */
function commandWord(argv) {
  for (const arg of argv) {
    if (arg === '--') break
    if (arg === '--version') return 'version'
    if (arg === '--help' || arg === '-h') return 'help'
    if (COMMAND_WORDS.includes(arg)) return arg
  }
  return 'other'
}

/** Compiles and runs the program as Node.js runs a CommonJS file, with V8's cached data read from and kept in `dir`. */
function runWithCodeCache(dir, word) {
  // ASCII (scripts/bundle.mjs): read as Latin-1, a copy into a one-byte string without UTF-8 decoding.
  const source = readFileSync(PROGRAM, 'latin1')
  const build = BUILD_LINE.exec(source.slice(0, source.indexOf('\n')))?.[1]
  const prefix = `${word}-`
  const file = build && join(dir, `${prefix}${build.slice(0, 16)}-${process.version}-${process.arch}.v8cache`)
  let cachedData
  if (file)
    try {
      cachedData = readFileSync(file)
    } catch {
      cachedData = undefined
    }
  const script = new Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, {
    filename: PROGRAM,
    cachedData,
  })
  if (file && (!cachedData || script.cachedDataRejected))
    process.once('exit', (code) => {
      if (code !== 2) keep(dir, file, prefix, script)
    })
  const loaded = {exports: {}}
  script.runInThisContext()(loaded.exports, nodeModule.createRequire(PROGRAM), loaded, PROGRAM, dirname(PROGRAM))
  return loaded.exports
}

/**
 * Writes the script's cached data (what this run compiled), and removes the command's oldest caches beyond
 * KEPT_PER_WORD (other builds or Node.js versions: several installed ones may take turns).
 */
function keep(dir, file, prefix, script) {
  try {
    mkdirSync(dir, {recursive: true, mode: 0o700})
    const others = readdirSync(dir)
      .filter((name) => name.startsWith(prefix) && name.endsWith('.v8cache') && join(dir, name) !== file)
      .map((name) => ({path: join(dir, name), time: statSync(join(dir, name)).mtimeMs}))
      .sort((a, b) => b.time - a.time)
    for (const old of others.slice(KEPT_PER_WORD - 1)) rmSync(old.path, {force: true})
    const partial = `${file}.${process.pid}.partial`
    writeFileSync(partial, script.createCachedData(), {mode: 0o600})
    renameSync(partial, file)
  } catch {
    // A folder that cannot be written only means the next run compiles the program again.
  }
}

module.exports = {COMMAND_WORDS, commandWord, runProgram}
