// The last step of `npm run build` (after tsc): bundles the program, src/main.ts, with everything it runs into
// dist/bundle/, which the npm package and the container image ship (the single executable: see --sea):
//   kproxy-doctor.cjs  the program, one CommonJS script (bin/program.js loads it with V8's code cache: a run compiles
//                      none of what an earlier run of that command compiled; Node 20 has no code cache for ES modules)
//   client-node.cjs    the parts of @kubernetes/client-node it runs (6 MB: src/vendor/client-node.ts), required on the
//                      first API call, so that --version and a snapshot neither read nor compile it
//   live-packages.cjs  ssh2, ws and dns-packet (LIVE_PACKAGES below), each required on first use, for the same reason
//   scan-worker.js     a scan's worker thread (src/diagnosis/scan-worker.ts), started from the file beside the program
//   scan-report.js     what a worker thread imports to summarise a Service (src/report/scan-report.ts)
//   chunk-*.js         the code those two ES modules share
//   THIRD-PARTY-NOTICES.txt  the licence of every package bundled
// Built in: oclif's manifest (every command's flags and help, made by oclif's own loader from the compiled commands,
// as `oclif manifest` does) and the package.json fields oclif reads, so that starting reads no other file.
//   node scripts/bundle.mjs [--sea FILE]   --sea: the whole program as one CommonJS file, for a single executable
import * as esbuild from 'esbuild'
import {Plugin} from '@oclif/core'
import {createHash} from 'node:crypto'
import {existsSync, mkdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {createRequire} from 'node:module'
import {dirname, join, relative, resolve} from 'node:path'
import {parseArgs} from 'node:util'

const repo = resolve(import.meta.dirname, '..')
const outdir = join(repo, 'dist/bundle')
const {values} = parseArgs({options: {sea: {type: 'string'}}})

/** Optional native helpers of bundled packages, which they load in a try and do without (ssh2, ws). */
const OPTIONAL_NATIVE = ['cpu-features', 'bufferutil', 'utf-8-validate', '*.node']
/** Required only when oclif runs TypeScript sources in development. */
const DEVELOPMENT_ONLY = ['typescript']

const pkg = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8'))

async function manifestOf(root, isRoot) {
  const plugin = new Plugin({root, type: 'core', isRoot, ignoreManifest: isRoot, errorOnManifestCreate: true})
  await plugin.load()
  // Where oclif would import each command from on disk: the bundle imports them itself.
  const commands = JSON.parse(JSON.stringify(plugin.manifest.commands))
  for (const c of Object.values(commands)) {
    delete c.isESM
    delete c.relativePath
  }
  return {name: plugin.name, version: plugin.version, commands}
}

const plugins = [
  await manifestOf(repo, true),
  ...(await Promise.all(pkg.oclif.plugins.map((name) => manifestOf(join(repo, 'node_modules', name), false)))),
]
const {COMMANDS} = await import(join(repo, 'dist/src/main.js'))
const listed = plugins.flatMap((p) => Object.keys(p.commands)).sort()
if (listed.join() !== Object.keys(COMMANDS).sort().join())
  throw new Error(`src/main.ts COMMANDS (${Object.keys(COMMANDS).sort()}) must name every command (${listed})`)
const builtIn = {
  pjson: {name: pkg.name, version: pkg.version, oclif: pkg.oclif},
  plugins,
}

/**
 * Modules their importers load later than themselves, each loaded when first needed, as one row: the module, whose
 * imports of it are deferred (src/ or oclif's modules: each resolves its own copy, from the importer's folder; src's
 * string-width 7 and wrap-ansi 9 are ES modules, oclif's string-width 4 and wrap-ansi 7 CommonJS), and how:
 *   on-use     src/ requires it where it needs it, with `createRequire(import.meta.url)(name)`: src's node:module is a
 *              createRequire that knows these names only (anything else throws: add it here)
 *   on-call    its default export, a function, is loaded on its first call: string-width makes an Intl.Segmenter as it
 *              loads (wrap-ansi loads string-width), and ICU's first use (its data) is a large part of a short run's
 *              start; src/report/width.ts calls string-width only for text other than printable ASCII and the report's
 *              signs, and wrap-ansi only to wrap a line wider than the terminal; with `exports`, each of those
 *              named functions instead: Node's crypto, which src/node's transports import as they load (random marks,
 *              host key hashes) and a snapshot run never calls; it brings a dozen internal modules (about 13M
 *              instructions of a short run's start)
 *   on-access  an object that loads the real module on its first use: what oclif's modules require as they load but a
 *              run uses only on some paths, Node's child_process (a WSL check), readline (a flag read from stdin),
 *              perf_hooks (OCLIF_PERFORMANCE), fs/promises (files oclif reads when its manifest is not built in), and
 *              packages for help, spinners, plugin discovery and error formatting. Each built-in brings a dozen
 *              internal modules for Node to compile and each package its own initialisation: a snapshot `svc` uses none
 *              of them. oclif only calls and reads properties of these: `x.name`, `(0, x.name)(...)`, and
 *              `__importDefault(x).default`, which reads `__esModule` first, answered without loading from what the
 *              real module has, read here at build time. A row's `answers` are functions given in the module's place
 *              without loading it, each the same call through a module already loaded: oclif reads its user's theme
 *              file (~/.config/kproxy-doctor/theme.json) on every run with fs/promises' readFile, which as
 *              fs.readFile does not bring fs/promises' dozen modules (readline, directory and watcher ones).
 */
const LOADED_LATER = [
  {module: 'yaml', importer: 'src', how: 'on-use'},
  {module: 'string-width', importer: 'src', how: 'on-call'},
  {module: 'wrap-ansi', importer: 'src', how: 'on-call'},
  {module: 'node:crypto', importer: 'src', how: 'on-call', exports: ['createHash', 'createHmac', 'randomBytes']},
  {
    module: 'node:fs/promises',
    importer: 'oclif',
    how: 'on-access',
    answers: {readFile: "(...args) => require('node:util').promisify(require('node:fs').readFile)(...args)"},
  },
  ...[
    'node:child_process',
    'node:readline',
    'node:perf_hooks',
    'ejs',
    'cli-spinners',
    'tinyglobby',
    'minimatch',
    'lilconfig',
    'clean-stack',
    'indent-string',
    'wrap-ansi',
    'string-width',
    'widest-line',
    'supports-color',
  ].map((module) => ({module, importer: 'oclif', how: 'on-access'})),
]

/** Whose imports a row of LOADED_LATER defers, by the importing file's path. */
const IMPORTERS = {
  src: (file) => file.startsWith(join(repo, 'src')),
  oclif: (file) => /[\\/]@oclif[\\/]core[\\/]lib[\\/]/.test(file),
}

/** What each way of LOADED_LATER puts where the module was imported (a module of namespace `loaded-${how}`). */
const DEFERRED = {
  'on-use': (rows) => `export function createRequire() {
  return (name) => {
    switch (name) {
${rows.map((r) => `      case ${JSON.stringify(r.module)}: return require(${JSON.stringify(r.module)})`).join('\n')}
    }
    throw new Error(name + ' is not bundled: add it to LOADED_LATER in scripts/bundle.mjs')
  }
}`,
  'on-call': ([row]) =>
    row.exports
      ? `let loaded
const real = () => (loaded ??= require(${JSON.stringify(row.module)}))
${row.exports.map((name) => `export function ${name}(...args) {\n  return real().${name}(...args)\n}`).join('\n')}`
      : `let loaded
export default function (...args) {
  loaded ??= require(${JSON.stringify(row.module)}).default
  return loaded(...args)
}`,
  'on-access': ([row], resolveDir) => {
    const esModule = createRequire(join(resolveDir, 'importer.js'))(row.module).__esModule === true
    const answers = Object.entries(row.answers ?? {})
    const answered = answers.length
      ? `const answers = {__proto__: null, ${answers.map(([key, code]) => `${key}: ${code}`).join(', ')}}
`
      : ''
    return `let loaded
const real = () => (loaded ??= require(${JSON.stringify(row.module)}))
${answered}module.exports = new Proxy(() => {}, {
  get: (_, key) => (key === '__esModule' ? ${esModule} : ${answers.length ? 'key in answers ? answers[key] : ' : ''}real()[key]),
  has: (_, key) => key in real(),
  set: (_, key, value) => ((real()[key] = value), true),
  apply: (_, self, args) => Reflect.apply(real(), self, args),
  construct: (_, args) => Reflect.construct(real(), args),
})`
  },
}

/** LOADED_LATER's rows: each import of a row's module by its importers replaced by what DEFERRED makes for its way. */
const loadedLater = {
  name: 'loaded-later',
  setup(build) {
    const names = ['node:module', ...new Set(LOADED_LATER.map((r) => r.module))]
    const filter = new RegExp(`^(${names.map((n) => n.replace(/[/.]/g, '\\$&')).join('|')})$`)
    build.onResolve({filter}, (args) => {
      // on-use: the importer's node:module (the createRequire it calls), made once with every on-use row.
      const rows = LOADED_LATER.filter(
        (r) =>
          IMPORTERS[r.importer](args.importer) &&
          (args.path === 'node:module' ? r.how === 'on-use' : r.how !== 'on-use' && r.module === args.path),
      )
      if (rows.length === 0) return undefined
      return {path: args.path, namespace: `loaded-${rows[0].how}`, pluginData: {rows, resolveDir: args.resolveDir}}
    })
    for (const [how, deferred] of Object.entries(DEFERRED))
      build.onLoad({filter: /.*/, namespace: `loaded-${how}`}, ({pluginData: {rows, resolveDir}}) => ({
        resolveDir,
        contents: deferred(rows, resolveDir),
      }))
  },
}

/**
 * ssh2 reads __dirname as its modules load (the path of its Windows Pageant helper, the folder of its poly1305
 * WebAssembly loader), which an ES module bundle does not have: loading ssh2 threw "__dirname is not defined" and every
 * SSH read failed. Neither path is used here (Pageant is Windows-only and not bundled; the WebAssembly is inline).
 */
const ssh2Dirname = {
  name: 'ssh2-dirname',
  setup(build) {
    build.onLoad({filter: /[\\/]node_modules[\\/]ssh2[\\/].*\.js$/}, (args) => {
      const text = readFileSync(args.path, 'utf8')
      return text.includes('__dirname') ? {contents: text.replaceAll('__dirname', '"."'), loader: 'js'} : undefined
    })
  },
}

/**
 * oclif's logger makes a `debug` logger per namespace as it loads, and the debug package reads the terminal's colours
 * and DEBUG's namespaces as it loads (node:tty, supports-color): part of every start. Without DEBUG set nothing is
 * logged, so oclif gets loggers that do nothing then, and the real package, loaded only then, when DEBUG is set.
 */
const debugOnlyWhenAsked = {
  name: 'debug-only-when-asked',
  setup(build) {
    build.onResolve({filter: /^debug$/}, (args) =>
      /[\\/]@oclif[\\/]core[\\/]/.test(args.importer) ? {path: 'debug', namespace: 'debug-only-when-asked'} : undefined,
    )
    build.onLoad({filter: /.*/, namespace: 'debug-only-when-asked'}, () => ({
      resolveDir: repo,
      contents: `function quiet(namespace) {
  const log = () => {}
  return Object.assign(log, {namespace, enabled: false, extend: (more, delimiter = ':') => quiet(namespace + delimiter + more)})
}
module.exports = process.env.DEBUG ? require(${JSON.stringify(join(repo, 'node_modules/debug'))}) : quiet`,
    }))
  },
}

/**
 * oclif reads `isWsl` from wsl-utils as its config loads, and wsl-utils requires child_process and fs/promises as it
 * loads (for its PowerShell helpers, which oclif calls only to name a Windows shell): oclif gets is-wsl's answer, which
 * wsl-utils re-exports, and the rest of wsl-utils on the first call of powerShellPath.
 */
const wslUtilsOnCall = {
  name: 'wsl-utils-on-call',
  setup(build) {
    const wslUtils = dirname(createRequire(join(repo, 'node_modules/@oclif/core/lib/index.js')).resolve('wsl-utils'))
    build.onResolve({filter: /^wsl-utils$/}, (args) =>
      /[\\/]@oclif[\\/]core[\\/]lib[\\/]/.test(args.importer)
        ? {path: 'wsl-utils', namespace: 'wsl-utils-on-call'}
        : undefined,
    )
    build.onLoad({filter: /.*/, namespace: 'wsl-utils-on-call'}, () => ({
      resolveDir: wslUtils,
      contents: `export {default as isWsl} from 'is-wsl'
export async function powerShellPath(...args) {
  return (await import(${JSON.stringify(join(wslUtils, 'index.js'))})).powerShellPath(...args)
}`,
    }))
  },
}

/**
 * oclif's screen.js works out the terminal widths of stdout and stderr as it loads, which makes Node.js create both
 * streams (process.stdout, process.stderr: the stream modules, and net for a pipe, tty for a terminal) on every run;
 * oclif reads them only to wrap an error or help text. Here each is worked out on its first read, as oclif did.
 */
const screenWidthsOnRead = {
  name: 'screen-widths-on-read',
  setup(build) {
    build.onLoad({filter: /[\\/]@oclif[\\/]core[\\/]lib[\\/]screen\.js$/}, () => ({
      contents: `'use strict'
const {settings} = require('./settings')
function termwidth(stream) {
  if (!stream.isTTY) return 80
  const width = stream.getWindowSize()[0]
  if (width < 1) return 80
  if (width < 40) return 40
  return width
}
const columns = Number.parseInt(process.env.OCLIF_COLUMNS, 10) || settings.columns
let stdtermwidth, errtermwidth
Object.defineProperty(exports, '__esModule', {value: true})
Object.defineProperty(exports, 'stdtermwidth', {enumerable: true, get: () => (stdtermwidth ??= columns || termwidth(process.stdout))})
Object.defineProperty(exports, 'errtermwidth', {enumerable: true, get: () => (errtermwidth ??= columns || termwidth(process.stderr))})`,
      loader: 'js',
    }))
  },
}

/**
 * chalk's supports-color asks node:tty whether stdout and stderr are terminals as it loads, and node:tty brings net
 * and the stream modules. A terminal is a character device: a descriptor that is not one (a file, a pipe, a socket)
 * is answered from fstat, and only a character device (a terminal, /dev/null) is asked of node:tty.
 */
const isattyByFstat = {
  name: 'isatty-by-fstat',
  setup(build) {
    build.onResolve({filter: /^node:tty$/}, (args) =>
      /[\\/]chalk[\\/]source[\\/]vendor[\\/]supports-color[\\/]/.test(args.importer)
        ? {path: 'node:tty', namespace: 'isatty-by-fstat'}
        : undefined,
    )
    build.onLoad({filter: /.*/, namespace: 'isatty-by-fstat'}, () => ({
      resolveDir: repo,
      contents: `const {fstatSync} = require('node:fs')
function isatty(fd) {
  try {
    if (!fstatSync(fd).isCharacterDevice()) return false
  } catch {
    return false
  }
  return require('node:tty').isatty(fd)
}
module.exports = {isatty}`,
    }))
  },
}

/**
 * cli-table3 measures every cell's text twice with its own string-width (4), which replaces a large emoji regular
 * expression in each (compiled on first use, then run over every cell): here text of printable ASCII and the report's
 * signs (src/report/width.ts ONE_COLUMN_EACH, one column each there too: test/unit/output-width.test.ts) is its length,
 * and other text is measured by cli-table3's string-width, loaded on the first such call.
 */
const tableWidthsOfOneColumnText = {
  name: 'table-widths-of-one-column-text',
  setup(build) {
    const tableStringWidth = createRequire(join(repo, 'node_modules/cli-table3/src/utils.js')).resolve('string-width')
    build.onResolve({filter: /^string-width$/}, (args) =>
      /[\\/]cli-table3[\\/]src[\\/]/.test(args.importer)
        ? {path: 'string-width', namespace: 'table-string-width'}
        : undefined,
    )
    build.onLoad({filter: /.*/, namespace: 'table-string-width'}, async () => {
      const {ONE_COLUMN_EACH} = await import(join(repo, 'dist/src/report/width.js'))
      return {
        resolveDir: repo,
        contents: `const ONE_COLUMN_EACH = ${ONE_COLUMN_EACH}
let measured
module.exports = (text) =>
  typeof text === 'string' && ONE_COLUMN_EACH.test(text) ? text.length : (measured ??= require(${JSON.stringify(tableStringWidth)}))(text)`,
      }
    })
  },
}

// oclif checks at start that Node.js satisfies @oclif/core's engines, which loads semver and reads oclif's package.json
// (absent from the bundle): npm checks this package's engines (node >= 20) on install, and the single executable
// brings its own Node.js.
const banner = "process.env.OCLIF_DISABLE_ENGINE_WARNING ??= 'true';"

const common = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  external: [...OPTIONAL_NATIVE, ...DEVELOPMENT_ONLY],
  define: {KPD_BUILT_IN: JSON.stringify(JSON.stringify(builtIn))},
  plugins: [
    loadedLater,
    ssh2Dirname,
    debugOnlyWhenAsked,
    wslUtilsOnCall,
    screenWidthsOnRead,
    isattyByFstat,
    tableWidthsOfOneColumnText,
  ],
  metafile: true,
  legalComments: 'none',
  logLevel: 'warning',
}

