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
