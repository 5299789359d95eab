/**
 * Seeded, time-bounded fuzzing of every parser, the tracers and the snapshot reader. Inputs are real dumps from the
 * examples and fixtures, mutated (cut-offs, run-together lines, giant lines, deep nesting, odd bytes and numbers,
 * malformed JSON), and random rule graphs (jump loops, diamonds). Each input must give a result or a clean parse error
 * naming the dump line: never a TypeError, RangeError (stack overflow) or other internal error, and never take long.
 *
 * FUZZ_SEED=n replays a run; FUZZ_SECONDS=n changes the time spent (default 20 s over all targets).
 */
import assert from 'node:assert/strict'
import {cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {test} from 'node:test'
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
import {
  ParseError as ConntrackParseError,
  ParseError as DumpParseError,
  ParseError as IpsetParseError,
  ParseError as IpvsParseError,
  ParseError as NftParseError,
  ParseError as RouteParseError,
  ParseError as SysctlParseError,
} from '../../src/parse/parse-error.js'
import {parseSysctl} from '../../src/parse/sysctl.js'
import {IptablesTracer} from '../../src/trace/iptables-tracer.js'
import {IpvsTracer} from '../../src/trace/ipvs-tracer.js'
import {NftTracer} from '../../src/trace/nft-tracer.js'
import type {Packet, Tracer} from '../../src/trace/types.js'
import {randomIptablesGraph, randomNftGraph} from '../helpers/fuzz-generate.js'
import {mutate, mutateJson, Prng} from '../helpers/fuzz-mutate.js'

const SEED = Number(process.env.FUZZ_SEED ?? 20261123) >>> 0
const TOTAL_MS = Number(process.env.FUZZ_SECONDS ?? 20) * 1000
/** The longest one input may take, parse and traces together (generous: CI machines are shared). */
const PER_INPUT_MS = 4000

const NODE_IP = '10.200.0.11'
const PACKETS: Packet[] = [
  {src: '10.244.1.5', dst: '10.96.10.10', proto: 'tcp', dport: 80, sport: 40000, inIface: 'cbr0', outIface: 'eth0'},
  {src: '203.0.113.9', dst: NODE_IP, proto: 'tcp', dport: 30080, sport: 40000, inIface: 'eth0'},
  {src: NODE_IP, dst: '10.96.0.10', proto: 'udp', dport: 53, sport: 40000},
]

/** The errors that mean "this input is not a dump", each naming where. */
const PARSE_ERRORS = [
  DumpParseError,
  NftParseError,
  IpvsParseError,
  IpsetParseError,
  ConntrackParseError,
  RouteParseError,
  SysctlParseError,
  DiagnosisError,
]

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

function traceAll(tracer: Tracer): void {
  for (const p of PACKETS) {
    const r = tracer.trace(p)
    assert.ok(['DNAT', 'ACCEPT', 'REJECT', 'DROP', 'UNKNOWN', 'MIXED'].includes(r.verdict), `verdict ${r.verdict}`)
    for (const o of r.outcomes)
      assert.ok(o.probability >= 0 && o.probability <= 1 + 1e-9, `probability ${o.probability}`)
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
    name: 'nft text + tracer',
    input: (r) => mutate(r.pick(nftText), r),
    run: (text) => traceAll(new NftTracer(parseNftDump(text), {localAddresses: [NODE_IP]})),
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

function describeError(e: unknown): string {
  return e instanceof Error
    ? `${e.constructor.name}: ${e.message.slice(0, 300)}\n${e.stack?.split('\n').slice(1, 6).join('\n')}`
    : String(e)
}

function isCleanParseError(e: unknown): boolean {
  return PARSE_ERRORS.some((cls) => e instanceof cls && e.constructor === cls)
}

function replayHint(target: string, iteration: number, applied: string[], text: string): string {
  return `target "${target}", seed ${SEED} (replay: FUZZ_SEED=${SEED}), iteration ${iteration}, mutations [${applied.join(', ')}], input ${text.length} chars starting ${JSON.stringify(text.slice(0, 200))}`
}

test(`fuzz: parsers and tracers give a result or a clean parse error, quickly (seed ${SEED})`, () => {
  const sliceMs = (TOTAL_MS * 0.8) / TARGETS.length
  const ran: string[] = []
  for (const [index, target] of TARGETS.entries()) {
    const r = new Prng(SEED + index * 7919)
    const started = performance.now()
    let iteration = 0
    let errors = 0
    for (; iteration < 100_000 && performance.now() - started < sliceMs; iteration++) {
      const {text, applied} = target.input(r)
      const t0 = performance.now()
      try {
        target.run(text)
      } catch (e) {
        errors++
        assert.ok(isCleanParseError(e), `${describeError(e)}\n${replayHint(target.name, iteration, applied, text)}`)
        assert.match(
          (e as Error).message,
          /line \d+|input is empty|no "\*table" line|empty output|not JSON|"nftables" array|no table/,
          `an error that names no line: ${describeError(e)}\n${replayHint(target.name, iteration, applied, text)}`,
        )
        assert.doesNotMatch(
          (e as Error).message,
          /\n/,
          `a parse error is one line: ${replayHint(target.name, iteration, applied, text)}`,
        )
      }
      const ms = performance.now() - t0
      assert.ok(ms < PER_INPUT_MS, `took ${Math.round(ms)} ms: ${replayHint(target.name, iteration, applied, text)}`)
    }
    ran.push(`${target.name}: ${iteration} inputs, ${errors} refused`)
    assert.ok(iteration >= 5, `${target.name}: only ${iteration} inputs in ${Math.round(sliceMs)} ms`)
  }
  console.log(`fuzz seed ${SEED}:\n  ${ran.join('\n  ')}`)
})

test(`fuzz: the snapshot reader gives a diagnosis or one clean line, whatever a bundle file holds (seed ${SEED})`, async () => {
  const r = new Prng(SEED ^ 0x5a5a5a5a)
  const work = mkdtempSync(join(tmpdir(), 'kpd-fuzz-'))
  const deadline = performance.now() + TOTAL_MS * 0.2
  let iteration = 0
  try {
    for (; iteration < 10_000 && performance.now() < deadline; iteration++) {
      const bundle = r.pick(['broken-cluster', 'healthy-cluster', 'ipvs-cluster'])
      const dir = join(work, String(iteration))
      cpSync(join('examples', bundle), dir, {recursive: true})
      const files = [
        ...['services.json', 'endpointslices.json', 'pods.json', 'nodes.json', 'configmaps.json', 'manifest.json'],
        ...readdirSync(join(dir, 'nodes')).flatMap((n) =>
          readdirSync(join(dir, 'nodes', n)).map((f) => join('nodes', n, f)),
        ),
      ]
      const file = join(dir, r.pick(files))
      let applied: string[]
      if (r.chance(0.05)) {
        rmSync(file)
        symlinkSync('/etc/hostname', file)
        applied = ['symlink']
      } else {
        const original = readFileSync(file, 'utf8')
        const m =
          file.endsWith('.json') || original.trimStart().startsWith('{') ? mutateJson(original, r) : mutate(original, r)
        writeFileSync(file, m.text, 'latin1')
        applied = m.applied
      }
      const where = `seed ${SEED} (replay: FUZZ_SEED=${SEED}), snapshot iteration ${iteration}, ${bundle} ${file.slice(dir.length + 1)} [${applied.join(', ')}]`
      const t0 = performance.now()
      try {
        const g = await gatherSnapshot(dir, 'shop', 'web')
        const d = diagnose(g.cluster, g.observations)
        assert.ok(Array.isArray(d.findings), where)
      } catch (e) {
        assert.ok(e instanceof DiagnosisError, `${describeError(e)}\n${where}`)
        assert.doesNotMatch(e.message, /\n/, where)
      }
      assert.ok(performance.now() - t0 < PER_INPUT_MS, `took ${Math.round(performance.now() - t0)} ms: ${where}`)
      rmSync(dir, {recursive: true, force: true})
    }
  } finally {
    rmSync(work, {recursive: true, force: true})
  }
  assert.ok(iteration >= 5, `only ${iteration} snapshots in the time given`)
})