/**
 * The program as one CommonJS script (V8 keeps a code cache only for scripts, not ES modules, on Node 20). A script run
 * from a code cache (bin/program.js) cannot import(): esbuild turns every import() into a require, as the single
 * executable needs too (none runs: oclif imports nothing from disk when its manifest is built in).
 */
const program = {
  ...common,
  format: 'cjs',
  supported: {'dynamic-import': false},
}

/**
 * Packages only a live run uses (SSH, the Pod streams' WebSocket, DNS probes): bundled into live-packages.cjs beside the
 * program, each required from there on first use, so that --version and a snapshot neither read nor compile them.
 */
const LIVE_PACKAGES = ['ssh2', 'ssh2/lib/protocol/constants.js', 'ws', 'dns-packet']

/** The vendored API client and LIVE_PACKAGES, left out of the program and required from the files beside it. */
const besideProgram = {
  name: 'beside-program',
  setup(build) {
    build.onResolve({filter: /[\\/]vendor[\\/]client-node\.js$/}, () => ({path: './client-node.cjs', external: true}))
    build.onResolve({filter: /^\.\/live-packages\.cjs$/}, (args) => ({path: args.path, external: true}))
    build.onResolve({filter: /^(ssh2|ws|dns-packet)(\/.*)?$/}, (args) =>
      LIVE_PACKAGES.includes(args.path) && args.importer.startsWith(join(repo, 'src'))
        ? {path: args.path, namespace: 'live-package'}
        : undefined,
    )
    build.onLoad({filter: /.*/, namespace: 'live-package'}, (args) => ({
      resolveDir: repo,
      contents: `module.exports = require('./live-packages.cjs')[${JSON.stringify(args.path)}]`,
    }))
  },
}

