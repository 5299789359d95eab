import assert from 'node:assert/strict'
import {describe, test} from 'node:test'
import {labGuard} from '../helpers/lab-guard.js'
import {withLab} from '../helpers/lab-suite.js'
import type {CliResult} from '../helpers/run-cli.js'
import type {NetnsLab} from '../lab/netns-lab.js'
import {labSvc} from '../helpers/lab-cli.js'

/**
 * kube-proxy in nftables mode beside rules other owners write with iptables-nft (Docker's FORWARD policy, a CNI's
 * policy chain), as on most nodes: the iptables-nft tables are nftables tables whose rules nft prints as `xt`
 * expressions. Each fault is proven with real traffic first; then one finding, on the node that drops, none elsewhere.
 */
const why = labGuard()

const CLUSTER_IP = '10.96.10.10'
const WEB_B2 = '10.244.2.11'

interface JsonFinding {
  code: string
  severity: string
  node: string | null
  message: string
  evidence: string[]
}

describe('nftables mode beside iptables-nft rules (netns lab, real sshd)', {skip: why}, () => {
  let lab: NetnsLab
  withLab((l) => {
    lab = l
    lab.setMode('node-a', 'nftables')
    lab.setMode('node-b', 'nftables')
  })

  const doctor = (): Promise<CliResult> => labSvc(lab, '--proxy-mode', 'nftables', '-o', 'json')
  const findings = (r: CliResult): JsonFinding[] => r.json?.findings ?? []
  /** Every error and warning as "CODE node", sorted: the exact set, so a new false positive fails. */
  const problems = (r: CliResult) =>
    findings(r)
      .filter((f) => f.severity !== 'info')
      .map((f) => `${f.code} ${f.node ?? '-'}`)
      .sort()
  const failures = (answers: string[]) => answers.filter((a) => a === '').length

  test('healthy, both nodes in nftables mode with empty iptables-nft tables: traffic works, no finding', async () => {
    assert.equal(failures(lab.sample(lab.podNs('client-b'), CLUSTER_IP, 80, 6)), 0)
    assert.equal(failures(lab.sample(lab.podNs('client-a'), CLUSTER_IP, 80, 6)), 0)
    const r = await doctor()
    assert.equal(r.code, 0, r.stdout + r.stderr)
    assert.deepEqual(problems(r), [])
  })

  test("Docker's FORWARD policy DROP written with iptables-nft on node-b: KPD-FILTER-DROP on node-b naming the policy", async () => {
    lab.setForeignRules('node-b', {docker: true})
    try {
      assert.equal(failures(lab.sample(lab.podNs('client-b'), CLUSTER_IP, 80, 3)), 3, 'the fault really drops')
      const r = await doctor()
      assert.equal(r.code, 1, r.stdout + r.stderr)
      assert.deepEqual(problems(r), ['KPD-FILTER-DROP node-b'], JSON.stringify(findings(r).map((f) => f.message)))
      const f = findings(r).find((x) => x.code === 'KPD-FILTER-DROP')!
      assert.match(f.message, /^node-b: new connections to .* are dropped by the DROP policy of filter FORWARD/)
      // node-a's probes of node-b's pods are the symptom: evidence on the cause, not a finding of their own.
      assert.deepEqual(f.evidence, [
        "filter: :FORWARD DROP (the chain's policy)",
        ...['10.244.2.10:8080 (pod web-b1 on node-b)', '10.244.2.11:8080 (pod web-b2 on node-b)'].map(
          (endpoint) =>
            `live probe: endpoint ${endpoint} answers from node-b (3/3 connected) but not from node-a (0/3 connected (3 timed out))`,
        ),
      ])
    } finally {
      lab.setForeignRules('node-b', undefined)
    }
  })

  test('a CNI policy chain written with iptables-nft drops web-b2 on node-b: KPD-FILTER-DROP on node-b naming the chain', async () => {
    lab.setForeignRules('node-b', {policyChain: {name: 'cali-FORWARD', dropTo: [WEB_B2]}})
    try {
      // Connections balanced to web-b2 are dropped; the others get through.
      const answers = lab.sample(lab.podNs('client-b'), CLUSTER_IP, 80, 18)
      assert.ok(failures(answers) > 0 && failures(answers) < 18, `some connections drop: ${answers}`)
      const r = await doctor()
      assert.equal(r.code, 1, r.stdout + r.stderr)
      assert.deepEqual(problems(r), ['KPD-FILTER-DROP node-b'], JSON.stringify(findings(r).map((f) => f.message)))
      const f = findings(r).find((x) => x.code === 'KPD-FILTER-DROP')!
      assert.match(f.message, /10\.244\.2\.11:8080 \(web-b2\)/)
      assert.match(f.message, /filter cali-FORWARD line \d+, a Calico chain/)
    } finally {
      lab.setForeignRules('node-b', undefined)
    }
  })
})
