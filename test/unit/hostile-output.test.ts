/**
 * Issue #32: terminal controls from a node or the API never reach the screen. Hostile text goes in through every
 * input a user later reads: node names, Pod names, the Service's name (and so the comments kube-proxy writes), a
 * rule's comment, a node's read error, how nodes were read, probe results, ignore reasons, notes, a trace's rules.
 * Every output format is then written exactly as the commands write it (report/output.ts), and each must hold no
 * control character but its own line breaks (and colour codes when colours are on), no hostile text at the start of
 * a line, and, for JSON and YAML, the hostile values exactly as they were.
 */
import assert from 'node:assert/strict'
import {test} from 'node:test'
import {Chalk} from 'chalk'
import {XMLValidator} from 'fast-xml-parser'
import {parse as parseYaml} from 'yaml'
import type {NodeReadVia} from '../../src/diagnosis/choose-transport.js'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import type {NodeObservation} from '../../src/node/observation.js'
import type {ProbeRun} from '../../src/node/probe/tcp-probe.js'
import {BufferSource} from '../../src/parse/dump-source.js'
import {IptablesSave} from '../../src/parse/iptables-save.js'
import {writeScanReport, writeServiceReport, writeTrace, type Write} from '../../src/report/output.js'
import {printable} from '../../src/report/printable.js'
import {buildReport, type Report} from '../../src/report/report.js'
import {buildScanReport, keepScannedServices} from '../../src/report/scan-report.js'
import {IptablesTracer} from '../../src/trace/iptables-tracer.js'
import {offlineCluster} from '../helpers/offline-cluster.js'
import {runCli} from '../helpers/run-cli.js'
import {stderrLine} from '../../src/cli/stderr.js'
import {stderrLog} from '../../src/cli/verbose-log.js'

/** Clear screen, cursor home, window title, an OSC 52 clipboard write: what one iptables comment can hold. */
const ESCAPES = '\x1b[2J\x1b[H\x1b]0;owned\x07\x1b]52;c;ZWNobyBvd25lZA==\x07'
/** With a C1 CSI, a bidi override, a line separator, NEL and a BOM (a dump is read as bytes: these reach it as C1 controls). */
const CONTROLS = `${ESCAPES}\x9b31m\u202e\u2028\u0085\ufeff`
/** The line a hostile name tries to start: a verdict of its own. */
const FORGED = '✓ shop/web: every traced path works'
/** A hostile name from the API: the controls, and a line break that would start the forged line. */
const NAME = (base: string) => `${base}${CONTROLS}\r\n${FORGED}\t`
/** A hostile name that reaches a dump's comments (kube-proxy writes the Service's name there): no line break. */
const ONE_LINE = (base: string) => `${base}${CONTROLS}`

const NODE_A = NAME('node-a')
const NODE_C = NAME('node-c')
const SERVICE = ONE_LINE('web')