/** live-packages.cjs: each of LIVE_PACKAGES, loaded when first asked for. */
const livePackages = LIVE_PACKAGES.map(
  (name) => `Object.defineProperty(exports, ${JSON.stringify(name)}, {get: () => require(${JSON.stringify(name)})})`,
).join('\n')

if (values.sea) {
  // A single executable runs one CommonJS script: import.meta.url is the executable's own file (nothing lies beside
  // it, so no worker thread starts), and it runs as `kubectl kproxy-doctor` when kubectl runs it by that name.
  mkdirSync(dirname(resolve(values.sea)), {recursive: true})
  await esbuild.build({
    // Not `program`: a single executable's require() loads built-in modules only (Node warns on any other), so the
    // import()s left for files on disk stay import()s here.
    ...common,
    format: 'cjs',
    stdin: {
      contents: `import {basename, dirname} from 'node:path'
import {runCli} from './src/main.ts'
void runCli(process.argv.slice(2), {
  root: dirname(process.execPath),
  kubectlPlugin: basename(process.argv0) === 'kubectl-kproxy_doctor',
})`,
      resolveDir: repo,
      sourcefile: 'sea-main.ts',
      loader: 'ts',
    },
    outfile: resolve(values.sea),
    define: {...common.define, 'import.meta.url': 'kpdExecutableUrl'},
    banner: {js: `${banner} const kpdExecutableUrl = require('node:url').pathToFileURL(process.execPath).href;`},
  })
} else {
  rmSync(outdir, {recursive: true, force: true})
  const results = await Promise.all([
    // import.meta.url: the program's own file, beside which the worker thread's files lie.
    esbuild.build({
      ...program,
      entryPoints: {'kproxy-doctor': join(repo, 'src/main.ts')},
      outExtension: {'.js': '.cjs'},
      outdir,
      define: {...common.define, 'import.meta.url': 'kpdProgramUrl'},
      banner: {js: `${banner} const kpdProgramUrl = require('node:url').pathToFileURL(__filename).href;`},
      plugins: [...common.plugins, besideProgram],
    }),
    esbuild.build({
      ...common,
      entryPoints: {'client-node': join(repo, 'src/vendor/client-node.ts')},
      format: 'cjs',
      outExtension: {'.js': '.cjs'},
      outdir,
    }),
    esbuild.build({
      ...common,
      stdin: {contents: livePackages, resolveDir: repo, sourcefile: 'live-packages.js'},
      format: 'cjs',
      outfile: join(outdir, 'live-packages.cjs'),
    }),
    esbuild.build({
      ...common,
      entryPoints: {
        'scan-worker': join(repo, 'src/diagnosis/scan-worker.ts'),
        'scan-report': join(repo, 'src/report/scan-report.ts'),
      },
      format: 'esm',
      splitting: true,
      outdir,
      // Bundled CommonJS packages require Node's own modules, and some name their own folder (ssh2's agent and its
      // poly1305 module name __dirname when loaded: without it every SSH connection of the bundle fails).
      banner: {
        js: `${banner} import {createRequire as kpdCreateRequire} from 'node:module'; import {fileURLToPath as kpdFileURLToPath} from 'node:url'; const require = kpdCreateRequire(import.meta.url); const __filename = kpdFileURLToPath(import.meta.url); const __dirname = kpdFileURLToPath(new URL('.', import.meta.url));`,
      },
    }),
  ])
  writeFileSync(join(outdir, 'THIRD-PARTY-NOTICES.txt'), notices(results.map((r) => r.metafile)))
  // The program's first line names its build (bin/program.js keeps V8's code cache for that build only).
  const programFile = join(outdir, 'kproxy-doctor.cjs')
  const text = asciiOnly(readFileSync(programFile, 'utf8'))
  const build = createHash('sha256').update(text).digest('hex').slice(0, 32)
  writeFileSync(programFile, `// kproxy-doctor build ${build}\n${text}`)
}

