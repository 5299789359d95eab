/**
 * npm run bench:live (root): how long a node takes to print kube-proxy's rules, per backend and read form, at
 * KPD_BENCH_LIVE_SERVICES Services (default 10,000) × 10 endpoints, loaded into a network namespace this script
 * creates and removes. Each read runs as `ip netns exec NS <read>` with its output counted and thrown away (the floor
 * any remote read pays), plain and through `gzip -1`, bounded by KPD_BENCH_LIVE_TIMEOUT seconds (default 180).
 * Prints, per backend, the fastest read that holds every rule kube-proxy's path needs. `npm run bench` runs the same
 * measurement through measureLiveReads (complete reads only, no gzip variants, to keep it to a few minutes).
 */
import {spawn, spawnSync} from 'node:child_process'
import {mkdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {join, resolve} from 'node:path'
import {pathToFileURL} from 'node:url'
import {randomBytes} from 'node:crypto'
import {generateBundle} from './generate.js'
import {generateNftRuleset} from './generate-nft.js'

const outDir = resolve('bench/out')

export interface LiveReadOptions {
  services: number
  /** Each read's bound. */
  timeoutMs: number
  /** Also the reads that hold only part of the rules, and each read through gzip -1 (the full table of read forms). */
  everyForm: boolean
  write: (text: string) => void
}

/** One backend's outcome: the fastest read holding every rule kube-proxy's path needs (none when none finished). */
export interface BackendFastest {
  backend: string
  fastest?: {command: string; ms: number; bytes: number}
  error?: string
}

interface ReadForm {
  /** What is read, as the node would run it. */
  argv: string[]
  /** Whether the output holds every table kube-proxy's path needs (nat and filter, or kube-proxy's nft table). */
  complete: boolean
}

interface Backend {
  name: string
  load: (ns: string, file: string) => void
  input: () => string
  reads: ReadForm[]
}

interface Timing {
  ms: number
  bytes: number
  timedOut: boolean
}

/** Loading is not what is measured: 10k Services into nft take minutes on a busy machine. */
const LOAD_TIMEOUT_MS = 600_000

function inNs(ns: string, argv: string[], input?: string): void {
  const r = spawnSync('ip', ['netns', 'exec', ns, ...argv], {
    input,
    encoding: 'utf8',
    maxBuffer: 1 << 30,
    timeout: LOAD_TIMEOUT_MS,
  })
  if (r.status !== 0) throw new Error(`${argv.join(' ')} failed: ${(r.stderr || r.error?.message || '').slice(0, 300)}`)
}

/** Runs a read in the namespace, counting its output bytes (optionally after gzip -1), bounded by the timeout. */
function timeRead(ns: string, argv: string[], gzip: boolean, timeoutMs: number): Promise<Timing> {
  return new Promise((done) => {
    const started = performance.now()
    const command = gzip ? ['sh', '-c', `${argv.map((a) => `'${a}'`).join(' ')} | gzip -1`] : argv
    const child = spawn('ip', ['netns', 'exec', ns, ...command], {stdio: ['ignore', 'pipe', 'ignore']})
    let bytes = 0
    child.stdout.on('data', (chunk: Buffer) => (bytes += chunk.length))
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      done({ms: performance.now() - started, bytes, timedOut: signal === 'SIGKILL' || code !== 0})
    })
  })
}

const iptablesBackend = (variant: 'legacy' | 'nft', services: number): Backend => ({
  name: `iptables (${variant})`,
  input: () => generateBundle(outDir, services).dump,
  load: (ns, file) => inNs(ns, [`iptables-${variant}-restore`], readFileSync(file, 'utf8')),
  reads: [
    {argv: [`iptables-${variant}-save`], complete: true},
    {argv: [`iptables-${variant}-save`, '-t', 'nat'], complete: false},
    {argv: [`iptables-${variant}-save`, '-t', 'filter'], complete: false},
    ...(variant === 'nft'
      ? [
          {argv: ['nft', 'list', 'table', 'ip', 'nat'], complete: false},
          {argv: ['nft', 'list', 'ruleset'], complete: true},
        ]
      : []),
  ],
})

