import assert from 'node:assert/strict'
import {describe, test} from 'node:test'
import {tableChains} from '../../src/parse/chain-owner.js'
import {parseConntrackList} from '../../src/parse/conntrack.js'
import {BufferSource} from '../../src/parse/dump-source.js'
import {IptablesSave} from '../../src/parse/iptables-save.js'
import {parseRouteGet, parseRouteTable, routeGetFailure} from '../../src/parse/ip-route.js'
import {conntrackTableUsage, forwardingSettings, parseSysctl} from '../../src/parse/sysctl.js'
import {labGuard} from '../helpers/lab-guard.js'
import {withLab} from '../helpers/lab-suite.js'
import type {NetnsLab} from '../lab/netns-lab.js'
import {tryRun} from '../lab/sh.js'

/**
 * The packet-path fault switches of the lab, each proven with real traffic between the lab's namespaces: the fault
 * breaks connections, the healthy lab (before and after) does not. Each test also reads the node the way the doctor
 * will (the same commands, run in the node's namespace) and shows which read reveals the fault.
 */
const why = labGuard()

const CLUSTER_IP = '10.96.10.10'
const DNS_IP = '10.96.0.10'
const WEB_A1 = '10.244.1.10'
const WEB_B1 = '10.244.2.10'
const WEB_B2 = '10.244.2.11'
const WEB_NAME = 'web.shop.svc.cluster.local'

