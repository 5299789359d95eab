/**
 * The fuzz targets and their loops, run by test/unit/fuzz.test.ts each in a child process (bounded-run.ts), so an
 * input that hangs a parser or exhausts the heap fails the run with the input's replay instead of hanging or killing
 * it. Inputs are real dumps from the examples and fixtures, mutated (cut-offs, run-together lines, giant lines, deep
 * nesting, odd bytes and numbers, odd white space, hostile names, malformed JSON), random rule graphs (diamonds, jump
 * and goto loops behind random branches, deep nesting) and jump-loop dumps. Each input must give a result or a clean
 * parse error naming the dump line: never a TypeError, RangeError or other internal error, never take long, and what a
 * trace of it prints must hold no terminal control.
 */
import assert from 'node:assert/strict'
import {cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {Chalk} from 'chalk'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {gatherSnapshot} from '../../src/diagnosis/gather.js'
import {DiagnosisError} from '../../src/errors.js'
import {parseBridgeState} from '../../src/parse/bridge-state.js'
import {parseConntrackList} from '../../src/parse/conntrack.js'
import {BufferSource} from '../../src/parse/dump-source.js'
import {parseRouteGet, parseRouteTable} from '../../src/parse/ip-route.js'
import {IpsetState} from '../../src/parse/ipset-save.js'
import {IptablesSave} from '../../src/parse/iptables-save.js'
import {parseDeviceAddresses, parseIpvsadm} from '../../src/parse/ipvsadm.js'
import {parseMetrics} from '../../src/parse/kube-proxy-status.js'
import {parseNftDump} from '../../src/parse/nft-dump.js'
import {normaliseIptablesPaste, normaliseNftPaste} from '../../src/parse/paste-normalise.js'
import {ParseError} from '../../src/parse/parse-error.js'
import {parseSysctl} from '../../src/parse/sysctl.js'
import {writeServiceReport, writeTrace} from '../../src/report/output.js'
import {buildReport} from '../../src/report/report.js'
import {IptablesTracer} from '../../src/trace/iptables-tracer.js'
import {IpvsTracer} from '../../src/trace/ipvs-tracer.js'
import {NftTracer} from '../../src/trace/nft-tracer.js'
import type {Packet, TraceResult, Tracer} from '../../src/trace/types.js'
import {jumpLoopIptables, jumpLoopNft, randomIptablesGraph, randomNftGraph} from './fuzz-generate.js'
import {mutate, mutateJson} from './fuzz-mutate.js'
import {Prng} from './seeded.js'

/**
 * The most CPU time one input may take, parse, traces and printing together. CPU time, not wall time: it does not
 * grow when other processes load the machine (a shared CI runner), so the bound stays meaningful and can stay tight.
 */
const PER_INPUT_MS = 4000

/** This process's CPU time so far, in ms (user and system). */
function cpuMs(): number {
  const {user, system} = process.cpuUsage()
  return (user + system) / 1000
}

const NODE_IP = '10.200.0.11'
const PACKETS: Packet[] = [
  {src: '10.244.1.5', dst: '10.96.10.10', proto: 'tcp', dport: 80, sport: 40000, inIface: 'cbr0', outIface: 'eth0'},
  {src: '203.0.113.9', dst: NODE_IP, proto: 'tcp', dport: 30080, sport: 40000, inIface: 'eth0'},
  {src: NODE_IP, dst: '10.96.0.10', proto: 'udp', dport: 53, sport: 40000},
]

/** The errors that mean "this input is not a dump", each naming where. */
const PARSE_ERRORS = [ParseError, DiagnosisError]

function examples(file: RegExp): string[] {
  const out: string[] = []
  // Bundles only (examples/ci holds a workflow, not a snapshot).
  for (const bundle of readdirSync('examples').filter((b) => existsSync(join('examples', b, 'nodes')))) {
    const nodes = join('examples', bundle, 'nodes')
    for (const node of readdirSync(nodes))
      for (const f of readdirSync(join(nodes, node)))
        if (file.test(f)) out.push(readFileSync(join(nodes, node, f), 'utf8'))
  }
  return out
}
const fixtures = (dir: string, file: RegExp) =>
  readdirSync(dir)
    .filter((f) => file.test(f))
    .map((f) => readFileSync(join(dir, f), 'utf8'))

// Small samples in the tools' formats, for the parsers the examples hold no dump of.
const CONNTRACK = [
  'tcp      6 431999 ESTABLISHED src=10.244.1.5 dst=10.96.10.10 sport=40000 dport=80 src=10.244.2.10 dst=10.244.1.5 sport=8080 dport=40000 [ASSURED] mark=0 use=1',
  'ipv4     2 udp      17 29 src=10.244.1.5 dst=10.96.0.10 sport=53000 dport=53 [UNREPLIED] src=10.244.1.3 dst=10.244.1.5 sport=53 dport=53000 mark=16384 use=1',
  'conntrack v1.4.7 (conntrack-tools): 2 flow entries have been shown.',
].join('\n')
const ROUTES = [
  'default via 10.200.0.1 dev eth0 proto dhcp src 10.200.0.11 metric 100',
  '10.244.1.0/24 dev cbr0 proto kernel scope link src 10.244.1.1',
  '10.244.2.0/24 via 10.200.0.12 dev eth0 onlink',
  'fd00:244::/64 proto static metric 1024 pref medium',
  '\tnexthop via 10.200.0.12 dev eth0 weight 1',
  'unreachable 192.0.2.0/24',
].join('\n')
const ROUTE_GET = '10.96.10.10 via 10.200.0.1 dev eth0 src 10.200.0.11 uid 0 \\    cache '
const SYSCTL = [
  'net.ipv4.ip_forward = 1',
  '/proc/sys/net/bridge/bridge-nf-call-iptables:1',
  'sysctl: cannot stat /proc/sys/net/ipv4/vs/conntrack: No such file or directory',
].join('\n')
const METRICS =
  '# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge\nkubeproxy_sync_proxy_rules_last_timestamp_seconds 1.7e+09\n'

/** What a terminal acts on; the output's own line breaks aside, none may be printed. */
const CONTROL = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u
const PLAIN = new Chalk({level: 0})

/** Printed output: no control but line breaks. */
function assertPrintable(output: string, what: string): void {
  const bad = [...output].findIndex((ch) => ch !== '\n' && CONTROL.test(ch))
  assert.equal(bad, -1, `${what} prints a control: ${JSON.stringify(output.slice(Math.max(0, bad - 60), bad + 60))}`)
}

/** The walk as `trace` prints it (80 columns), which must hold no control whatever the rules hold. */
function assertTracePrintable(result: TraceResult): void {
  let out = ''
  writeTrace({...result, notes: []}, {format: 'table'}, {chalk: PLAIN, width: 80}, (c) => (out += String(c)))
  assertPrintable(out, 'the trace')
}

function traceAll(tracer: Tracer): void {
  for (const [i, p] of PACKETS.entries()) {
    const r = tracer.trace(p)
    assert.ok(['DNAT', 'ACCEPT', 'REJECT', 'DROP', 'UNKNOWN', 'MIXED'].includes(r.verdict), `verdict ${r.verdict}`)
    for (const o of r.outcomes)
      assert.ok(o.probability >= 0 && o.probability <= 1 + 1e-9, `probability ${o.probability}`)
    if (i === 0) assertTracePrintable(r)
  }
}

interface Target {
  name: string
  /** Makes one input from the PRNG. */
  input: (r: Prng) => {text: string; applied: string[]}
  /** Parses (and traces) it; may throw only a parse error. */
  run: (text: string) => void
}

const iptablesDumps = [...examples(/^iptables.*save\.txt$/)]
const nftDumps = [...examples(/^nft-ruleset\.txt$/), ...fixtures('test/fixtures/nft', /\.(nft|txt|json)$/)]
const nftText = nftDumps.filter((t) => !t.trimStart().startsWith('{'))
const nftJson = nftDumps.filter((t) => t.trimStart().startsWith('{'))
const pastes = fixtures('test/fixtures/pastes', /\.(txt|md)$/)
const ipvsadmDumps = examples(/^ipvsadm\.txt$/)
const ipsetDumps = examples(/^ipset\.txt$/)
const networkDumps = examples(/^network\.txt$/)

function parseIptables(text: string): IptablesSave {
  return IptablesSave.parse(new BufferSource(Buffer.from(text, 'latin1')), {requireTables: true})
}

/** A jump-loop dump of a random shape: a few to twenty chains, one to six random rules each, gotos or not. */
function jumpLoopShape(r: Prng) {
  return {chains: 1 + r.int(20), rulesPerChain: 1 + r.int(6), gotos: r.chance(0.5)}
}

const TARGETS: Target[] = [
  {
    name: 'iptables-save + tracer',
    input: (r) => mutate(r.pick(iptablesDumps), r),
    run: (text) =>
      traceAll(
        new IptablesTracer(parseIptables(text), {localAddresses: [NODE_IP], ipsets: IpsetState.parse(ipsetDumps[0])}),
      ),
  },
  {
    name: 'pasted rules, normalised + tracer',
    input: (r) => mutate(r.pick([...pastes, ...iptablesDumps]), r),
    run: (text) => {
      if (text.includes('table ip')) return void parseNftDump(normaliseNftPaste(text).text)
      const paste = normaliseIptablesPaste(text, 4)
      for (const n of [0, 1, 1e9]) assert.ok(Number.isInteger(paste.originalLine(n)))
      traceAll(new IptablesTracer(parseIptables(paste.text), {localAddresses: [NODE_IP]}))
    },
  },
  {
    name: 'iptables jump graph + tracer',
    input: (r) => ({text: randomIptablesGraph(r), applied: ['random graph']}),
    run: (text) => traceAll(new IptablesTracer(parseIptables(text), {localAddresses: [NODE_IP]})),
  },
  {
    name: 'iptables jump loops behind random branches + tracer',
    input: (r) => {
      const shape = jumpLoopShape(r)
      return {text: jumpLoopIptables(r, shape), applied: [`jump loops ${JSON.stringify(shape)}`]}
    },
    run: (text) => traceAll(new IptablesTracer(parseIptables(text), {localAddresses: [NODE_IP]})),
  },
  {
    name: 'nft text + tracer',
    input: (r) => mutate(r.pick(nftText), r),
    run: (text) => traceAll(new NftTracer(parseNftDump(text), {localAddresses: [NODE_IP]})),
  },
  {
    name: 'nft paste, normalised + tracer',
    input: (r) => mutate(r.pick(nftText), r),
    run: (text) => traceAll(new NftTracer(parseNftDump(normaliseNftPaste(text).text), {localAddresses: [NODE_IP]})),
  },
  {
    name: 'nft JSON + tracer',
    input: (r) => mutateJson(r.pick(nftJson), r),
    run: (text) => traceAll(new NftTracer(parseNftDump(text), {localAddresses: [NODE_IP]})),
  },
  {
    name: 'nft jump graph + tracer',
    input: (r) => ({text: randomNftGraph(r), applied: ['random graph']}),
    run: (text) => traceAll(new NftTracer(parseNftDump(text), {localAddresses: [NODE_IP]})),
  },
  {
    name: 'nft jump loops behind random branches + tracer',
    input: (r) => {
      const shape = jumpLoopShape(r)
      return {text: jumpLoopNft(r, shape), applied: [`jump loops ${JSON.stringify(shape)}`]}
    },
    run: (text) => traceAll(new NftTracer(parseNftDump(text), {localAddresses: [NODE_IP]})),
  },
  {
    name: 'ipvsadm + ipvs tracer',
    input: (r) => mutate(r.pick(ipvsadmDumps), r),
    run: (text) => {
      const servers = parseIpvsadm(text)
      traceAll(
        new IpvsTracer(
          parseIptables(iptablesDumps.find((d) => d.includes('KUBE-CLUSTER-IP')) ?? iptablesDumps[0]),
          servers,
          {
            localAddresses: [NODE_IP],
            vips: ['10.96.10.10'],
            ipsets: IpsetState.parse(ipsetDumps[0]),
          },
        ),
      )
    },
  },
  {
    name: 'ipset save',
    input: (r) => mutate(r.pick(ipsetDumps), r),
    run: (text) =>
      void IpsetState.parse(text).matches('KUBE-CLUSTER-IP', 'dst,dst', {
        src: '10.244.1.5',
        dst: '10.96.10.10',
        proto: 'tcp',
        dport: 80,
        sport: 1,
      }),
  },
  {name: 'conntrack', input: (r) => mutate(CONNTRACK, r), run: (text) => void parseConntrackList(text)},
  {
    name: 'ip route',
    input: (r) => mutate(r.chance(0.7) ? ROUTES : ROUTE_GET, r),
    run: (text) => {
      try {
        parseRouteTable(text)
      } finally {
        parseRouteGet(text)
      }
    },
  },
  {name: 'sysctl', input: (r) => mutate(SYSCTL, r), run: (text) => void parseSysctl(text)},
  {
    name: 'node network, kube-ipvs0 and metrics text',
    input: (r) => mutate(r.pick(networkDumps), r),
    run: (text) => {
      parseBridgeState(text)
      parseDeviceAddresses(text)
      parseMetrics(text)
      parseMetrics(METRICS + text)
    },
  },
]

/** The targets' names, in the order fuzzTarget takes their index. */
export const FUZZ_TARGETS = TARGETS.map((t) => t.name)

function describeError(e: unknown): string {
  return e instanceof Error
    ? `${e.constructor.name}: ${e.message.slice(0, 300)}\n${e.stack?.split('\n').slice(1, 6).join('\n')}`
    : String(e)
}

function isCleanParseError(e: unknown): boolean {
  return PARSE_ERRORS.some((cls) => e instanceof cls && e.constructor === cls)
}

/** The seed a target's PRNG starts from: the run's seed, spread per target. */
export const targetSeed = (seed: number, index: number) => (seed + index * 7919) >>> 0

/** Where to go back to: the run's seed and the input's number, which FUZZ_SEED and fuzzInput replay. */
function replayHint(seed: number, target: string, iteration: number, applied: string[], text: string): string {
  return `target "${target}", seed ${seed} (replay: FUZZ_SEED=${seed}), iteration ${iteration}, mutations [${applied.join(', ')}], input ${text.length} chars starting ${JSON.stringify(text.slice(0, 200))}`
}

/**
 * The input a target makes at `iteration` of a run with `seed`: the same on every machine (inputs depend on the PRNG
 * only, never on time), for a regression test of an input a campaign found.
 */
export function fuzzInput(seed: number, index: number, iteration: number): {text: string; applied: string[]} {
  const r = new Prng(targetSeed(seed, index))
  let made = TARGETS[index].input(r)
  for (let i = 0; i < iteration; i++) made = TARGETS[index].input(r)
  return made
}

/**
 * Runs target `index` on one input (a replay: `fuzzRun(i, fuzzInput(seed, i, n).text)`).
 * @public
 */
export function fuzzRun(index: number, text: string): void {
  TARGETS[index].run(text)
}

/**
 * Runs target `index` on inputs of the seeded PRNG for `ms` (at least five inputs), checking each; the number of each
 * input goes to stderr before it runs, so a run killed on an input (hung, out of memory) still says which.
 * @public
 */
export function fuzzTarget(index: number, seed: number, ms: number): {inputs: number; refused: number} {
  const target = TARGETS[index]
  const r = new Prng(targetSeed(seed, index))
  const started = performance.now()
  let iteration = 0
  let refused = 0
  for (; iteration < 100_000 && (iteration < 5 || performance.now() - started < ms); iteration++) {
    const {text, applied} = target.input(r)
    process.stderr.write(`input ${iteration}\n`)
    const t0 = cpuMs()
    try {
      target.run(text)
    } catch (e) {
      refused++
      const where = replayHint(seed, target.name, iteration, applied, text)
      assert.ok(isCleanParseError(e), `${describeError(e)}\n${where}`)
      assert.match(
        (e as Error).message,
        /line \d+|input is empty|no "\*table" line|empty output|not JSON|"nftables" array|no table/,
        `an error that names no line: ${describeError(e)}\n${where}`,
      )
      assert.doesNotMatch((e as Error).message, /\n/, `a parse error is one line: ${where}`)
    }
    const took = cpuMs() - t0
    assert.ok(
      took < PER_INPUT_MS,
      `took ${Math.round(took)} ms of CPU: ${replayHint(seed, target.name, iteration, applied, text)}`,
    )
  }
  return {inputs: iteration, refused}
}

/** One fuzzed bundle: which example, which of its files, and what that file now holds (or a symbolic link). */
interface SnapshotInput {
  bundle: string
  file: string
  symlink: boolean
  text: string
  applied: string[]
}

const BUNDLE_FILES = [
  'services.json',
  'endpointslices.json',
  'pods.json',
  'nodes.json',
  'configmaps.json',
  'manifest.json',
]

function nextSnapshotInput(r: Prng): SnapshotInput {
  const bundle = r.pick(['broken-cluster', 'healthy-cluster', 'ipvs-cluster'])
  const nodes = join('examples', bundle, 'nodes')
  const files = [
    ...BUNDLE_FILES,
    ...readdirSync(nodes).flatMap((n) => readdirSync(join(nodes, n)).map((f) => join('nodes', n, f))),
  ]
  const file = r.pick(files)
  if (r.chance(0.05)) return {bundle, file, symlink: true, text: '', applied: ['symlink']}
  const original = readFileSync(join('examples', bundle, file), 'utf8')
  const m =
    file.endsWith('.json') || original.trimStart().startsWith('{') ? mutateJson(original, r) : mutate(original, r)
  return {bundle, file, symlink: false, text: m.text, applied: m.applied}
}

/**
 * The bundle the snapshot fuzz makes at `iteration` of a run with `seed` (a replay; inputs depend on the PRNG only).
 * @public
 */
export function snapshotInput(seed: number, iteration: number): SnapshotInput {
  const r = new Prng(seed ^ 0x5a5a5a5a)
  let made = nextSnapshotInput(r)
  for (let i = 0; i < iteration; i++) made = nextSnapshotInput(r)
  return made
}

/** Diagnoses one fuzzed bundle in `dir` (a copy of its example): a diagnosis whose table prints no control, or one clean line. */
async function diagnoseSnapshot(dir: string, where: string): Promise<void> {
  try {
    const g = await gatherSnapshot(dir, 'shop', 'web')
    const d = diagnose(g.cluster, g.observations)
    assert.ok(Array.isArray(d.findings), where)
    let out = ''
    writeServiceReport(
      buildReport(d),
      {format: 'table', quiet: false, order: []},
      {chalk: PLAIN, width: 100},
      (c) => (out += String(c)),
    )
    assertPrintable(out, `the report (${where})`)
  } catch (e) {
    assert.ok(e instanceof DiagnosisError, `${describeError(e)}\n${where}`)
    assert.doesNotMatch(e.message, /\n/, where)
  }
}

/** Writes a fuzzed bundle: a copy of its example under `dir` with the one file changed. */
function writeSnapshot(dir: string, input: SnapshotInput): void {
  cpSync(join('examples', input.bundle), dir, {recursive: true})
  const file = join(dir, input.file)
  if (input.symlink) {
    rmSync(file)
    symlinkSync('/etc/hostname', file)
  } else writeFileSync(file, input.text, 'latin1')
}

/**
 * Replays one fuzzed bundle (see snapshotInput) and diagnoses it as fuzzSnapshots does.
 * @public
 */
export async function fuzzSnapshotRun(input: SnapshotInput): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'kpd-fuzz-'))
  try {
    writeSnapshot(join(work, 'bundle'), input)
    await diagnoseSnapshot(join(work, 'bundle'), `${input.bundle} ${input.file} [${input.applied.join(', ')}]`)
  } finally {
    rmSync(work, {recursive: true, force: true})
  }
}

