import {test} from 'node:test'
import assert from 'node:assert/strict'
import {createServer, type Socket} from 'node:net'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {runCli} from '../helpers/run-cli.js'

/** An "API server" that accepts connections and never answers: not even the TLS handshake. */
async function withSilentServer(body: (url: string) => Promise<void>): Promise<void> {
  const sockets = new Set<Socket>()
  const server = createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const {port} = server.address() as {port: number}
  try {
    await body(`https://alice:s3cret-password@127.0.0.1:${port}`)
  } finally {
    for (const socket of sockets) socket.destroy()
    server.close()
  }
}

function kubeconfig(dir: string, server: string): string {
  const path = join(dir, 'kubeconfig')
  writeFileSync(
    path,
    [
      'apiVersion: v1',
      'kind: Config',
      'current-context: hung',
      'clusters: [{name: hung, cluster: {server: "' + server + '", insecure-skip-tls-verify: true}}]',
      'users: [{name: u, user: {token: not-a-real-token}}]',
      'contexts: [{name: hung, context: {cluster: hung, user: u}}]',
      '',
    ].join('\n'),
  )
  return path
}

for (const command of [
  ['svc', 'web', '-n', 'shop'],
  ['collect', 'svc', 'web', '-n', 'shop', '--out', 'OUT'],
]) {
  test(`${command.slice(0, 2).join(' ')}: an API server that never answers ends the run at the deadline, exit 2, one line, no credentials`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kpd-hung-api-'))
    try {
      await withSilentServer(async (url) => {
        const args = command.map((a) => (a === 'OUT' ? join(dir, 'bundle') : a))
        // What starting the CLI and loading the API client costs on this machine right now (a kubeconfig that does not
        // exist fails right after), so that only the wait for the API is judged.
        const startupStarted = Date.now()
        await runCli([...args, '--kubeconfig', join(dir, 'absent-kubeconfig')])
        const startup = Date.now() - startupStarted
        const started = Date.now()
        // A process that never exits is killed at 120 s and fails below (code -1); a slow machine is not a hang.
        const r = await runCli([...args, '--kubeconfig', kubeconfig(dir, url), '--timeout', '1'], {}, 120_000)
        const elapsed = Date.now() - started
        assert.equal(r.code, 2, r.stderr)
        assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr)
        assert.match(
          r.stderr,
          /^kproxy-doctor: the API server https:\/\/REDACTED@127\.0\.0\.1:\d+\/? did not answer get services within 1s$/m,
        )
        assert.ok(!(r.stdout + r.stderr).includes('s3cret'), 'the password in the server URL is never printed')
        // The deadline plus a second, plus again what starting took when the machine is slow (the run starts twice as much).
        assert.ok(
          elapsed - startup < 1000 + Math.max(1000, startup),
          `exited ${elapsed - startup} ms after starting (deadline 1 s; process start ${startup} ms)`,
        )
      })
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })
}