/**
 * The program in ASCII, which bin/program.js reads as Latin-1: a copy of the file's bytes into a one-byte string,
 * where UTF-8 decoding (a few characters outside Latin-1 make V8's string two bytes a character) was about a twentieth
 * of a snapshot `svc`'s instructions. esbuild writes strings in ASCII; what it leaves (in comments and regular
 * expressions: → ✓ ┬) becomes \uXXXX, which means the same character there (and in strings and identifiers).
 */
function asciiOnly(text) {
  const escaped = /\\[\u0080-\uffff]/.exec(text)
  if (escaped) throw new Error(`kproxy-doctor.cjs: a backslash before ${JSON.stringify(escaped[0])} cannot be escaped`)
  return text.replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
}

/** Each bundled package's name, version and licence file, from the inputs esbuild read. */
function notices(metafiles) {
  const roots = new Set()
  for (const input of metafiles.flatMap((m) => Object.keys(m.inputs))) {
    const m = /^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(input)
    if (m) roots.add(m[1])
  }
  const sections = [...roots].sort().map((root) => {
    const p = JSON.parse(readFileSync(join(repo, root, 'package.json'), 'utf8'))
    const licence = ['LICENSE', 'LICENSE.md', 'LICENSE.txt', 'license', 'license.md', 'LICENCE', 'LICENSE-MIT']
      .map((f) => join(repo, root, f))
      .find((f) => existsSync(f))
    const text = licence ? readFileSync(licence, 'utf8').trim() : `${p.license} (the package ships no licence file)`
    return `${p.name} ${p.version} (${p.license}), ${relative(repo, join(repo, root))}\n\n${text}\n`
  })
  return `kproxy-doctor bundles these packages:\n\n${sections.join('\n' + '-'.repeat(78) + '\n\n')}`
}