/**
 * Mutates one file of an example bundle per input for `ms` and diagnoses it: a diagnosis, whose table prints no
 * control, or one clean line; never an internal error.
 * @public
 */
export async function fuzzSnapshots(seed: number, ms: number): Promise<{inputs: number}> {
  const r = new Prng(seed ^ 0x5a5a5a5a)
  const work = mkdtempSync(join(tmpdir(), 'kpd-fuzz-'))
  const deadline = performance.now() + ms
  let iteration = 0
  try {
    for (; iteration < 10_000 && (iteration < 5 || performance.now() < deadline); iteration++) {
      const input = nextSnapshotInput(r)
      const dir = join(work, String(iteration))
      writeSnapshot(dir, input)
      const where = `seed ${seed} (replay: FUZZ_SEED=${seed}), snapshot iteration ${iteration}, ${input.bundle} ${input.file} [${input.applied.join(', ')}]`
      process.stderr.write(`${where}\n`)
      const t0 = cpuMs()
      await diagnoseSnapshot(dir, where)
      const took = cpuMs() - t0
      assert.ok(took < PER_INPUT_MS, `took ${Math.round(took)} ms of CPU: ${where}`)
      rmSync(dir, {recursive: true, force: true})
    }
  } finally {
    rmSync(work, {recursive: true, force: true})
  }
  return {inputs: iteration}
}
