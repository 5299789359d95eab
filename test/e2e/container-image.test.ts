import assert from 'node:assert/strict'
import {execFileSync, spawnSync} from 'node:child_process'
import {cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join, resolve} from 'node:path'
import {after, test} from 'node:test'

// The Dockerfile without Docker (none here): each stage's COPY is carried out into a folder standing for the stage's
// file system, the build stage's RUN `npm run build` runs there (with this checkout's node_modules in place of
// `npm ci`), and the image's ENTRYPOINT runs from the image's folder with this machine's node in place of the
// distroless one. What cannot be checked here: the base images themselves.
const repo = resolve('.')
const tmp = mkdtempSync(join(tmpdir(), 'kpd-image-'))
after(() => rmSync(tmp, {recursive: true, force: true}))

interface Stage {
  from: string
  name?: string
  workdir: string
  copies: Array<{from?: string; sources: string[]; dest: string}>
  runs: string[]
  entrypoint?: string[]
  cmd?: string[]
}

function stages(dockerfile: string): Stage[] {
  const out: Stage[] = []
  for (const line of dockerfile.split('\n').filter((l) => l.trim() && !l.startsWith('#'))) {
    const [instruction, ...rest] = line.trim().split(/\s+/)
    const stage = out.at(-1)!
    if (instruction === 'FROM') out.push({from: rest[0], name: rest[2], workdir: '/', copies: [], runs: []})
    else if (instruction === 'WORKDIR') stage.workdir = rest[0]
    else if (instruction === 'COPY') {
      const from = rest[0].startsWith('--from=') ? rest.shift()!.slice('--from='.length) : undefined
      stage.copies.push({from, sources: rest.slice(0, -1), dest: rest.at(-1)!})
    } else if (instruction === 'RUN') stage.runs.push(rest.join(' '))
    else if (instruction === 'ENTRYPOINT') stage.entrypoint = JSON.parse(rest.join(' '))
    else if (instruction === 'CMD') stage.cmd = JSON.parse(rest.join(' '))
    else assert.fail(`an instruction this test does not carry out: ${line}`)
  }
  return out
}

const dockerfile = stages(readFileSync('Dockerfile', 'utf8'))
const [build, image] = dockerfile
/** A stage's file system: its absolute paths under `root`. */
const roots = new Map([
  [build.name!, join(tmp, 'build')],
  ['image', join(tmp, 'image')],
])

function carryOut(stage: Stage, root: string): void {
  mkdirSync(join(root, stage.workdir), {recursive: true})
  for (const copy of stage.copies) {
    const destination = join(root, copy.dest.startsWith('/') ? copy.dest : join(stage.workdir, copy.dest))
    for (const source of copy.sources) {
      const from = copy.from ? join(roots.get(copy.from)!, source) : join(repo, source)
      assert.ok(existsSync(from), `COPY ${copy.from ? `--from=${copy.from} ` : ''}${source}: missing`)
      const target = copy.dest.endsWith('/') ? join(destination, source.split('/').at(-1)!) : destination
      mkdirSync(join(target, '..'), {recursive: true})
      cpSync(from, target, {recursive: true})
    }
  }
}

test('the build stage builds the bundle from the files it copies', () => {
  const root = roots.get(build.name!)!
  carryOut(build, root)
  const workdir = join(root, build.workdir)
  assert.deepEqual(build.runs, ['npm ci --ignore-scripts --no-audit --no-fund', 'npm run build'])
  symlinkSync(join(repo, 'node_modules'), join(workdir, 'node_modules'))
  execFileSync('npm', ['run', 'build', '--silent'], {cwd: workdir, stdio: 'pipe', timeout: 300_000})
  assert.ok(existsSync(join(workdir, 'dist/bundle/kproxy-doctor.cjs')))
})

test("the image's entrypoint runs the bundle: --version and the bundled example", () => {
  const root = roots.get('image')!
  carryOut(image, root)
  assert.equal(image.from, 'gcr.io/distroless/nodejs20-debian12:nonroot')
  assert.deepEqual(image.cmd, ['--help'])
  const [node, ...script] = image.entrypoint!
  assert.equal(node, '/nodejs/bin/node')
  const entry = script.map((a) => (a.startsWith('/') ? join(root, a) : a))
  const run = (args: string[]) => {
    const r = spawnSync(process.execPath, [...entry, ...args.map((a) => (a.startsWith('/app/') ? join(root, a) : a))], {
      cwd: join(root, image.workdir),
      encoding: 'utf8',
      timeout: 60_000,
      env: {PATH: '/usr/bin:/bin', HOME: tmp, NO_COLOR: '1'},
    })
    return {code: r.status, stdout: r.stdout, stderr: r.stderr}
  }
  const version = run(['--version'])
  assert.equal(version.code, 0, version.stderr)
  assert.match(version.stdout, /^kproxy-doctor\/\S+ linux-/)
  const help = run(image.cmd!)
  assert.equal(help.code, 0, help.stderr)
  assert.match(help.stdout, /USAGE\n {2}\$ kproxy-doctor \[COMMAND\]/)
  const svc = run(['svc', 'web', '-n', 'shop', '--snapshot', '/app/examples/broken-cluster'])
  assert.equal(svc.code, 1, svc.stderr)
  assert.match(svc.stdout, /^✗ shop\/web: .* breaks at DNAT on node-b/)
  assert.ok(!existsSync(join(root, 'app/node_modules')), 'the image has no node_modules')
})
