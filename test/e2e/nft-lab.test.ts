import assert from 'node:assert/strict'
import {describe, test} from 'node:test'
import {labGuard} from '../helpers/lab-guard.js'
import type {CliResult} from '../helpers/run-cli.js'
import type {NetnsLab} from '../lab/netns-lab.js'
import {withLab} from '../helpers/lab-suite.js'
import {linesOfBatch} from '../../src/node/node-commands.js'
import {labSvc} from '../helpers/lab-cli.js'

const why = labGuard()
const CLUSTER_IP = '10.96.10.10'
const NODE_B = '10.200.0.12'

describe('svc against a lab node in nftables mode', {skip: why}, () => {
  let lab: NetnsLab
  withLab((l) => {
    lab = l
    lab.setMode('node-b', 'nftables')
  })

  const doctor = (): Promise<CliResult> => labSvc(lab, '-o', 'json')
  const codes = (r: CliResult, node: string, severity = 'error') =>
    r.json.findings
      .filter((f: {node: string; severity: string}) => f.node === node && f.severity === severity)
      .map((f: {code: string}) => f.code)
  const path = (r: CliResult, node: string, entry: string) =>
    r.json.paths.find((p: {node: string; entry: string}) => p.node === node && p.entry === entry)
  const failures = (answers: string[]) => answers.filter((a) => a === '').length

  test('healthy nftables node: traffic works, paths ✓, mode reported, mixed-mode warning only', async () => {
    assert.equal(failures(lab.sample(lab.podNs('client-b'), CLUSTER_IP, 80, 6)), 0)
    assert.equal(failures(lab.sample(lab.ns('outside'), NODE_B, 30080, 3)), 0)
    const r = await doctor()
    assert.equal(r.code, 0, JSON.stringify(r.json?.findings))
    const b = r.json.nodes.find((n: {name: string}) => n.name === 'node-b')
    assert.deepEqual([b.mode, b.modeSource], ['nftables', "kube-proxy's /proxyMode on the node"])
    assert.ok(
      r.json.paths.filter((p: {node: string}) => p.node === 'node-b').every((p: {ok: boolean}) => p.ok === true),
      JSON.stringify(r.json.paths),
    )
    assert.ok(codes(r, 'node-b', 'warning').includes('KPD-MODE-MIXED'))
    assert.ok(codes(r, 'node-b', 'warning').includes('KPD-MODE-MISMATCH'))
  })

  test('nftables: endpoint chain without dnat, KPD-SEP-MISSING on node-b', async () => {
    lab.applyRules('node-b', {dropDnatFor: '10.244.2.11'})
    try {
      const answers = lab.sample(lab.podNs('client-b'), CLUSTER_IP, 80, 18)
      assert.ok(failures(answers) > 0, `connections sent to the hollow endpoint chain leave untranslated: ${answers}`)
      const r = await doctor()
      assert.equal(r.code, 1)
      assert.ok(codes(r, 'node-b').includes('KPD-SEP-MISSING'), JSON.stringify(r.json.findings))
      assert.match(
        r.json.findings.find((f: {code: string}) => f.code === 'KPD-SEP-MISSING').check.command,
        /nft list table ip kube-proxy/,
      )
      assert.deepEqual(codes(r, 'node-a'), [])
    } finally {
      lab.clearFaults()
    }
  })

  test('nftables: NodePort missing from service-nodeports, KPD-NODEPORT-MISSING on node-b', async () => {
    lab.applyRules('node-b', {omitNodePorts: true})
    try {
      assert.equal(failures(lab.sample(lab.ns('outside'), NODE_B, 30080, 3)), 3)
      const r = await doctor()
      assert.equal(r.code, 1)
      assert.ok(codes(r, 'node-b').includes('KPD-NODEPORT-MISSING'))
      assert.equal(path(r, 'node-b', 'outside→NodePort').breaksAt, 'nodeport-match')
    } finally {
      lab.clearFaults()
    }
  })

  test('nftables: stale endpoint and wrong DNAT port are named with their evidence', async () => {
    lab.applyRules('node-b', {
      staleEndpoint: {ip: '10.244.1.99', port: 8080},
      wrongPortFor: {ip: '10.244.1.10', port: 9999},
    })
    try {
      const answers = lab.sample(lab.podNs('client-b'), CLUSTER_IP, 80, 12)
      assert.ok(!answers.includes('web-a1') && failures(answers) > 0, String(answers))
      const r = await doctor()
      assert.equal(r.code, 1)
      assert.ok(codes(r, 'node-b').includes('KPD-SEP-STALE'))
      assert.ok(codes(r, 'node-b').includes('KPD-DNAT-WRONG'))
      assert.equal(path(r, 'node-b', 'pod→ClusterIP').breaksAt, 'DNAT')
    } finally {
      lab.clearFaults()
    }
  })

  test('nftables: masquerade missing, KPD-MASQ-MISSING on node-b', async () => {
    lab.applyRules('node-b', {omitMasquerade: true})
    try {
      const answers = lab.sample(lab.ns('outside'), NODE_B, 30080, 9)
      assert.ok(!answers.includes('web-a1'), `replies from node-a's pod cannot come back: ${answers}`)
      const r = await doctor()
      assert.equal(r.code, 1)
      assert.ok(codes(r, 'node-b').includes('KPD-MASQ-MISSING'))
      assert.equal(path(r, 'node-b', 'outside→NodePort').breaksAt, 'masquerade')
    } finally {
      lab.clearFaults()
    }
  })

  test('iptables rules left behind on the nftables node: KPD-MODE-LEFTOVER', async () => {
    lab.keepLeftovers = true
    try {
      lab.modes.set('node-b', 'iptables')
      lab.applyRules('node-b', {})
      lab.modes.set('node-b', 'nftables')
      lab.applyRules('node-b', {})
      const r = await doctor()
      const f = r.json.findings.find((x: {code: string}) => x.code === 'KPD-MODE-LEFTOVER')
      assert.equal(f?.node, 'node-b', JSON.stringify(r.json.findings))
      assert.match(f.message, /runs nftables mode but still has iptables chains nat KUBE-SERVICES/)
    } finally {
      lab.keepLeftovers = false
      lab.applyRules('node-b', {})
    }
  })

  test("nftables table left behind on a node back in iptables mode: KPD-MODE-LEFTOVER, read from kube-proxy's own table without listing the whole ruleset", async () => {
    lab.keepLeftovers = true
    try {
      lab.setMode('node-b', 'iptables')
      assert.equal(failures(lab.sample(lab.podNs('client-b'), CLUSTER_IP, 80, 6)), 0)
      lab.clearCommandLogs()
      const r = await doctor()
      assert.deepEqual(
        r.json.findings
          .filter((f: {code: string}) => f.code === 'KPD-MODE-LEFTOVER')
          .map((f: {node: string; message: string}) => [f.node, f.message]),
        [['node-b', 'node-b runs iptables mode but still has nftables table ip kube-proxy from nftables mode']],
      )
      const sent = lab.commandLog('node-b').flatMap(linesOfBatch)
      // `nft list sets` shows which kube-proxy tables there are: only the IPv4 one is listed (an absent table's listing
      // costs a second on a large iptables-nft node).
      assert.ok(
        sent.includes('nft list sets') &&
          sent.includes('nft -j list table ip kube-proxy') &&
          !sent.some((c) => c.includes('list table ip6 kube-proxy')),
        sent.join('\n'),
      )
      assert.ok(!sent.some((c) => /nft (-j )?list ruleset/.test(c)), sent.join('\n'))
    } finally {
      lab.keepLeftovers = false
      lab.setMode('node-b', 'nftables')
    }
  })
})
