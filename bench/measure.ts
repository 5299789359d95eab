/**
 * One measured workload in its own process; prints {"ms", "maxRssBytes"} on stderr's last line (bench.ts times the
 * whole process from outside).
 *   node measure.js svc BUNDLE SERVICE
 *   node measure.js trace FILE DST
 *   node measure.js trace-nft FILE DST   (FILE: `nft list ruleset` text)
 *   node measure.js scan BUNDLE
 */
import {createRequire} from 'node:module'
import {resolve} from 'node:path'

const [mode, a, b] = process.argv.slice(2)
const started = performance.now()
// The program as users run it: bin/program.js (what bin/run.js runs) loading the bundle `npm run build` makes, with
// its code cache (bench.ts gives every measured process one cache folder of its own, so a best of three counts a run
// after the first has kept it, as an on-call engineer's second run is).
const {runProgram} = createRequire(import.meta.url)(resolve(import.meta.dirname, '../../bin/program.js')) as {
  runProgram: (argv: string[]) => Promise<void>
}
const ARGS: Record<string, string[]> = {
  svc: ['svc', b, '-n', 'bench', '--snapshot', a, '-o', 'json'],
  trace: ['trace', '--iptables-save', a, '--src', '10.128.0.200', '--dst', b, '--dport', '80', '-o', 'json'],
  'trace-nft': ['trace', '--nft', a, '--src', '10.128.0.200', '--dst', b, '--dport', '80', '-o', 'json'],
  scan: ['scan', '-n', 'bench', '--snapshot', a, '-o', 'json'],
}
const args = ARGS[mode]
const write = process.stdout.write.bind(process.stdout)
// A scan's document is hundreds of MB at 10k Services: only its head is kept (its "ok" comes among the first fields), so the figures
// are the tool's, not this harness's copy of its output.
const HEAD_CHARS = 4096
let out = ''
let bytes = 0
process.stdout.write = ((chunk: string) => {
  bytes += chunk.length
  if (mode !== 'scan') out += chunk
  else if (out.length < HEAD_CHARS) out += chunk.slice(0, HEAD_CHARS - out.length)
  return true
}) as typeof process.stdout.write
await runProgram(args)
process.stdout.write = write
if (mode === 'scan') {
  // The document's head: its "kind" and, before any Service, its "ok" (an "apiVersion" may come first).
  if (!/^\{[^{}]*"kind": "ScanReport",[^{}]*"ok": true,/.test(out))
    throw new Error(`scan not ok (${bytes} characters of output): ${out.slice(0, 300)}`)
} else {
  const parsed = JSON.parse(out)
  if (mode === 'svc' && parsed.ok !== true)
    throw new Error(`diagnosis not ok: ${parsed.summary ?? JSON.stringify(parsed.counts)}`)
  if (mode.startsWith('trace') && parsed.verdict !== 'DNAT') throw new Error(`trace verdict ${parsed.verdict}`)
}
process.stderr.write(
  `\n${JSON.stringify({ms: performance.now() - started, maxRssBytes: process.resourceUsage().maxRSS * 1024})}\n`,
)
