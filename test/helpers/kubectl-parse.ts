import assert from 'node:assert/strict'
import {spawnSync} from 'node:child_process'

/** Whether kubectl is installed (the CI installs it: scripts/install-test-deps.sh). */
export const kubectlInstalled = spawnSync('kubectl', ['version', '--client'], {encoding: 'utf8'}).status === 0

/**
 * A printed kubectl command (argv, `kubectl` first) goes through kubectl's own flag parser and gets as far as the API
 * server: pointed at port 1 on loopback, which refuses, so nothing is read or changed.
 */
export function assertKubectlParses(argv: readonly string[], what: string): void {
  const [, ...args] = argv
  const r = spawnSync(
    'kubectl',
    ['--server', 'https://127.0.0.1:1', '--token', 'none', '--request-timeout', '2s', ...args],
    {
      encoding: 'utf8',
      timeout: 30_000,
      env: {...process.env, KUBECONFIG: '/dev/null'},
    },
  )
  assert.doesNotMatch(r.stderr, /unknown (flag|command|shorthand)|for usage/, `${what}: ${r.stderr}`)
  assert.match(r.stderr, /127\.0\.0\.1:1.*refused/, `${what}: ${r.stderr}`)
}
