import assert from 'node:assert/strict'
import {spawnSync} from 'node:child_process'
import {readFileSync} from 'node:fs'
import {basename} from 'node:path'
import {test} from 'node:test'
import {buildCommandLine, NODE_COMMANDS, type NodeCommand} from '../../src/node/node-commands.js'

const SUDOERS = 'deploy/sudoers/kproxy-doctor'

/** The commands the sudoers snippet allows, as "program args" ("" arguments read as none). */
function allowedCommands(text: string): string[] {
  const joined = text.replace(/\\\n/g, ' ')
  const alias = /^Cmnd_Alias\s+KPD_READS\s*=\s*(.+)$/m.exec(joined)
  assert.ok(alias, 'the snippet defines Cmnd_Alias KPD_READS')
  return alias[1].split(',').map((spec) => {
    const [program, ...args] = spec.trim().split(/\s+/)
    return [basename(program), ...args.filter((a) => a !== '""')].join(' ')
  })
}

/** What the doctor runs under `sudo -n` when it logs in as a user that is not root. */
function sudoCommands(): string[] {
  return (Object.keys(NODE_COMMANDS) as NodeCommand[])
    .map((key) => buildCommandLine(key, false) as string)
    .filter((line) => line.startsWith('sudo -n '))
    .map((line) => line.slice('sudo -n '.length))
}

test('the sudoers snippet allows exactly the commands the doctor runs with sudo -n, with exactly their arguments', () => {
  assert.deepEqual(allowedCommands(readFileSync(SUDOERS, 'utf8')).sort(), sudoCommands().sort())
})

test('visudo accepts the sudoers snippet', {skip: !process.env.CI && spawnSync('visudo', ['--version']).error ? 'visudo is not installed' : false}, () => {
  const r = spawnSync('visudo', ['-c', '-f', SUDOERS], {encoding: 'utf8'})
  assert.equal(r.status, 0, r.stdout + r.stderr)
})
