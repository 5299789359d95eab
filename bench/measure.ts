/**
 * One measured workload in its own process; prints {"ms", "maxRssBytes"} on stderr's last line (bench.ts times the
 * whole process from outside).
 *   node measure.js svc BUNDLE SERVICE
 *   node measure.js trace FILE DST
 *   node measure.js scan BUNDLE
 */
import {resolve} from 'node:path'

const [mode, a, b] = process.argv.slice(2)
const started = performance.now()
const {run} = await import('@oclif/core')
const ARGS: Record<string, string[]> = {
  svc: ['svc', b, '-n', 'bench', '--snapshot', a, '-o', 'json'],
  trace: ['trace', '--iptables-save', a, '--src', '10.128.0.200', '--dst', b, '--dport', '80', '-o', 'json'],
  scan: ['scan', '-n', 'bench', '--snapshot', a, '-o', 'json'],
}
const args = ARGS[mode]
const write = process.stdout.write.bind(process.stdout)
let out = ''
process.stdout.write = ((chunk: string) => {
  out += chunk
  return true
}) as typeof process.stdout.write
await run(args, resolve(import.meta.dirname, '../../bin/run.js'))
process.stdout.write = write
const parsed = JSON.parse(out)
if ((mode === 'svc' || mode === 'scan') && parsed.ok !== true) throw new Error(`diagnosis not ok: ${parsed.summary ?? JSON.stringify(parsed.counts)}`)
if (mode === 'trace' && parsed.verdict !== 'DNAT') throw new Error(`trace verdict ${parsed.verdict}`)
process.stderr.write(`\n${JSON.stringify({ms: performance.now() - started, maxRssBytes: process.resourceUsage().maxRSS * 1024})}\n`)