const nftablesBackend = (services: number): Backend => ({
  name: 'nftables (kube-proxy nftables mode)',
  input: () => {
    const file = join(outDir, `kube-proxy-${services}.nft`)
    writeFileSync(file, generateNftRuleset(services))
    return file
  },
  load: (ns, file) => inNs(ns, ['nft', '-f', file]),
  reads: [
    {argv: ['nft', 'list', 'table', 'ip', 'kube-proxy'], complete: true},
    {argv: ['nft', '-j', 'list', 'table', 'ip', 'kube-proxy'], complete: true},
    {argv: ['nft', 'list', 'ruleset'], complete: true},
  ],
})

const mb = (b: number) => `${(b / 1048576).toFixed(1)} MB`
const seconds = (t: Timing, timeoutMs: number) =>
  t.timedOut ? `> ${timeoutMs / 1000} s`.padStart(9) : `${(t.ms / 1000).toFixed(2)} s`.padStart(9)

/** Loads each backend in a namespace of its own (removed by name at the end, also on failure) and times its reads. */
export async function measureLiveReads(opts: LiveReadOptions): Promise<BackendFastest[]> {
  const {services, timeoutMs, write} = opts
  mkdirSync(outDir, {recursive: true})
  const results: BackendFastest[] = []
  for (const backend of [
    iptablesBackend('legacy', services),
    iptablesBackend('nft', services),
    nftablesBackend(services),
  ]) {
    const ns = `kpd-bench-${randomBytes(4).toString('hex')}`
    spawnSync('ip', ['netns', 'add', ns])
    try {
      const file = backend.input()
      const loadStarted = performance.now()
      backend.load(ns, file)
      write(`\n${backend.name}: loaded in ${((performance.now() - loadStarted) / 1000).toFixed(1)} s\n`)
      let fastest: BackendFastest['fastest']
      for (const read of backend.reads.filter((r) => opts.everyForm || r.complete)) {
        const plain = await timeRead(ns, read.argv, false, timeoutMs)
        const packed = !opts.everyForm || plain.timedOut ? undefined : await timeRead(ns, read.argv, true, timeoutMs)
        const zipped =
          packed && !packed.timedOut ? `gzip -1 ${seconds(packed, timeoutMs)} ${mb(packed.bytes).padStart(9)}` : ''
        write(
          `  ${read.argv.join(' ').padEnd(40)} ${seconds(plain, timeoutMs)} ${mb(plain.bytes).padStart(9)}  ${zipped}${read.complete ? '' : '  (part of the rules)'}\n`,
        )
        if (read.complete && !plain.timedOut && (!fastest || plain.ms < fastest.ms))
          fastest = {command: read.argv.join(' '), ms: plain.ms, bytes: plain.bytes}
      }
      write(
        `  fastest complete read: ${fastest ? `${fastest.command} (${(fastest.ms / 1000).toFixed(2)} s)` : 'none finished'}\n`,
      )
      results.push({backend: backend.name, fastest})
    } catch (e) {
      write(`\n${backend.name}: not measured: ${(e as Error).message}\n`)
      results.push({backend: backend.name, error: (e as Error).message})
    } finally {
      spawnSync('ip', ['netns', 'del', ns])
    }
  }
  if (!process.env.KPD_BENCH_KEEP) rmSync(join(outDir, `bundle-${services}`), {recursive: true, force: true})
  return results
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error('bench:live needs root (it creates a network namespace)')
  const services = Number(process.env.KPD_BENCH_LIVE_SERVICES ?? 10000)
  const timeoutMs = Number(process.env.KPD_BENCH_LIVE_TIMEOUT ?? 180) * 1000
  const write = (text: string) => void process.stdout.write(text)
  write(`live reads at ${services} Services × 10 endpoints (each read bounded at ${timeoutMs / 1000} s)\n`)
  await measureLiveReads({services, timeoutMs, everyForm: true, write})
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main()