/** What a terminal acts on, but a line break of the layout's own. */
const CONTROL = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u
// eslint-disable-next-line no-control-regex -- the controls are what the test looks for
const SGR = /\x1b\[[0-9;]*m/g

function assertPrintable(output: string, what: string, colour = false, wrapped = false): void {
  const text = colour ? output.replace(SGR, '') : output
  const bad = [...text].findIndex((ch) => ch !== '\n' && CONTROL.test(ch))
  assert.equal(bad, -1, `${what}: a control at ${bad}: ${JSON.stringify(text.slice(Math.max(0, bad - 40), bad + 40))}`)
  // Wrapping breaks long text at spaces onto indented lines; nothing hostile starts a line of its own at the margin,
  // where the headline stands, and unwrapped, nothing hostile starts a line at all.
  for (const line of text.split('\n'))
    assert.ok(
      !(wrapped ? line : line.trimStart()).startsWith(FORGED),
      `${what}: a hostile name starts a line: ${JSON.stringify(line)}`,
    )
}

/** Renames a node in the API objects (deep, in every string), as a hostile API server would name it. */
function renamed<T>(value: T, from: string, to: string): T {
  return JSON.parse(JSON.stringify(value), (_, v) => (typeof v === 'string' ? v.replaceAll(from, to) : v)) as T
}

function hostileDiagnosis() {
  const base = offlineCluster({
    web: {name: SERVICE},
    // A rule with a hostile comment breaks node-b's paths: the headline, a finding's evidence and the walk show it.
    editDump: {
      'node-b': (text) =>
        text.replace(
          /^(-A KUBE-SERVICES -d 10\.96\.10\.10\/32 .*)$/m,
          `-A KUBE-SERVICES -d 10.96.10.10/32 -p tcp -m comment --comment "${ONE_LINE('drop')}" -j DROP\n$1`,
        ),
    },
  })
  const cluster = renamed(base.cluster, 'node-a', NODE_A)
  // Pod names: every web Pod's name gets the hostile tail (EndpointSlices and Pods alike).
  for (const p of ['web-a1', 'web-a2', 'web-b1', 'web-b2']) Object.assign(cluster, renamed(cluster, p, NAME(p)))
  const observations: NodeObservation[] = [
    ...base.observations.map((o) => (o.name === 'node-a' ? {...o, name: NODE_A} : o)),
    {name: NODE_C, reachable: false, error: NAME('ssh: connect ECONNREFUSED')},
  ]
  const readVia = new Map<string, NodeReadVia>([
    [
      NODE_A,
      {
        transport: 'ssh',
        address: NAME('root@10.200.0.11:22'),
        why: NAME('ssh works'),
        notUsed: [],
        notRead: [NAME('ipvsadm')],
      },
    ],
    [
      'node-b',
      {
        transport: 'ssh',
        address: 'root@10.200.0.12:22',
        why: 'ssh works',
        notUsed: [{transport: 'kube-proxy', reason: NAME('no pod')}],
        notRead: [],
      },
    ],
    [NODE_C, {transport: null, address: null, why: NAME('no way in'), notUsed: [], notRead: []}],
  ])
  const probes: ProbeRun = {
    ran: true,
    settings: {vipAttempts: 3, endpointAttempts: 2, timeoutMs: 2000, concurrency: 4},
    nodes: [
      {
        node: NODE_A,
        via: NAME('an SSH port forward'),
        tallies: [
          {
            target: {
              kind: 'endpoint',
              servicePort: 'http',
              host: '10.244.1.10',
              port: 8080,
              pod: NAME('web-a1'),
              podNode: NODE_A,
            },
            attempts: 2,
            connected: 0,
            refused: 2,
            timedOut: 0,
            unreachable: 0,
          },
          {
            target: {kind: 'ClusterIP', servicePort: 'http', host: '10.96.10.10', port: 80},
            attempts: 3,
            connected: 0,
            refused: 0,
            timedOut: 0,
            unreachable: 0,
            notProbed: NAME('forwarding refused'),
          },
        ],
      },
      {node: 'node-b', via: 'an SSH port forward', error: NAME('not probed: the node hung up'), tallies: []},
    ],
    notes: [NAME('a probe note')],
  }
  const d = diagnose(cluster, observations, {
    probes,
    readVia,
    ignore: [{code: 'KPD-DNS-NO-ANSWER', reason: NAME('known'), source: NAME('.kproxy-doctor.yaml entry 1')}],
  })
  const report = buildReport(d, {explain: true, notes: [NAME('a note')]})
  return {d, report, readVia, order: [NODE_A, 'node-b', NODE_C]}
}

/** Everything a Write is given, as one string. */
function collected(run: (write: Write) => void): string {
  const chunks: string[] = []
  run((c) => chunks.push(typeof c === 'string' ? c : Buffer.from(c).toString('utf8')))
  return chunks.join('')
}

const LAYOUTS = [
  {name: 'no colour, unwrapped', chalk: new Chalk({level: 0}), width: Number.POSITIVE_INFINITY, colour: false},
  {name: 'colour, 80 columns', chalk: new Chalk({level: 1}), width: 80, colour: true},
  {name: 'no colour, 40 columns', chalk: new Chalk({level: 0}), width: 40, colour: false},
]

test('hostile text reaches the svc report in every field, and no control reaches the output in any format', () => {
  const {report, readVia, order} = hostileDiagnosis()
  const json = JSON.stringify(report)
  // The hostile text is there to be shown: node, Pod and Service names, the rule's comment, errors, reasons, notes.
  for (const needle of [
    NODE_A,
    NODE_C,
    NAME('web-a1'),
    SERVICE,
    `drop${ESCAPES}`,
    NAME('ssh: connect ECONNREFUSED'),
    NAME('a note'),
  ])
    assert.ok(json.includes(JSON.stringify(needle).slice(1, -1)), `the report holds ${JSON.stringify(needle)}`)
  assert.ok(
    report.findings.some((f) => f.evidence.some((e) => e.includes(`drop${ESCAPES}`))),
    'evidence shows the rule',
  )
  assert.match(report.summary, /^✗ /)
  for (const layout of LAYOUTS) {
    for (const quiet of [false, true]) {
      const out = collected((w) => writeServiceReport(report, {format: 'table', quiet, readVia, order}, layout, w))
      assertPrintable(out, `svc ${quiet ? '-q' : 'table'} (${layout.name})`, layout.colour, layout.width < 1000)
      if (!quiet) {
        assert.match(out, /\\x1b\]52;c;ZWNobyBvd25lZA==\\x07/, 'the OSC 52 write is shown, as its escapes')
        assert.match(out, /node-a\\x1b\[2J/)
        assert.match(out, /Walks/, 'the walks are in the output')
        assert.match(out, /Nodes read via:/)
      }
    }
    const tree = collected((w) =>
      writeServiceReport(report, {format: 'table', quiet: false, readVia, order, walks: 'tree'}, layout, w),
    )
    assertPrintable(tree, `svc --explain-format tree (${layout.name})`, layout.colour, layout.width < 1000)
    assert.match(tree, /node-a\\x1b\[2J/, 'the tree shows the hostile node name, as its escapes')
    assert.match(tree, /^[│ ]*[├└]─ [^\n]*✗/mu, 'the tree marks the break')
  }
  for (const format of ['json', 'yaml'] as const) {
    const out = collected((w) => writeServiceReport(report, {format, quiet: false, readVia, order}, LAYOUTS[0], w))
    assertPrintable(out, `svc -o ${format}`)
    const back = (format === 'json' ? JSON.parse(out) : parseYaml(out)) as Report
    assert.deepEqual(back, JSON.parse(json), `-o ${format} holds every value exactly`)
  }
})

test('hostile text in a scan: the table, JSON and JUnit (valid XML) hold no control', () => {
  const {d} = hostileDiagnosis()
  const kept = keepScannedServices(true, {}).summarise(d)
  const summary = buildScanReport(
    {
      outcomes: [
        {namespace: 'shop', name: SERVICE, type: 'NodePort', diagnosis: kept},
        {namespace: 'shop', name: NAME('skipped🚫'), type: 'ExternalName', skipped: NAME('no rules by design')},
      ],
      observations: d.context.observations,
      notes: [NAME('a scan note')],
      warnings: [],
    },
    'namespace shop',
    {severity: 'error', incomplete: false},
    {toolVersion: '0.0.0', time: '2026-01-01T00:00:00.000Z', context: null},
  )
  for (const layout of LAYOUTS)
    for (const format of ['table', 'junit'] as const) {
      const out = collected((w) =>
        writeScanReport(summary, {format, quiet: false, failOn: {severity: 'error', incomplete: true}}, layout, w),
      )
      assertPrintable(
        out,
        `scan -o ${format} (${layout.name})`,
        layout.colour && format === 'table',
        layout.width < 1000,
      )
      if (format === 'junit') {
        assert.equal(XMLValidator.validate(out), true, 'JUnit is well-formed XML')
        assert.ok(out.includes('skipped🚫'), 'a character beyond the BMP is kept: XML holds it')
      }
    }
  const out = collected((w) =>
    writeScanReport(
      summary,
      {format: 'json', quiet: false, failOn: {severity: 'error', incomplete: false}},
      LAYOUTS[0],
      w,
    ),
  )
  assertPrintable(out, 'scan -o json')
  assert.equal(JSON.parse(out).services[0].service.name, SERVICE)
})

test('hostile rule text in a trace: the walk and -o json hold no control', () => {
  // A chain's name is shown in the walk (comments are not): one with escapes and no space.
  const CHAIN = `KUBE-SVC-${ESCAPES}\x9b31m`
  const dump = [
    '*nat',
    ':PREROUTING ACCEPT [0:0]',
    ':INPUT ACCEPT [0:0]',
    ':OUTPUT ACCEPT [0:0]',
    ':POSTROUTING ACCEPT [0:0]',
    `:${CHAIN} - [0:0]`,
    `-A PREROUTING -m comment --comment "${ONE_LINE('portals')}" -j ${CHAIN}`,
    `-A ${CHAIN} -m comment --comment "${ONE_LINE('a')}" -m statistic --mode random --probability 0.50000000000 -j DNAT --to-destination 10.244.1.10:8080`,
    `-A ${CHAIN} -m comment --comment "${ONE_LINE('b')}" -j DROP`,
    'COMMIT',
    '',
  ].join('\n')
  const result = new IptablesTracer(IptablesSave.parse(new BufferSource(Buffer.from(dump))), {
    localAddresses: ['10.200.0.11'],
  }).trace({src: '10.244.2.5', dst: '10.96.10.10', proto: 'tcp', dport: 80, sport: 40000, inIface: 'cbr0'})
  assert.equal(result.verdict, 'MIXED')
  const trace = {...result, notes: [NAME('assumed')]}
  for (const layout of LAYOUTS) {
    const out = collected((w) => writeTrace(trace, {format: 'table'}, layout, w))
    assertPrintable(out, `trace (${layout.name})`, layout.colour, layout.width < 1000)
    if (layout.width > 1000) assert.match(out, /KUBE-SVC-\\x1b\[2J/)
  }
  const out = collected((w) => writeTrace(trace, {format: 'json'}, LAYOUTS[0], w))
  assertPrintable(out, 'trace -o json')
  assert.deepEqual(JSON.parse(out), JSON.parse(JSON.stringify(trace)))
})

test('the one-line error: a hostile name on the command line or from the API is one printable line', async () => {
  const name = NAME('nope')
  const r = await runCli(['svc', name, '-n', 'shop', '--snapshot', 'examples/healthy-cluster'])
  assert.equal(r.code, 2)
  assertPrintable(r.stderr, 'the error line')
  assert.equal(r.stderr.split('\n').length, 2, `one line: ${JSON.stringify(r.stderr)}`)
  assert.match(r.stderr, /^kproxy-doctor: .*nope\\x1b\[2J/)
  const json = await runCli(['svc', name, '-n', 'shop', '--snapshot', 'examples/healthy-cluster', '-o', 'json'])
  assertPrintable(json.stdout, 'the error document')
  assert.equal(json.json.kind, 'Error')
})

test('a rule of 40,000 characters (a paste) is shown cut in the walk, saying how much was left out, not wrapped for seconds', () => {
  // Found by the fuzz campaign: wrapping one such rule to 80 columns took 4 s, and the walk shows a rule several times.
  const dump = [
    '*nat',
    ':PREROUTING ACCEPT [0:0]',
    ':INPUT ACCEPT [0:0]',
    ':OUTPUT ACCEPT [0:0]',
    ':POSTROUTING ACCEPT [0:0]',
    `-A PREROUTING -p tcp -m comment --comment "${'{'.repeat(40_000)}" -j DNAT --to-destination 10.244.1.10:8080`,
    'COMMIT',
    '',
  ].join('\n')
  const result = new IptablesTracer(IptablesSave.parse(new BufferSource(Buffer.from(dump))), {
    localAddresses: ['10.200.0.11'],
  }).trace({src: '10.244.2.5', dst: '10.96.10.10', proto: 'tcp', dport: 80, sport: 40000, inIface: 'cbr0'})
  const out = collected((w) => writeTrace({...result, notes: []}, {format: 'table'}, LAYOUTS[1], w))
  assert.match(out, /\(\d+ more characters, in -o json\)/)
  assert.ok(out.length < 10_000, `${out.length} characters printed`)
  const json = collected((w) => writeTrace({...result, notes: []}, {format: 'json'}, LAYOUTS[0], w))
  assert.ok(JSON.parse(json).outcomes[0].steps[0].rule.length > 40_000, '-o json keeps the rule whole')
})

test('warnings and --verbose lines on stderr: one printable line each, whatever a node or the API said', () => {
  const lines: string[] = []
  const write = process.stderr.write
  process.stderr.write = ((chunk: string) => lines.push(chunk) > 0) as typeof process.stderr.write
  try {
    stderrLine(`warning: no node could be read: ${NODE_A}: ${NAME('ssh: connect ECONNREFUSED')}`)
    stderrLog()(`node ${NODE_A} read in 1.2 s: ${NAME('kube-proxy says')}`)
  } finally {
    process.stderr.write = write
  }
  assert.equal(lines.length, 2)
  for (const line of lines) {
    assertPrintable(line, 'a stderr line')
    assert.match(line, /^kproxy-doctor: [^\n]*\n$/)
  }
})

test('printable escapes exactly the C0 and C1 controls, DEL, U+2028, U+2029 and format characters, of every code point', () => {
  // The character set it promises, in this Node.js's Unicode: its quick search for candidates must miss none.
  const promised = /^[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]$/u
  const wrong: string[] = []
  for (let c = 0; c <= 0x10ffff; c++) {
    if (c >= 0xd800 && c <= 0xdfff) continue
    const ch = String.fromCodePoint(c)
    const text = `web→✓${ch}`
    if ((printable(text) !== text) !== promised.test(ch)) wrong.push(c.toString(16))
  }
  assert.deepEqual(wrong, [])
})
