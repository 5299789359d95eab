/**
 * svc --watch's change lines: what two diagnoses of the same Service differ in, as the user reads it. The reports are
 * the bundled examples' (a healthy cluster, then the one whose node-b kept a stale endpoint), and copies of them with
 * a node that could not be read.
 */
import assert from 'node:assert/strict'
import {test} from 'node:test'
import {Chalk} from 'chalk'
import type {Report} from '../../src/report/report.js'
import {clockOf, renderChangeLines, reportChanges} from '../../src/report/watch-changes.js'
import {writeWatchReport} from '../../src/report/output.js'
import {runCli} from '../helpers/run-cli.js'

async function example(name: string): Promise<Report> {
  return (await runCli(['svc', 'web', '-n', 'shop', '--snapshot', `examples/${name}`, '-o', 'json'])).json as Report
}

const lines = (prev: Report, next: Report) =>
  renderChangeLines(reportChanges(prev, next), '14:02:11', next.service, new Chalk({level: 0}))

/** The report as it is when `node` could not be read: no paths or findings of its own. */
function unread(r: Report, node: string, error: string): Report {
  const copy = structuredClone(r)
  copy.nodes = copy.nodes.map((n) => (n.name === node ? {...n, reachable: false, error, mode: null} : n))
  copy.paths = copy.paths.filter((p) => p.node !== node)
  copy.findings = copy.findings.filter((f) => f.node !== node)
  return copy
}

const DNAT =
  '33.3% of new connections DNAT to 10.244.2.7:8080 (via KUBE-SEP-DYSIX5QMVXZZP7LU), which is not a ready endpoint'

