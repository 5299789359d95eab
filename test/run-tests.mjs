// Runs every compiled test file with node's test runner (unit tests, then the e2e lab).
import {spawnSync} from 'node:child_process'
import {readdirSync, statSync} from 'node:fs'
import {join} from 'node:path'

function find(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name)
    return statSync(p).isDirectory() ? find(p) : p.endsWith('.test.js') ? [p] : []
  })
}

const filter = process.argv[2]
const files = find('dist/test').filter((f) => !filter || f.includes(filter)).sort()
if (files.length === 0) {
  console.error('no test files found under dist/test')
  process.exit(1)
}
const r = spawnSync(process.execPath, ['--test', '--test-concurrency=1', ...files], {stdio: 'inherit'})
process.exit(r.status ?? 1)
