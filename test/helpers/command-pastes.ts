import assert from 'node:assert/strict'
import {spawnSync} from 'node:child_process'
import {mkdtempSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {quoteWord} from '../../src/model/shell.js'

/**
 * A printed command runs exactly as printed: real `bash -n` parses it, it holds no `<placeholder>`, and pasted into
 * bash with each program replaced by a function that records its argv, every stage gets exactly the argv the report
 * says (`argv`).
 */
export function assertPastes(command: string, argv: string[][], what: string): void {
  assert.ok(!/<[A-Za-z][\w -]*>/.test(command), `${what}: a placeholder in ${command}`)
  const parsed = spawnSync('bash', ['-n', '-c', command], {encoding: 'utf8'})
  assert.equal(parsed.status, 0, `${what}: bash -n refuses ${command}: ${parsed.stderr}`)
  const programs = argv.map((stage) => stage[0])
  assert.equal(new Set(programs).size, programs.length, `${what}: one program per stage`)
  for (const p of programs) assert.match(p, /^[a-z][a-z0-9-]*$/, `${what}: program ${p}`)
  const dir = mkdtempSync(join(tmpdir(), 'kpd-paste-'))
  try {
    const fns = programs
      .map((p) => `${p}() { { [ $# -eq 0 ] || printf '%s\\0' "$@"; } > ${quoteWord(join(dir, p))}; }`)
      .join('\n')
    const ran = spawnSync('bash', ['-c', `${fns}\n${command}`], {encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe']})
    assert.equal(ran.status, 0, `${what}: ${command}: ${ran.stderr}`)
    for (const stage of argv) {
      const got = readFileSync(join(dir, stage[0]), 'utf8').split('\0').slice(0, -1)
      assert.deepEqual(got, stage.slice(1), `${what}: ${command}: ${stage[0]} got other arguments`)
    }
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
}

/** Words that make a command change something: a `check:` holds none of them (those are a `fix:`). */
const CHANGING = new Set([
  '-w',
  '-D',
  '-F',
  '-X',
  'delete',
  'modprobe',
  'replace',
  'set',
  'restart',
  'apply',
  'edit',
  'patch',
])

/** A `check:` only looks: none of its stages' words changes the node or the cluster. */
export function assertReadOnly(argv: string[][], what: string): void {
  for (const stage of argv)
    for (const word of stage) assert.ok(!CHANGING.has(word), `${what}: ${stage.join(' ')} changes something (${word})`)
}
