import assert from 'node:assert/strict'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {describe, test} from 'node:test'
import {labGuard} from '../helpers/lab-guard.js'
import {withLab} from '../helpers/lab-suite.js'
import {runCli} from '../helpers/run-cli.js'
import type {NetnsLab} from '../lab/netns-lab.js'
import {tryRun} from '../lab/sh.js'
import {NODES} from '../fixtures/lab-cluster.js'
import {readNodeBundle} from '../../src/node/read/bundle.js'
import {
  buildCommandLine,
  isCompressible,
  linesOfBatch,
  withSbinOnPath,
  type CommandLine,
} from '../../src/node/node-commands.js'
import {NODE_READS, takesArguments, type NodeCommandKey} from '../../src/node/read/node-reads.js'
import type {IptablesTable} from '../../src/node/read/command-arguments.js'
import {labAccess, labSvc} from '../helpers/lab-cli.js'
import {uncompressed} from '../helpers/command-lines.js'

const why = labGuard()

/** A chain by chain read of the rules (`iptables --modprobe=/bin/false -w 5 -t TABLE -S 'CHAIN'; …`). */
const isChainRead = (line: string) => /^ip6?tables --modprobe=\/bin\/false -w 5 -t \w+ -S /.test(line)
/** A rule counter read (before and after the probes): one chain's rules with their counters. */
const isCounterRead = (line: string) => /^ip6?tables --modprobe=\/bin\/false -w 5 -t \w+ -v -S /.test(line)

/** The arguments a rule counter read line was built from. */
function counterRead(line: string): {family: 4 | 6; table: IptablesTable; chain: string} {
  const m = /^(ip6?tables) --modprobe=\/bin\/false -w 5 -t (\w+) -v -S '?([^' ]+)'?$/.exec(line)
  assert.ok(m, `a counter read: ${line}`)
  return {family: m[1] === 'ip6tables' ? 6 : 4, table: m[2] as IptablesTable, chain: m[3]}
}

/** The arguments a chain by chain read line was built from. */
function chainRead(line: string): {family: 4 | 6; reads: Array<{table: IptablesTable; chain: string}>} {
  const family = line.startsWith('ip6tables') ? 6 : 4
  const reads = [...line.matchAll(/ip6?tables --modprobe=\/bin\/false -w 5 -t (\w+) -S '([^']+)'/g)].map((m) => ({
    table: m[1] as IptablesTable,
    chain: m[2],
  }))
  return {family, reads}
}

const CLUSTER_IP = '10.96.10.10'
/** The cluster DNS Service: its UDP conntrack entries are read on every svc run (DNS is part of every Service's path). */
const DNS_IP = '10.96.0.10'
const ENDPOINTS = ['10.244.1.10', '10.244.2.10', '10.244.2.11']

