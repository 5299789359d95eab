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
import {readNodeBundle} from '../../src/node/bundle.js'
import {buildCommandLine, compressedCommandLine, type CommandLine} from '../../src/node/node-commands.js'

const why = labGuard()

const CLUSTER_IP = '10.96.10.10'
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
    // The lab's nodes have gzip; node-a's SSH config says Compression yes: its dumps come compressed.
    const gzQuery = (l: CommandLine) => (nodeName === 'node-a' ? compressedCommandLine(l) : l)
    const gz = (key: Parameters<typeof buildCommandLine>[0]) => gzQuery(line(key as 'uid', true))
    const savesNft = (save: string) => /\(nf_tables\)/.test(tryRun('ip', ['netns', 'exec', ns, save]).stdout.split('\n')[0])
    return [
      line('uid', true),
      ...(nodeName === 'node-a' ? [line('hasGzip', true)] : []),
      gz('iptablesSave'),
      gz('ip6tablesSave'),
      // kube-proxy (the lab's stand-in) reports iptables mode: only its own nft tables are listed, never the ruleset.
      ...((lab.modes.get(nodeName) ?? 'iptables') === 'iptables'
        ? (['ip', 'ip6'] as const).map((family) => gzQuery(line('nftKubeProxyTable', true, {family, json: true})))
        : [gz('nftRulesetJson'), ...(nftJson.code === 0 && nftJson.stdout.trimStart().startsWith('{') ? [] : [gz('nftRuleset')])]),
      gz('iptablesLegacySave'),
      // The lab's saves name their backend in their header (nf_tables): that backend's save is not read again.
      ...(savesNft('iptables-save') ? [] : [gz('iptablesNftSave')]),
      gz('ip6tablesLegacySave'),
      ...(savesNft('ip6tables-save') ? [] : [gz('ip6tablesNftSave')]),
      gz('ipvsadm'),
      ...(ipvs.code === 0 ? [gz('ipsetSave'), line('kubeIpvs0', true), line('sysctls', true)] : []),
      line('network', true),
      line('cniResults', true),
      line('routeTable', true),
      ...ENDPOINTS.map((address) => line('routeGet', true, {address})),
      line('pathSysctls', true, {interfaces: ['cbr0', 'eth0']}),
      line('conntrackList', true, {protocol: 'tcp', address: CLUSTER_IP}),
    ].sort()
  }

  test('choke point: the lab sshd logs every command a `svc` run sends, and it is exactly the allow-listed set', async () => {
    lab.clearCommandLogs()
    const r = await runCli(['svc', 'web', '-n', 'shop', '--kubeconfig', lab.kubeconfigPath, '--ssh-config', lab.sshConfigPath, '-o', 'json'])
    assert.equal(r.code, 0, r.stdout + r.stderr)
    for (const node of ['node-a', 'node-b']) assert.deepEqual([...lab.commandLog(node)].sort(), expectedCommands(node), `commands sent to ${node}`)
  })

  test('--verbose: stderr names every API request, every node command with its transport and duration, each mode decision; stdout stays one JSON document', async () => {
    lab.clearCommandLogs()
    const r = await runCli(['svc', 'web', '-n', 'shop', '--kubeconfig', lab.kubeconfigPath, '--ssh-config', lab.sshConfigPath, '-o', 'json', '--verbose'])
    assert.equal(r.code, 0, r.stdout + r.stderr)
    assert.equal(JSON.parse(r.stdout).kind, 'ServiceReport')
    const lines = r.stderr.split('\n').filter((l) => l.startsWith('kproxy-doctor: +'))
    for (const request of ['API get services -n shop', 'API list endpointslices.discovery.k8s.io -n shop', 'API list pods -n shop', 'API list nodes'])
      assert.ok(
        lines.some((l) => new RegExp(`\\+\\d+\\.\\d\\ds ${request.replaceAll('.', '\\.')} → ok in \\d+\\.\\d\\ds$`).test(l)),
        `${request} in:\n${r.stderr}`,
      )
    for (const node of ['node-a', 'node-b']) {
      const runs = lines.filter((l) => l.includes(` ${node} [ssh `) && / run [a-zA-Z]+/.test(l))
      // `uid` is the SSH session's own question at login (is sudo needed?), not a read of the node.
      assert.equal(
        runs.length,
        lab.commandLog(node).filter((c) => c !== buildCommandLine('uid', true) && c !== buildCommandLine('hasGzip', true)).length,
        `one verbose line per command sshd received on ${node}:\n${runs.join('\n')}`,
      )
      for (const l of runs) assert.match(l, / → exit \d+, \d+ (B|KiB) in \d+\.\d\ds$/)
      assert.ok(
        lines.some((l) => l.includes(`${node}: proxy mode iptables (${JSON.parse(r.stdout).nodes.find((n: {name: string}) => n.name === node).modeSource})`)),
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
      assert.equal(lab.connect(lab.podNs('client-a'), '10.244.2.10', 8080, 1), '', 'the unreachable route really breaks traffic to node-b pods')
      const out = join(dir, 'bundle')
      const c = await runCli(['collect', 'svc', 'web', '-n', 'shop', '--kubeconfig', lab.kubeconfigPath, '--ssh-config', lab.sshConfigPath, '--out', out])
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
        (obs.path?.routeLookups ?? []).map((l) => [l.address, l.result.status !== 'read' ? l.result.status : l.result.value.kind === 'route' ? `dev ${l.result.value.route.dev}` : l.result.value.type])
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
      assert.equal(a.path?.routeTable?.status === 'read' && a.path.routeTable.value.find((r) => r.destination === '10.244.2.0/24')?.type, 'unreachable')
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
})