test('change lines: the same report twice says nothing; healthy → broken and back, per node and entry point, findings by code', async () => {
  const healthy = await example('healthy-cluster')
  const broken = await example('broken-cluster')
  assert.deepEqual(reportChanges(broken, structuredClone(broken)), [])
  const table: Array<[string, Report, Report, string[]]> = [
    [
      'healthy → broken',
      healthy,
      broken,
      [
        `14:02:11 shop/web: verdict ok → failing (✗ shop/web: pod→ClusterIP (http) breaks at DNAT on node-b: ${DNAT})`,
        '14:02:11 node-a: pod→itself ✓ → ✗ bridge/hairpin (when web-a1 is chosen (33.3%), the reply must go back out vweb-a1 on cbr0, whose hairpin_mode is 0)',
        '14:02:11 node-a: + KPD-HAIRPIN-OFF: pod web-a1 sits on cbr0 port vweb-a1 with hairpin_mode 0 (bridge not promiscuous): it cannot reach itself through the Service',
        `14:02:11 node-b: pod→ClusterIP ✓ → ✗ DNAT (${DNAT})`,
        `14:02:11 node-b: node→ClusterIP ✓ → ✗ DNAT (${DNAT})`,
        `14:02:11 node-b: outside→NodePort ✓ → ✗ DNAT (${DNAT})`,
        `14:02:11 node-b: pod→itself ✓ → ✗ DNAT (${DNAT})`,
        '14:02:11 node-b: + KPD-SEP-MISSING: endpoint 10.244.2.11:8080 (pod web-b2 on node-b) of shop/web:http is missing from KUBE-SVC-67NZLRHBNDSAWJRO',
        '14:02:11 node-b: + KPD-SEP-STALE: KUBE-SVC-67NZLRHBNDSAWJRO sends the remaining traffic to 10.244.2.7:8080, in no EndpointSlice and owned by no Pod in shop',
        '14:02:11 node-b: + KPD-NODE-DIVERGES: node-b sends shop/web:http to {10.244.1.10:8080, 10.244.2.10:8080, 10.244.2.7:8080} while 1 other node(s) (node-a) send it to {10.244.1.10:8080, 10.244.2.10:8080, 10.244.2.11:8080}',
      ],
    ],
    [
      'broken → healthy',
      broken,
      healthy,
      [
        '14:02:11 shop/web: verdict failing → ok (✓ shop/web: every traced path works on 2 node(s))',
        '14:02:11 node-a: pod→itself ✗ bridge/hairpin → ✓',
        '14:02:11 node-a: - KPD-HAIRPIN-OFF',
        '14:02:11 node-b: pod→ClusterIP ✗ DNAT → ✓',
        '14:02:11 node-b: node→ClusterIP ✗ DNAT → ✓',
        '14:02:11 node-b: outside→NodePort ✗ DNAT → ✓',
        '14:02:11 node-b: pod→itself ✗ DNAT → ✓',
        '14:02:11 node-b: - KPD-SEP-MISSING',
        '14:02:11 node-b: - KPD-SEP-STALE',
        '14:02:11 node-b: - KPD-NODE-DIVERGES',
      ],
    ],
    [
      'a node no longer read: one line for it, its paths not compared',
      healthy,
      unread(healthy, 'node-b', 'ssh: connect timed out'),
      ['14:02:11 node-b: read → not read (ssh: connect timed out)'],
    ],
    [
      'read again: the node, then each entry point from "not read"',
      unread(healthy, 'node-b', 'ssh: connect timed out'),
      broken,
      [
        `14:02:11 shop/web: verdict ok → failing (✗ shop/web: pod→ClusterIP (http) breaks at DNAT on node-b: ${DNAT})`,
        '14:02:11 node-a: pod→itself ✓ → ✗ bridge/hairpin (when web-a1 is chosen (33.3%), the reply must go back out vweb-a1 on cbr0, whose hairpin_mode is 0)',
        '14:02:11 node-a: + KPD-HAIRPIN-OFF: pod web-a1 sits on cbr0 port vweb-a1 with hairpin_mode 0 (bridge not promiscuous): it cannot reach itself through the Service',
        '14:02:11 node-b: not read → read',
        `14:02:11 node-b: pod→ClusterIP not read → ✗ DNAT (${DNAT})`,
        `14:02:11 node-b: node→ClusterIP not read → ✗ DNAT (${DNAT})`,
        `14:02:11 node-b: outside→NodePort not read → ✗ DNAT (${DNAT})`,
        `14:02:11 node-b: pod→itself not read → ✗ DNAT (${DNAT})`,
        '14:02:11 node-b: + KPD-SEP-MISSING: endpoint 10.244.2.11:8080 (pod web-b2 on node-b) of shop/web:http is missing from KUBE-SVC-67NZLRHBNDSAWJRO',
        '14:02:11 node-b: + KPD-SEP-STALE: KUBE-SVC-67NZLRHBNDSAWJRO sends the remaining traffic to 10.244.2.7:8080, in no EndpointSlice and owned by no Pod in shop',
        '14:02:11 node-b: + KPD-NODE-DIVERGES: node-b sends shop/web:http to {10.244.1.10:8080, 10.244.2.10:8080, 10.244.2.7:8080} while 1 other node(s) (node-a) send it to {10.244.1.10:8080, 10.244.2.10:8080, 10.244.2.11:8080}',
      ],
    ],
  ]
  for (const [name, prev, next, expected] of table) assert.deepEqual(lines(prev, next), expected, name)
})

test('change lines: the clock is the UTC time of day', () => {
  assert.equal(clockOf(new Date('2026-11-27T14:02:11.950Z')), '14:02:11')
})

/** What `svc --watch --explain [--explain-format F]` prints for the change from `prev` to `next`, without the clock. */
function explainedChange(prev: Report, next: Report, walks: 'text' | 'tree'): string[] {
  let out = ''
  writeWatchReport(
    prev,
    next,
    {format: 'table', quiet: false, order: [], walks},
    {chalk: new Chalk({level: 0}), width: 100},
    (s) => {
      out += String(s)
    },
  )
  return out.split('\n').map((l) => l.replace(/^\d\d:\d\d:\d\d /, ''))
}

async function explained(name: string): Promise<Report> {
  return (await runCli(['svc', 'web', '-n', 'shop', '--snapshot', `examples/${name}`, '-o', 'json', '--explain']))
    .json as Report
}