describe('node reads against the netns lab: what is sent to the node, and what comes back', {skip: why}, () => {
  let lab: NetnsLab
  withLab((l) => (lab = l))

  /** What the doctor must send to a lab node (logged in as root: no sudo); the node's tools decide the optional ones. */
  const expectedCommands = (nodeName: string): string[] => {
    const ns = lab.nodeNs(nodeName)
    const nftJson = tryRun('ip', ['netns', 'exec', ns, 'nft', '-j', 'list', 'ruleset'])
    const ipvs = tryRun('ip', ['netns', 'exec', ns, 'ipvsadm', '-Sn'])
    const line = buildCommandLine
    // The lab's nodes have gzip; node-a's SSH config says Compression yes: its dumps come compressed (checked on the
    // execs: compressedDumps), each alone or in the batch of its round.
    const gz = (key: Parameters<typeof buildCommandLine>[0]) => line(key as 'uid', true)
    // The chain by chain read asks `iptables -V` (`ip6tables -V`): the backend it names is not read a second time.
    const nftBackend = (tool: string) => /\(nf_tables\)/.test(tryRun('ip', ['netns', 'exec', ns, tool, '-V']).stdout)
    return [
      line('uid', true),
      ...(nodeName === 'node-a' ? [line('hasGzip', true)] : []),
      // The rules are read chain by chain (as root, iptables-nft 1.8.7 or later, which -V says): the chain reads are
      // checked on their own (chainRead).
      line('iptablesVersion', true),
      line('ip6tablesVersion', true),
      // Asked again by the probes' rule counters (the backend says how they are read: chain by chain on iptables-nft).
      line('iptablesVersion', true),
      // kube-proxy (the lab's stand-in) reports iptables mode: nft is asked which tables it has, and the lab's nodes
      // have no kube-proxy table, so none is listed, nor the ruleset.
      ...((lab.modes.get(nodeName) ?? 'iptables') === 'iptables'
        ? [line('nftSets', true)]
        : [
            gz('nftRulesetJson'),
            ...(nftJson.code === 0 && nftJson.stdout.trimStart().startsWith('{') ? [] : [gz('nftRuleset')]),
          ]),
      ...(nftBackend('iptables') ? [gz('iptablesLegacySave')] : [gz('iptablesNftSave')]),
      ...(nftBackend('ip6tables') ? [gz('ip6tablesLegacySave')] : [gz('ip6tablesNftSave')]),
      gz('ipvsadm'),
      ...(ipvs.code === 0 ? [gz('ipsetSave'), line('kubeIpvs0', true), line('sysctls', true)] : []),
      line('network', true),
      line('cniResults', true),
      line('routeTable', true),
      ...ENDPOINTS.map((address) => line('routeGet', true, {address})),
      line('pathSysctls', true, {interfaces: ['cbr0', 'eth0']}),
      line('conntrackList', true, {protocol: 'tcp', address: CLUSTER_IP}),
      line('conntrackList', true, {protocol: 'udp', address: DNS_IP}),
      // The kernel's evidence for the node's probes of the Service's addresses (ClusterIP, its own NodePort).
      line('conntrackProbe', true, {address: CLUSTER_IP, port: 80}),
      line('conntrackProbe', true, {address: NODES.find((n) => n.name === nodeName)!.ip, port: 30080}),
    ].sort()
  }

  const isDump = (l: string) =>
    (Object.keys(NODE_READS) as NodeCommandKey[]).some(
      (key) => isCompressible(key) && !takesArguments(NODE_READS[key]) && l === buildCommandLine(key as 'uid', true),
    ) || /^nft (-j )?list table /.test(l)

  test('choke point: the lab sshd logs every command a `svc` run sends, and it is exactly the allow-listed set', async () => {
    lab.clearCommandLogs()
    const r = await labSvc(lab, '-o', 'json')
    assert.equal(r.code, 0, r.stdout + r.stderr)
    for (const node of ['node-a', 'node-b']) {
      // Reads asked for at once arrive as one batch (one exec): each is checked as the line it is made of.
      const received = lab.commandLog(node)
      // Every exec first puts the sbin folders after the login's PATH (a Debian login has none).
      const prefix = withSbinOnPath('' as CommandLine)
      for (const exec of received) assert.ok(exec.startsWith(prefix), `${node}: ${exec.slice(0, 200)}`)
      const log = received.flatMap(linesOfBatch).map(uncompressed)
      // Compression yes (node-a): every exec with a dump in it sends its stdout through gzip.
      const dumps = received.filter((exec) => linesOfBatch(exec).map(uncompressed).some(isDump))
      assert.ok(dumps.length > 0)
      for (const exec of dumps)
        assert.equal(exec.endsWith(' | gzip -1'), node === 'node-a', `${node} ${exec.slice(0, 200)}`)
      assert.ok(
        received.length < log.length,
        `reads batched on ${node}: ${received.length} execs for ${log.length} reads`,
      )
      assert.deepEqual(
        log.filter((c) => !isChainRead(c) && !isCounterRead(c)).sort(),
        expectedCommands(node),
        `commands sent to ${node}`,
      )
      // The rule counters of the Service's nat chains, read before and after the node's probes.
      const counters = log.filter(isCounterRead)
      for (const c of counters) assert.equal(buildCommandLine('ruleCounters', true, counterRead(c)), c)
      const counted = counters.map((c) => counterRead(c)).filter((r) => r.family === 4)
      for (const chain of ['KUBE-SERVICES', 'KUBE-NODEPORTS'])
        assert.equal(
          counted.filter((r) => r.table === 'nat' && r.chain === chain).length,
          2,
          `${chain}'s counters read before and after the probes on ${node}`,
        )
      const reads = log.filter(isChainRead).map(chainRead)
      // Every line is exactly what the allow-list builds from its reads.
      for (const family of [4, 6] as const)
        assert.ok(
          reads.some((r) => r.family === family),
          `family ${family} read chain by chain on ${node}`,
        )
      for (const [i, r] of reads.entries())
        assert.equal(buildCommandLine('iptablesChains', true, r), log.filter(isChainRead)[i])
      const nat4 = reads
        .filter((r) => r.family === 4)
        .flatMap((r) => r.reads.filter((x) => x.table === 'nat').map((x) => x.chain))
      for (const chain of [
        'PREROUTING',
        'OUTPUT',
        'POSTROUTING',
        'KUBE-SERVICES',
        'KUBE-POSTROUTING',
        'KUBE-MARK-MASQ',
      ])
        assert.ok(nat4.includes(chain), `${chain} read on ${node}: ${nat4.join(' ')}`)
      assert.ok(
        nat4.some((c) => c.startsWith('KUBE-SEP-')) && nat4.some((c) => c.startsWith('KUBE-SVC-')),
        `web's own chains read on ${node}: ${nat4.join(' ')}`,
      )
    }
  })

  test('--verbose: stderr names every API request, every node command with its transport and duration, each mode decision; stdout stays one JSON document', async () => {
    lab.clearCommandLogs()
    const r = await labSvc(lab, '-o', 'json', '--verbose')
    assert.equal(r.code, 0, r.stdout + r.stderr)
    assert.equal(JSON.parse(r.stdout).kind, 'ServiceReport')
    const lines = r.stderr.split('\n').filter((l) => l.startsWith('kproxy-doctor: +'))
    for (const request of [
      'API get services -n shop',
      'API list endpointslices.discovery.k8s.io -n shop',
      'API list pods -n shop',
      'API list nodes',
    ])
      assert.ok(
        lines.some((l) =>
          new RegExp(`\\+\\d+\\.\\d\\ds ${request.replaceAll('.', '\\.')} → ok in \\d+\\.\\d\\ds$`).test(l),
        ),
        `${request} in:\n${r.stderr}`,
      )
    for (const node of ['node-a', 'node-b']) {
      const runs = lines.filter((l) => l.includes(` ${node} [ssh `) && / run [a-zA-Z]+/.test(l))
      // `uid` is the SSH session's own question at login (is sudo needed?), not a read of the node.
      assert.equal(
        runs.length,
        lab
          .commandLog(node)
          .flatMap(linesOfBatch)
          .filter((c) => c !== buildCommandLine('uid', true) && c !== buildCommandLine('hasGzip', true)).length,
        `one verbose line per command sshd received (batches split) on ${node}:\n${runs.join('\n')}`,
      )
      for (const l of runs) assert.match(l, / → exit \d+, \d+ (B|KiB) in \d+\.\d\ds$/)
      assert.ok(
        lines.some((l) =>
          l.includes(
            `${node}: proxy mode iptables (${JSON.parse(r.stdout).nodes.find((n: {name: string}) => n.name === node).modeSource})`,
          ),
        ),
        r.stderr,
      )
      assert.ok(
        lines.some((l) => l.includes(` ${node} [ssh `) && l.includes(` tcp ${CLUSTER_IP}:80 → open in `)),
        `the ClusterIP probe from ${node}:\n${r.stderr}`,
      )
    }
  })

  test('collect records the path reads; real traffic leaves conntrack entries DNATed to the endpoints; an unreachable route is read as such', async () => {
    const answers = lab.sample(lab.podNs('client-a'), CLUSTER_IP, 80, 4)
    assert.ok(
      answers.every((a) => a !== ''),
      `healthy lab answers: ${answers}`,
    )
    lab.breakPodRoute('node-a', 'node-b', 'unreachable')
    const dir = mkdtempSync(join(tmpdir(), 'kpd-reads-'))
    try {
      assert.equal(
        lab.connect(lab.podNs('client-a'), '10.244.2.10', 8080, 1),
        '',
        'the unreachable route really breaks traffic to node-b pods',
      )
      const out = join(dir, 'bundle')
      const c = await runCli(['collect', 'svc', 'web', '-n', 'shop', ...labAccess(lab), '--out', out])
      assert.equal(c.code, 0, c.stdout + c.stderr)
      const a = readNodeBundle(join(out, 'nodes', 'node-a'), 'node-a')
      const b = readNodeBundle(join(out, 'nodes', 'node-b'), 'node-b')
      const sysctls = a.path?.sysctls?.status === 'read' ? a.path.sysctls.value : undefined
      assert.equal(sysctls?.values.get('net.ipv4.ip_forward'), '1')
      assert.equal(sysctls?.values.has('net.ipv4.conf.cbr0.rp_filter'), true)
      // rp_filter and route_localnet are read for the interfaces the endpoint routes use: node-a's remote routes fail now.
      assert.equal(sysctls?.values.has('net.ipv4.conf.eth0.route_localnet'), false)
      const sysctlsB = b.path?.sysctls?.status === 'read' ? b.path.sysctls.value : undefined
      assert.deepEqual(
        ['cbr0', 'eth0'].map((dev) => sysctlsB?.values.has(`net.ipv4.conf.${dev}.route_localnet`)),
        [true, true],
      )
      const route = (obs: typeof a) =>
        (obs.path?.routeLookups ?? []).map((l) => [
          l.address,
          l.result.status !== 'read'
            ? l.result.status
            : l.result.value.kind === 'route'
              ? `dev ${l.result.value.route.dev}`
              : l.result.value.type,
        ])
      assert.deepEqual(route(a), [
        ['10.244.1.10', 'dev cbr0'],
        ['10.244.2.10', 'unreachable'],
        ['10.244.2.11', 'unreachable'],
      ])
      assert.deepEqual(route(b), [
        ['10.244.1.10', 'dev eth0'],
        ['10.244.2.10', 'dev cbr0'],
        ['10.244.2.11', 'dev cbr0'],
      ])
      assert.equal(
        a.path?.routeTable?.status === 'read' &&
          a.path.routeTable.value.find((r) => r.destination === '10.244.2.0/24')?.type,
        'unreachable',
      )
      const tcp = a.path?.conntrack.find((c) => c.protocol === 'tcp' && c.address === CLUSTER_IP)
      assert.equal(tcp?.result.status, 'read')
      const targets = tcp?.result.status === 'read' ? tcp.result.value.map((e) => e.dnatTarget?.address) : []
      assert.ok(targets.length >= 1, 'the sampled connections are in node-a conntrack')
      assert.ok(
        targets.every((t) => t !== undefined && ENDPOINTS.includes(t)),
        `DNATed to endpoints: ${targets}`,
      )
    } finally {
      lab.restorePodRoute('node-a', 'node-b')
      rmSync(dir, {recursive: true, force: true})
    }
  })
  test('rules read chain by chain give the same diagnosis as the whole dump, fault by fault (only "line N" and the note differ)', async () => {
    const faults: Array<[string, () => void]> = [
      ['healthy', () => undefined],
      ['SEP DNAT deleted on node-b', () => lab.applyRules('node-b', {dropDnatFor: '10.244.1.10'})],
      ['stale endpoint on node-a', () => lab.applyRules('node-a', {staleEndpoint: {ip: '10.244.2.99', port: 8080}})],
      ['ClusterIP missing from KUBE-SERVICES on node-b', () => lab.applyRules('node-b', {omitClusterIp: true})],
      ['NodePorts missing on node-a', () => lab.applyRules('node-a', {omitNodePorts: true})],
      ['PREROUTING unhooked on node-b', () => lab.applyRules('node-b', {unhookPrerouting: true})],
      ['MASQUERADE missing on node-a', () => lab.applyRules('node-a', {omitMasquerade: true})],
      ['wrong DNAT port on node-b', () => lab.applyRules('node-b', {wrongPortFor: {ip: '10.244.2.10', port: 9999}})],
      [
        'a policy engine drops web-b1 on node-b',
        () => lab.setForeignRules('node-b', {docker: true, policyChain: {name: 'POLICY-FWD', dropTo: ['10.244.2.10']}}),
      ],
    ]
    const comparable = (stdout: string) => {
      const j = JSON.parse(stdout)
      delete j.meta?.time
      delete j.time
      j.notes = j.notes.filter((n: string) => !n.startsWith('rules read chain by chain'))
      return JSON.parse(JSON.stringify(j).replace(/ line \d+/g, ' line N'))
    }
    for (const [what, apply] of faults) {
      apply()
      try {
        const args = ['svc', 'web', '-n', 'shop', ...labAccess(lab), '-o', 'json', '--no-probe']
        const scoped = await runCli(args)
        const whole = await runCli([...args, '--all-rules'])
        assert.ok(
          JSON.parse(scoped.stdout).notes.some((n: string) => /^rules read chain by chain on node-a, node-b: /.test(n)),
          `${what}: the report says how the rules were read`,
        )
        assert.equal(scoped.code, whole.code, what)
        assert.deepEqual(comparable(scoped.stdout), comparable(whole.stdout), what)
      } finally {
        lab.clearFaults()
        lab.setForeignRules('node-b', undefined)
      }
    }
  })
})
