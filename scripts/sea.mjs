// Builds the standalone executable: a Node.js binary with the program injected (Node's single executable
// applications), which runs without Node.js or node_modules on the machine.
//   npm run build && node scripts/sea.mjs [--node PATH] [--out FILE]
// --node: the Node.js binary to build from (default: the one running this script), for the platform and CPU the
// executable is for; it also makes the injected blob, so the blob always matches it (the blob carries V8's code cache
// for the program, which only the same Node.js version on the same CPU architecture can use). A binary for another
// architecture cannot make its blob here: the release workflow builds each architecture on a runner of that
// architecture with that runner's own node.
// --out: default dist/sea/kproxy-doctor-linux-ARCH (ARCH as Node names it: x64, arm64).
// No download: the binary is a local file, and postject (the injector) comes from package-lock.
import {execFileSync} from 'node:child_process'
import {chmodSync, copyFileSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {createHash} from 'node:crypto'
import {dirname, join, resolve} from 'node:path'
import {parseArgs} from 'node:util'
import {inject} from 'postject'

const repo = resolve(import.meta.dirname, '..')
const {values} = parseArgs({options: {node: {type: 'string'}, out: {type: 'string'}}})
const node = resolve(values.node ?? process.execPath)
const arch = execFileSync(node, ['-p', 'process.arch'], {encoding: 'utf8'}).trim()
const out = resolve(values.out ?? join(repo, 'dist/sea', `kproxy-doctor-linux-${arch}`))
const work = join(repo, 'dist/sea/build')
rmSync(work, {recursive: true, force: true})
mkdirSync(work, {recursive: true})
mkdirSync(dirname(out), {recursive: true})

// The program as one CommonJS script (a single executable runs nothing else).
const main = join(work, 'kproxy-doctor.cjs')
execFileSync(process.execPath, [join(repo, 'scripts/bundle.mjs'), '--sea', main], {stdio: 'inherit'})

const blob = join(work, 'sea-prep.blob')
writeFileSync(
  join(work, 'sea-config.json'),
  JSON.stringify({main, output: blob, disableExperimentalSEAWarning: true, useCodeCache: true}),
)
execFileSync(node, ['--experimental-sea-config', join(work, 'sea-config.json')], {stdio: 'inherit'})

rmSync(out, {force: true})
copyFileSync(node, out)
chmodSync(out, 0o755)
await inject(out, 'NODE_SEA_BLOB', readFileSync(blob), {
  sentinelFuse: 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2',
})
const sha256 = createHash('sha256').update(readFileSync(out)).digest('hex')
process.stdout.write(`${out}: ${(statSync(out).size / 1048576).toFixed(1)} MB, sha256 ${sha256}\n`)