test("--watch --explain: after a change's lines, the walks of only the paths whose state changed, in the --explain-format asked", async () => {
  const healthy = await explained('healthy-cluster')
  const broken = await explained('broken-cluster')
  const changeLines = 10
  const text = explainedChange(healthy, broken, 'text')
  assert.deepEqual(
    text.slice(0, changeLines),
    lines(healthy, broken).map((l) => l.replace(/^14:02:11 /, '')),
  )
  // node-a's other entry points still work: only its pod→itself is walked; node-b's four share the breaking step.
  assert.deepEqual(text.slice(changeLines), [
    '',
    'Walks (short rules; the full ones: -o json --explain)',
    'node-a pod→itself (http): ✗ bridge/hairpin: when web-a1 is chosen (33.3%), the reply must go',
    '    back out vweb-a1 on cbr0, whose hairpin_mode is 0',
    '',
    'node-b pod→ClusterIP, node→ClusterIP, outside→NodePort, pod→itself (http): ✗ DNAT at one step',
    '    (the walk of pod→ClusterIP shown)',
    '  1   nat/PREROUTING:46 → KUBE-SERVICES:66 -d 10.96.10.10/32 -p tcp --dport 80 →',
    '        KUBE-SVC-67NZLRHBNDSAWJRO',
    '  2a  33.3% :71 → KUBE-SEP-FZQ6KZLGXRSKN2AD:63 → DNAT 10.244.1.10:8080',
    '  2b  33.3% :72 → KUBE-SEP-F45V6TZZSXLO3WFM:61 → DNAT 10.244.2.10:8080',
    '✗ 2c  33.3% :73 → KUBE-SEP-DYSIX5QMVXZZP7LU:59 → DNAT 10.244.2.7:8080 ✗ not a ready endpoint',
    '  3   filter/FORWARD:15 → KUBE-PROXY-FIREWALL; :16 → KUBE-FORWARD; :17 → KUBE-SERVICES; :18 →',
    '        KUBE-EXTERNAL-SERVICES',
    '  4   nat/POSTROUTING:48 → KUBE-POSTROUTING:53 ! --mark 0x4000/0x4000 → RETURN',
    "  ⇒   all DNAT to their branch's destination",
    '',
  ])
  // Back to healthy: the flat walks show only what does not work, so nothing follows the lines.
  assert.deepEqual(explainedChange(broken, healthy, 'text').slice(changeLines), [''])
  // The tree: each changed path under its node, ✓ or ✗ (its rules below it are the tree --explain-format tree draws).
  const outline = (ls: string[]) => ls.filter((l) => /^(node-\w \(|├─ |└─ |Walks)/.test(l))
  assert.deepEqual(outline(explainedChange(healthy, broken, 'tree')), [
    'Walks (short rules; the full ones: -o json --explain)',
    'node-a (iptables)',
    '└─ ✗ pod→itself 10.96.10.10:80 (http): breaks at bridge/hairpin',
    'node-b (iptables)',
    '├─ ✗ pod→ClusterIP 10.96.10.10:80 (http): breaks at DNAT',
    '├─ ✗ node→ClusterIP 10.96.10.10:80 (http): breaks at DNAT',
    '├─ ✗ outside→NodePort 10.200.0.12:30080 (http): breaks at DNAT',
    '└─ ✗ pod→itself 10.96.10.10:80 (http): breaks at DNAT',
  ])
  assert.deepEqual(outline(explainedChange(broken, healthy, 'tree')), [
    'Walks (short rules; the full ones: -o json --explain)',
    'node-a (iptables)',
    '└─ ✓ pod→itself 10.96.10.10:80 (http): reaches 3 endpoint(s): 10.244.1.10:8080, 10.244.2.10:8080,',
    'node-b (iptables)',
    '├─ ✓ pod→ClusterIP 10.96.10.10:80 (http): reaches 3 endpoint(s): 10.244.1.10:8080,',
    '├─ ✓ node→ClusterIP 10.96.10.10:80 (http): reaches 3 endpoint(s): 10.244.1.10:8080,',
    '├─ ✓ outside→NodePort 10.200.0.12:30080 (http): reaches 3 endpoint(s): 10.244.1.10:8080,',
    '└─ ✓ pod→itself 10.96.10.10:80 (http): reaches 3 endpoint(s): 10.244.1.10:8080, 10.244.2.10:8080,',
  ])
  // Without --explain the change is its lines alone.
  let plain = ''
  writeWatchReport(
    healthy,
    broken,
    {format: 'table', quiet: false, order: []},
    {chalk: new Chalk({level: 0}), width: 100},
    (s) => {
      plain += String(s)
    },
  )
  assert.equal(plain.split('\n').length, changeLines + 1)
})