describe('packet-path faults in the netns lab', {skip: why}, () => {
  let lab: NetnsLab
  withLab((l) => (lab = l))

  /** A read-only command on a node, as the doctor runs it over SSH. */
  const nodeRead = (node: string, cmd: string, args: string[]) =>
    tryRun('ip', ['netns', 'exec', lab.nodeNs(node), cmd, ...args])
  const sysctl = (node: string) =>
    parseSysctl(
      nodeRead(node, 'sysctl', [
        'net.ipv4.ip_forward',
        'net.bridge.bridge-nf-call-iptables',
        'net.netfilter.nf_conntrack_count',
        'net.netfilter.nf_conntrack_max',
      ]).stdout,
    )
  const filterChains = (node: string) =>
    tableChains(
      IptablesSave.parse(new BufferSource(Buffer.from(nodeRead(node, 'iptables-save', ['-t', 'filter']).stdout))),
    )
  const conntrack = (node: string, proto: 'tcp' | 'udp', dst: string) =>
    parseConntrackList(nodeRead(node, 'conntrack', ['-L', '-p', proto, '-d', dst]).stdout)
  const direct = (fromPod: string, ip: string, port = 8080) => lab.probe(lab.podNs(fromPod), ip, port, 1).kind
  const failures = (answers: string[]) => answers.filter((a) => a === '').length

  test('healthy lab: every pod reaches every endpoint and the Service; DNS answers from any source port; node reads are clean', () => {
    for (const client of ['client-a', 'client-b'])
      for (const ip of [WEB_A1, WEB_B1, WEB_B2]) assert.equal(direct(client, ip), 'answer', `${client} -> ${ip}`)
    const answers = lab.sample(lab.podNs('client-a'), CLUSTER_IP, 80, 18)
    assert.equal(failures(answers), 0, `${answers}`)
    assert.deepEqual([...new Set(answers)].sort(), ['web-a1', 'web-b1', 'web-b2'])
    assert.deepEqual(lab.dnsQuery('client-a', WEB_NAME, 40053), [CLUSTER_IP])
    for (const node of ['node-a', 'node-b']) {
      const s = sysctl(node)
      assert.deepEqual(forwardingSettings(s), {ipForward: true, bridgeNfCallIptables: true, brNetfilterLoaded: true})
      const usage = conntrackTableUsage(s)
      assert.ok(usage && usage.max > 0 && usage.fraction < 0.5, JSON.stringify(usage))
      assert.ok(filterChains(node).every((c) => c.owner === 'built-in' || c.owner === 'kube-proxy'))
      assert.equal(filterChains(node).find((c) => c.chain === 'FORWARD')?.policy, 'ACCEPT')
    }
    const viaB = parseRouteGet(nodeRead('node-a', 'ip', ['-o', 'route', 'get', WEB_B1]).stdout)
    assert.deepEqual([viaB.via, viaB.dev], ['10.200.0.12', 'eth0'])
    assert.ok(conntrack('node-a', 'udp', DNS_IP).every((e) => e.dnatTarget?.address === '10.244.1.53'))
  })

  test('(a) web-b2 Ready but listening on 8081, not its targetPort 8080: its share of connections is refused', async () => {
    lab.clearFaults()
    await lab.listenOn('web-b2', 8081)
    try {
      assert.equal(lab.pods.find((p) => p.name === 'web-b2')!.ready, true, 'the API still shows it Ready')
      assert.equal(direct('client-a', WEB_B2), 'refused')
      assert.equal(
        lab.probe(lab.nodeNs('node-b'), WEB_B2, 8080, 1).kind,
        'refused',
        'a probe from its own node is refused too',
      )
      assert.equal(lab.probe(lab.nodeNs('node-b'), WEB_B2, 8081, 1).kind, 'answer')
      const answers = lab.sample(lab.podNs('client-a'), CLUSTER_IP, 80, 18)
      assert.ok(failures(answers) > 0 && !answers.includes('web-b2'), `${answers}`)
      // No node read shows it (a refused SYN leaves no conntrack entry behind): only a live probe does, refused from every node.
      assert.equal(lab.probe(lab.nodeNs('node-a'), WEB_B2, 8080, 1).kind, 'refused')
      assert.deepEqual(
        conntrack('node-a', 'tcp', CLUSTER_IP).filter((e) => e.dnatTarget?.address === WEB_B2),
        [],
      )
    } finally {
      await lab.listenOn('web-b2', 8080)
    }
    assert.equal(direct('client-a', WEB_B2), 'answer')
  })

  test("(b) a stale UDP conntrack entry sends one client port's DNS queries to an old CoreDNS address; other ports work", () => {
    const stalePort = 40053
    assert.deepEqual(lab.dnsQuery('client-a', WEB_NAME, stalePort), [CLUSTER_IP])
    lab.clearFaults() // a clean table, as a fresh lab: the entry made next must be the only one for this port
    lab.staleDnsConntrack('client-a', stalePort, '10.244.1.54')
    try {
      assert.deepEqual(lab.dnsQuery('client-a', WEB_NAME, stalePort), [], 'queries from the stale port get no answer')
      assert.deepEqual(lab.dnsQuery('client-a', WEB_NAME, stalePort + 1), [CLUSTER_IP], 'another source port is fine')
      assert.deepEqual(lab.dnsQuery('client-b', WEB_NAME, stalePort), [CLUSTER_IP], 'another client is fine')
      const entries = conntrack('node-a', 'udp', DNS_IP)
      const stale = entries.filter((e) => e.dnatTarget?.address !== '10.244.1.53')
      assert.deepEqual(
        stale.map((e) => [e.original.src, e.original.sport, e.original.dst, e.original.dport, e.dnatTarget, e.flags]),
        [['10.244.1.100', stalePort, DNS_IP, 53, {address: '10.244.1.54', port: 53}, ['UNREPLIED']]],
      )
    } finally {
      // The fix the doctor will print: delete the entries DNATed to the old address.
      nodeRead('node-a', 'conntrack', ['-D', '-p', 'udp', '--orig-dst', DNS_IP, '--reply-src', '10.244.1.54'])
    }
    assert.deepEqual(
      lab.dnsQuery('client-a', WEB_NAME, stalePort),
      [CLUSTER_IP],
      'after conntrack -D the port works again',
    )
  })

  test('(c) net.ipv4.ip_forward=0 on node-a: pods on node-a reach nothing through it; node-b is unaffected', () => {
    lab.setSysctl('node-a', 'net.ipv4.ip_forward', '0')
    try {
      assert.notEqual(direct('client-a', WEB_B1), 'answer')
      assert.equal(failures(lab.sample(lab.podNs('client-a'), CLUSTER_IP, 80, 4)), 4)
      assert.equal(direct('client-b', WEB_B1), 'answer')
      assert.equal(forwardingSettings(sysctl('node-a')).ipForward, false)
      assert.equal(forwardingSettings(sysctl('node-b')).ipForward, true)
    } finally {
      lab.setSysctl('node-a', 'net.ipv4.ip_forward', '1')
    }
    assert.equal(direct('client-a', WEB_B1), 'answer')
  })

  // br_netfilter itself cannot be unloaded here: this kernel (6.18) has it built in (no /proc/modules, no /lib/modules,
  // no modprobe; `ls /proc/sys/net/bridge` lists bridge-nf-call-* in every new namespace). Its absence has the same
  // effect as the per-namespace switch below; the parser's handling of the missing key is unit-tested.
  test('(d) bridge-nf-call-iptables=0 on node-a: a pod reaching a ClusterIP backend on its own bridge gets un-NATed replies and fails', () => {
    lab.clearFaults()
    const old = lab.setSysctl('node-a', 'net.bridge.bridge-nf-call-iptables', '0')
    assert.equal(old, '1')
    try {
      const answers = lab.sample(lab.podNs('client-a'), CLUSTER_IP, 80, 24)
      assert.ok(!answers.includes('web-a1') && failures(answers) > 0, `${answers}`)
      assert.ok(answers.includes('web-b1') || answers.includes('web-b2'), `remote backends still answer: ${answers}`)
      assert.equal(direct('client-a', WEB_A1), 'answer', 'pod to pod without NAT is fine')
      assert.deepEqual(forwardingSettings(sysctl('node-a')), {
        ipForward: true,
        bridgeNfCallIptables: false,
        brNetfilterLoaded: true,
      })
    } finally {
      lab.setSysctl('node-a', 'net.bridge.bridge-nf-call-iptables', '1')
    }
    lab.clearFaults()
    assert.ok(lab.sample(lab.podNs('client-a'), CLUSTER_IP, 80, 18).includes('web-a1'))
  })

  test('(e) filter FORWARD policy DROP (Docker) on node-a: new pod traffic through node-a (either half of the path) is dropped', () => {
    lab.setForeignRules('node-a', {docker: true})
    try {
      assert.equal(failures(lab.sample(lab.podNs('client-a'), CLUSTER_IP, 80, 3)), 3)
      assert.equal(direct('client-a', WEB_B1), 'timeout')
      // (Outside -> NodePort on node-a is marked and accepted by KUBE-FORWARD only partly: 0-2 of 4 failed across runs,
      // not explained yet, so it is not asserted.)
      assert.equal(direct('client-b', WEB_B1), 'answer', 'traffic that never crosses node-a is fine')
      assert.equal(
        direct('client-b', WEB_A1),
        'timeout',
        "node-a is web-a1's node: the second half of the path crosses its FORWARD",
      )
      const chains = filterChains('node-a')
      assert.equal(chains.find((c) => c.chain === 'FORWARD')?.policy, 'DROP')
      assert.deepEqual(
        chains.filter((c) => c.owner === 'Docker').map((c) => c.chain),
        ['DOCKER', 'DOCKER-USER'],
      )
      assert.equal(filterChains('node-b').find((c) => c.chain === 'FORWARD')?.policy, 'ACCEPT')
    } finally {
      lab.setForeignRules('node-a', undefined)
    }
    assert.equal(direct('client-a', WEB_B1), 'answer')
    assert.equal(filterChains('node-a').find((c) => c.chain === 'FORWARD')?.policy, 'ACCEPT')
  })

  test("(f) a policy engine's chain in node-b's FORWARD drops traffic to web-b2: from every node, only web-b2 fails", () => {
    lab.setForeignRules('node-b', {policyChain: {name: 'cali-FORWARD', dropTo: [WEB_B2]}})
    try {
      for (const client of ['client-a', 'client-b']) {
        assert.equal(direct(client, WEB_B2), 'timeout', client)
        assert.equal(direct(client, WEB_B1), 'answer', client)
      }
      const answers = lab.sample(lab.podNs('client-a'), CLUSTER_IP, 80, 12)
      assert.ok(failures(answers) > 0 && !answers.includes('web-b2'), `${answers}`)
      const dump = IptablesSave.parse(
        new BufferSource(Buffer.from(nodeRead('node-b', 'iptables-save', ['-t', 'filter']).stdout)),
      )
      assert.deepEqual(
        tableChains(dump)
          .filter((c) => c.owner === 'Calico')
          .map((c) => [c.chain, c.rules]),
        [['cali-FORWARD', 1]],
      )
      assert.match(dump.rawRules('filter', 'cali-FORWARD')[0].text, /-d 10\.244\.2\.11\/32 .*-j DROP/)
      assert.ok(
        filterChains('node-a').every((c) => c.owner !== 'Calico'),
        'the source node shows nothing',
      )
    } finally {
      lab.setForeignRules('node-b', undefined)
    }
    assert.equal(direct('client-a', WEB_B2), 'answer')
  })

  test("(g) node-a loses its route to node-b's pod CIDR: node-b's endpoints are unreachable from node-a only", () => {
    lab.breakPodRoute('node-a', 'node-b', 'missing')
    try {
      assert.notEqual(direct('client-a', WEB_B1), 'answer')
      const answers = lab.sample(lab.podNs('client-a'), CLUSTER_IP, 80, 12)
      assert.ok(failures(answers) > 0 && answers.filter((a) => a !== '').every((a) => a === 'web-a1'), `${answers}`)
      assert.equal(direct('client-b', WEB_B1), 'answer')
      const got = parseRouteGet(nodeRead('node-a', 'ip', ['-o', 'route', 'get', WEB_B1]).stdout)
      assert.deepEqual([got.via, got.dev], ['10.200.0.1', 'eth0'], 'the default route takes it, not node-b')
      assert.ok(
        !parseRouteTable(nodeRead('node-a', 'ip', ['route', 'show']).stdout).some(
          (r) => r.destination === '10.244.2.0/24',
        ),
      )
      lab.breakPodRoute('node-a', 'node-b', 'unreachable')
      assert.notEqual(direct('client-a', WEB_B1), 'answer')
      const failed = nodeRead('node-a', 'ip', ['-o', 'route', 'get', WEB_B1])
      assert.notEqual(failed.code, 0)
      assert.equal(routeGetFailure(failed.stderr)?.type, 'unreachable')
    } finally {
      lab.restorePodRoute('node-a', 'node-b')
    }
    assert.equal(direct('client-a', WEB_B1), 'answer')
  })
})
