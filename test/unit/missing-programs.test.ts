/**
 * A node's programs over SSH: the login's shell finds them in the sbin folders after the login's own PATH (Debian gives
 * a user other than root none), and a program still not there makes its read "not read", never an empty state.
 * Each line runs with this machine's shell, as the node's would run it.
 */
import assert from 'node:assert/strict'
import {spawnSync} from 'node:child_process'
import {mkdtempSync, rmSync, symlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {after, test} from 'node:test'
import {linesOfBatch, NODE_COMMANDS, withSbinOnPath, type CommandLine} from '../../src/node/node-commands.js'
import {parseBridgeState} from '../../src/parse/bridge-state.js'

/** sshd's PATH for a user other than root on Debian. */
const DEBIAN_LOGIN_PATH = '/usr/local/bin:/usr/bin:/bin:/usr/games'

const dir = mkdtempSync(join(tmpdir(), 'kpd-programs-'))
after(() => rmSync(dir, {recursive: true, force: true}))

/** A folder of programs: each a script, or a link to this machine's program of that name. */
function programs(name: string, files: Record<string, string>, links: string[] = []): string {
  const bin = join(dir, name)
  spawnSync('mkdir', ['-p', bin])
  for (const [program, script] of Object.entries(files))
    writeFileSync(join(bin, program), `#!/bin/sh\n${script}\n`, {mode: 0o755})
  for (const program of links) {
    const found = spawnSync('sh', ['-c', `command -v ${program}`], {encoding: 'utf8'}).stdout.trim()
    symlinkSync(found, join(bin, program))
  }
  return bin
}

/** A line as the SSH transport sends it, run by `sh -c` (as sshd runs it) with the login's PATH. */
function sent(line: string, path: string) {
  const env = {...process.env, PATH: path}
  const r = spawnSync('/bin/sh', ['-c', withSbinOnPath(line as CommandLine)], {encoding: 'utf8', env, cwd: dir})
  return {code: r.status, stdout: r.stdout, stderr: r.stderr}
}

test("the sbin folders come after the login's own PATH: Debian's login finds sysctl, a folder the login puts first keeps precedence", () => {
  assert.deepEqual(sent('echo "$PATH"', DEBIAN_LOGIN_PATH), {
    code: 0,
    stdout: `${DEBIAN_LOGIN_PATH}:/usr/local/sbin:/usr/sbin:/sbin\n`,
    stderr: '',
  })
  const own = programs('own', {sysctl: 'echo "the login\'s own sysctl $*"'})
  assert.deepEqual(sent('sysctl net.ipv4.ip_forward', `${own}:${DEBIAN_LOGIN_PATH}`), {
    code: 0,
    stdout: "the login's own sysctl net.ipv4.ip_forward\n",
    stderr: '',
  })
  // The programs a node's reads run from sbin, as this machine has them: found where the login alone finds none.
  const inSbin = ['sysctl', 'bridge', 'iptables'].filter((p) =>
    spawnSync('sh', ['-c', `command -v ${p}`], {encoding: 'utf8'})
      .stdout.trim()
      .match(/^\/(usr\/)?sbin\//),
  )
  for (const program of inSbin) {
    const r = sent(`command -v ${program}`, DEBIAN_LOGIN_PATH)
    assert.match(r.stdout, new RegExp(`^/(usr/local/|usr/)?sbin/${program}\\n$`), `${program}: ${r.stderr}`)
  }
})

test('an empty PATH gets the sbin folders alone: no empty entry, which would be the current folder', () => {
  writeFileSync(join(dir, 'here'), '#!/bin/sh\necho ran from the current folder\n', {mode: 0o755})
  const r = sent('echo "$PATH"; here', '')
  assert.equal(r.stdout, '/usr/local/sbin:/usr/sbin:/sbin\n')
  assert.match(r.stderr, /here: (command )?not found/)
  assert.equal(r.code, 127)
})

test("a program that may be stopped (alone) is exec'ed by the login's shell: it is the process sshd started, which a hangup reaches", () => {
  // Its parent is this test's process, not a shell left between them (dash runs a list's last command as its child).
  const line = 'sh -c \'echo "$PPID"\'' as CommandLine
  const alone = spawnSync('/bin/sh', ['-c', withSbinOnPath(line, true)], {encoding: 'utf8'})
  assert.equal(alone.stdout, `${process.pid}\n`, alone.stderr)
})

test("the lab's command log: a line sent over SSH is the allow-listed line it was built from", () => {
  assert.deepEqual(linesOfBatch(withSbinOnPath(NODE_COMMANDS.uid as CommandLine)), [NODE_COMMANDS.uid])
})

test("the network read on a node without `bridge`: its FDB section says not read (exit 127, the shell's words), never an empty FDB; the sections read stay", () => {
  const bin = programs(
    'no-bridge',
    {
      ip: 'case "$*" in "-o link show") echo "3: cbr0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500";; "neigh show") echo "10.244.1.10 dev cbr0 lladdr 02:00:00:00:01:10 REACHABLE";; esac',
    },
    ['cat', 'tr'],
  )
  // Only the folder: no sbin folder of this machine's has a `bridge` for the node's shell to find.
  const r = spawnSync('/bin/sh', ['-c', NODE_COMMANDS.network], {encoding: 'utf8', env: {PATH: bin}})
  assert.equal(r.status, 0, r.stderr)
  const sections = r.stdout.split('## ').slice(1)
  assert.deepEqual(sections.slice(1, 3), [
    'links\n3: cbr0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500\n',
    'neigh\n10.244.1.10 dev cbr0 lladdr 02:00:00:00:01:10 REACHABLE\n',
  ])
  assert.match(
    sections[3],
    /^fdb\n#kpd-not-read 127\tbridge fdb show\t\S*sh: (line )?1: bridge: (command )?not found\n$/,
  )
  const state = parseBridgeState(r.stdout)
  assert.deepEqual(
    state.failed?.map((f) => [f.section, f.command, f.code]),
    [['fdb', 'bridge fdb show', 127]],
  )
  assert.deepEqual([...state.portOfIp], [])

  // A program that is there but fails (exit 1): its words, its status and its stderr on one line.
  const failing = programs('failing-bridge', {bridge: 'echo "Error: first" >&2; echo "second" >&2; exit 1'}, [
    'cat',
    'tr',
    'ip',
  ])
  const f = spawnSync('/bin/sh', ['-c', NODE_COMMANDS.network], {encoding: 'utf8', env: {PATH: failing}})
  assert.match(f.stdout, /\n## fdb\n#kpd-not-read 1\tbridge fdb show\tError: first second\n$/)
  assert.deepEqual(parseBridgeState(f.stdout).failed, [
    {section: 'fdb', command: 'bridge fdb show', code: 1, stderr: 'Error: first second'},
  ])
})
