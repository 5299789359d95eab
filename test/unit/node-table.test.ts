/**
 * Issue #26 item 8: the per-node table never breaks. A node that was not read is one row, its name then one cell
 * across the other columns with the reason said once; every line of the table has the same width; no stray rule.
 */
import assert from 'node:assert/strict'
import {test} from 'node:test'
import {Chalk} from 'chalk'
import stringWidth from 'string-width'
import type {NodeReadVia} from '../../src/diagnosis/choose-transport.js'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {PROBES_OFF} from '../../src/diagnosis/probe-stage.js'
import type {NodeObservation} from '../../src/node/observation.js'
import {withReadVia} from '../../src/report/document.js'
import {writeServiceReport} from '../../src/report/output.js'
import {buildReport} from '../../src/report/report.js'
import {offlineCluster} from '../helpers/offline-cluster.js'

const LONG = 'SSH to 10.0.0.2:22 failed: connect ECONNREFUSED 10.0.0.2:22 after 3 attempts through bastion jump-1'

/** node-a read; the unread node (SSH refused) placed first or last; node-c left API-only by --via none. */
function render(width: number, unreadFirst: boolean, reason = 'ssh: connect ECONNREFUSED 10.0.0.2:22'): string {
  const base = offlineCluster({})
  const nodeA = base.observations.find((o) => o.name === 'node-a')!
  const unread: NodeObservation = {name: 'node-b', reachable: false, error: reason}
  const ssh = (n: string): NodeReadVia => ({
    transport: 'ssh',
    address: `root@${n}:22`,
    why: 'ssh',
    notUsed: [],
    notRead: [],
  })
  const readVia = new Map<string, NodeReadVia>([
    ['node-a', ssh('node-a')],
    ['node-b', ssh('node-b')],
    ['node-c', {transport: null, address: null, why: 'API-only (--via none)', notUsed: [], notRead: []}],
  ])
  const d = diagnose(base.cluster, [nodeA, unread], {probes: PROBES_OFF, readVia})
  const order = unreadFirst ? ['node-b', 'node-a', 'node-c'] : ['node-a', 'node-c', 'node-b']
  const report = withReadVia(buildReport(d, {meta: {toolVersion: '0', time: 't', context: null}}), readVia, order)
  let out = ''
  writeServiceReport(
    report,
    {format: 'table', quiet: false, readVia, order},
    {chalk: new Chalk({level: 0}), width},
    (chunk) => (out += chunk),
  )
  return out
}

/** The lines of the node table: from its top border to its bottom one. */
function nodeTable(out: string): string[] {
  const lines = out.split('\n')
  const top = lines.findIndex((l) => l.startsWith('┌') && lines[lines.indexOf(l) + 1]?.includes('│ node '))
  assert.ok(top >= 0, `no node table in:\n${out}`)
  const bottom = lines.findIndex((l, i) => i > top && l.startsWith('└'))
  return lines.slice(top, bottom + 1)
}

for (const unreadFirst of [false, true])
  test(`an unread node ${unreadFirst ? 'first' : 'last'}: one row with the reason once, every line as wide`, () => {
    const out = render(200, unreadFirst)
    const table = nodeTable(out)
    assert.equal(new Set(table.map((l) => stringWidth(l))).size, 1, `lines of unequal width:\n${table.join('\n')}`)
    for (const l of table) assert.match(l, /^[┌├└│]/, `a line that is no row nor border: ${JSON.stringify(l)}`)
    // No rule between rows: the heading, then one line per node.
    assert.deepEqual(
      table.slice(1, -1).map((l) => l.match(/^│ (\S+)/)?.[1]),
      ['node', ...(unreadFirst ? ['node-b', 'node-a', 'node-c'] : ['node-a', 'node-c', 'node-b'])],
    )
    const rowB = table.filter((l) => l.includes('node-b'))
    assert.deepEqual(
      rowB.map((l) => l.replace(/ +│$/, ' │')),
      ['│ node-b │ not read: ssh: connect ECONNREFUSED 10.0.0.2:22 │'],
    )
    assert.deepEqual(
      table.filter((l) => l.includes('node-c')).map((l) => l.replace(/ +│$/, ' │')),
      ['│ node-c │ not read: API-only (--via none) │'],
    )
    assert.doesNotMatch(out, /not read: not read/)
    assert.match(
      table.find((l) => l.includes('node-a'))!,
      /^│ node-a │ iptables │ /,
    )
  })

test('a long reason wraps inside its row when the table would otherwise not fit the width', () => {
  const out = render(100, false, LONG)
  const table = nodeTable(out)
  assert.equal(new Set(table.map((l) => stringWidth(l))).size, 1, table.join('\n'))
  assert.ok(stringWidth(table[0]) <= 100, table.join('\n'))
  const rowB = table.filter((l, i) => i > 1 && (l.includes('node-b') || (!l.includes('node-') && !/^[┌├└]/.test(l))))
  assert.ok(rowB.length >= 2, `the reason is wrapped:\n${table.join('\n')}`)
  const text = rowB.map((l) => l.replace(/^│ (node-b)? +│ /, '').replace(/ +│$/, '')).join(' ')
  assert.equal(text.replace(/ +/g, ' '), `not read: ${LONG}`)
})

test('too narrow for a table: one line per node, the reason once', () => {
  const out = render(60, false)
  assert.match(out, /^node-b: not read: ssh: connect ECONNREFUSED 10\.0\.0\.2:22$/m)
  assert.match(out, /^node-c: not read: API-only \(--via none\)$/m)
  assert.doesNotMatch(out, /┴|not read: not read/)
})
