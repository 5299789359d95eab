import assert from 'node:assert/strict'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {createServer, type Socket} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {test} from 'node:test'
import {collectNode} from '../../src/node/read/collect-node.js'
import {loadNodeRecording, writeNodeRecording} from '../../src/node/read/bundle.js'
import {parseNodeRecording} from '../../src/node/read/recording.js'
import type {FileRead, NodeAccess, RunResult, TcpOpen} from '../../src/node/transport/node-access.js'
import {buildCommandLine} from '../../src/node/node-commands.js'
import type {ArgsOf, NodeCommandKey} from '../../src/node/read/node-reads.js'
import {interpretPathReads} from '../../src/node/read/path-reads.js'
import {SshSession} from '../../src/node/transport/ssh/ssh-session.js'
import {forwardingSettings} from '../../src/parse/sysctl.js'

test('path reads: exact command lines, sudo -n only for conntrack, arguments validated as addresses, protocols and interface names', () => {
  assert.equal(
    buildCommandLine('pathSysctls', true, {interfaces: ['cbr0', 'eth0.100']}),
    "sysctl 'net.ipv4.ip_forward' 'net.bridge.bridge-nf-call-iptables' 'net.netfilter.nf_conntrack_count' 'net.netfilter.nf_conntrack_max' 'net.ipv4.conf.all.rp_filter' 'net.ipv4.conf.all.route_localnet' 'net.ipv4.conf.cbr0.rp_filter' 'net.ipv4.conf.cbr0.route_localnet' 'net.ipv4.conf.eth0/100.rp_filter' 'net.ipv4.conf.eth0/100.route_localnet'",
  )
  assert.equal(buildCommandLine('routeTable', false), 'ip route show')
  assert.equal(buildCommandLine('routeGet', false, {address: '10.244.2.10'}), "ip -o route get '10.244.2.10'")
  assert.equal(buildCommandLine('routeGet', false, {address: 'fd00:0::1'}), "ip -o route get 'fd00::1'")
  assert.equal(
    buildCommandLine('conntrackList', true, {protocol: 'udp', address: '10.96.0.10'}),
    "conntrack -L -p 'udp' -d '10.96.0.10'",
  )
  assert.equal(
    buildCommandLine('conntrackList', false, {protocol: 'tcp', address: '10.96.0.10'}),
    "sudo -n conntrack -L -p 'tcp' -d '10.96.0.10'",
  )
  for (const address of ['10.0.0.1; rm -rf /', '10.0.0.0/24', 'node-b', '[::1]', '', "10.0.0.1'"])
    assert.throws(() => buildCommandLine('routeGet', true, {address}), /is not an IP address/, address)
  assert.throws(
    () => buildCommandLine('conntrackList', true, {protocol: 'icmp' as 'tcp', address: '10.96.0.10'}),
    /not a conntrack protocol/,
  )
  assert.throws(
    () => buildCommandLine('conntrackList', true, {protocol: 'tcp', address: '10.96.0.10 -D'}),
    /not an IP address/,
  )
  for (const iface of ['eth0/x', 'a'.repeat(16), '..', "x'y", 'a b', ''])
    assert.throws(() => buildCommandLine('pathSysctls', true, {interfaces: [iface]}), /not an interface name/, iface)
  assert.throws(() => buildCommandLine('routeGet' as NodeCommandKey, true), /needs its arguments/)
  // kube-proxy's own nft table: a fixed table name, the family one of two words.
  assert.equal(
    buildCommandLine('nftKubeProxyTable', true, {family: 'ip6', json: true}),
    'nft -j list table ip6 kube-proxy',
  )
  assert.equal(
    buildCommandLine('nftKubeProxyTable', false, {family: 'ip', json: false}),
    'sudo -n nft list table ip kube-proxy',
  )
  for (const family of ['inet', 'ip; reboot', 'ip kube-proxy; list ruleset', ''])
    assert.throws(
      () => buildCommandLine('nftKubeProxyTable', true, {family: family as 'ip', json: true}),
      /not an nft family kube-proxy uses/,
      family,
    )
})

test('path reads: a missing bridge key is br_netfilter not loaded; a missing conntrack is "not read" with the reason; refused routes are typed', () => {
  const obs = interpretPathReads({
    sysctls: {
      code: 255,
      stdout: 'net.ipv4.ip_forward = 1\nnet.netfilter.nf_conntrack_count = 3\n',
      stderr:
        'sysctl: cannot stat /proc/sys/net/bridge/bridge-nf-call-iptables: No such file or directory\nsysctl: permission denied on key "x"\n',
    },
    routeGet: [
      {address: '10.244.2.10', code: 2, stdout: '', stderr: 'RTNETLINK answers: No route to host\n'},
      {address: '10.244.2.11', code: 2, stdout: '', stderr: 'RTNETLINK answers: Invalid argument\n'},
      {address: '10.244.1.10', code: 0, stdout: '10.244.1.10 dev cbr0 src 10.244.1.1 uid 0 \\    cache \n', stderr: ''},
      {address: '10.244.1.11', code: 1, stdout: '', stderr: 'Error: something else\n'},
    ],
    conntrack: [
      {
        protocol: 'tcp',
        address: '10.96.10.10',
        code: 127,
        stdout: '',
        stderr: 'bash: line 1: conntrack: command not found\n',
      },
      {protocol: 'udp', address: '10.96.10.10', code: 1, stdout: '', stderr: 'sudo: conntrack: command not found\n'},
      {
        protocol: 'sctp',
        address: '10.96.10.10',
        code: null,
        stdout: '',
        stderr: '',
        notRead: 'conntrackList is not recorded in the bundle',
      },
      {protocol: 'icmp', address: '10.96.10.10', code: 0, stdout: '', stderr: ''},
    ],
  })
  assert.equal(obs.sysctls?.status, 'read')
  assert.deepEqual(obs.sysctls?.status === 'read' && forwardingSettings(obs.sysctls.value), {
    ipForward: true,
    bridgeNfCallIptables: undefined,
    brNetfilterLoaded: false,
  })
  assert.deepEqual(
    obs.routeLookups.map((l) => [
      l.address,
      l.result.status === 'read'
        ? l.result.value.kind === 'route'
          ? l.result.value.route.dev
          : l.result.value.type
        : l.result.reason,
    ]),
    [
      ['10.244.2.10', 'unreachable'],
      ['10.244.2.11', 'blackhole'],
      ['10.244.1.10', 'cbr0'],
      ['10.244.1.11', 'ip route get 10.244.1.11: exited 1: Error: something else'],
    ],
  )
  assert.deepEqual(
    obs.conntrack.map((c) => [c.protocol, c.result.status === 'read' ? 'read' : c.result.reason]),
    [
      [
        'tcp',
        'conntrack -L -p tcp -d 10.96.10.10: not available on the node (bash: line 1: conntrack: command not found)',
      ],
      ['udp', 'conntrack -L -p udp -d 10.96.10.10: not available on the node (sudo: conntrack: command not found)'],
      ['sctp', 'conntrack -L -p sctp -d 10.96.10.10: conntrackList is not recorded in the bundle'],
    ],
  )
})

/** A node as a stand-in transport: answers each allow-listed key like the lab's node-a, and logs what it was asked. */
class FakeNode implements NodeAccess {
  readonly asked: string[] = []
  async run<K extends NodeCommandKey>(key: K, ...args: ArgsOf<K>): Promise<RunResult> {
    const line = buildCommandLine(key, true, ...args)
    this.asked.push(line)
    const ok = (stdout: string, code = 0, stderr = ''): RunResult => ({
      kind: 'ran',
      code,
      stdout: Buffer.from(stdout),
      stderr,
    })
    if (key === 'iptablesSave') return ok('*nat\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n')
    if (key === 'routeTable')
      return ok(
        'default via 10.200.0.1 dev eth0 onlink\n10.244.1.0/24 dev cbr0 proto kernel scope link src 10.244.1.1\n',
      )
    if (key === 'routeGet') {
      const {address} = args[0] as {address: string}
      return address.startsWith('10.244.1.')
        ? ok(`${address} dev cbr0 src 10.244.1.1 uid 0 \\    cache \n`)
        : ok('', 2, 'RTNETLINK answers: No route to host\n')
    }
    if (key === 'pathSysctls') return ok('net.ipv4.ip_forward = 0\nnet.bridge.bridge-nf-call-iptables = 1\n')
    if (key === 'conntrackList') return ok('', 127, 'sh: 1: conntrack: not found\n')
    return ok('', 1, 'not here')
  }
  async openTcp(): Promise<TcpOpen> {
    return {kind: 'refused', outcome: 'refused', reason: 'no'}
  }
  async readFile(): Promise<FileRead> {
    return {kind: 'missing', reason: 'no'}
  }
  describe() {
    return {transport: 'fake', address: 'fake', tcpVia: 'nothing'}
  }
  close() {}
}

test('collectNode makes the path reads through NodeAccess; the bundle it writes parses back to the same observation', async () => {
  const node = new FakeNode()
  const {observation, recording} = await collectNode('node-a', async () => node, {
    timeoutMs: 5000,
    path: {
      endpointAddresses: ['10.244.1.10', '10.244.2.10', '10.244.1.10', 'junk'],
      serviceAddresses: [{address: '10.96.10.10', protocol: 'tcp'}],
    },
  })
  assert.equal(observation.reachable, true, observation.error)
  assert.deepEqual(
    // Reads that wait on no other are asked at once (conntrack beside the routes): the set, in no order. The sysctl
    // line names the interfaces the routes answered, so it came after them.
    node.asked.filter((l) => /route|conntrack|sysctl '/.test(l)).sort(),
    [
      'ip route show',
      "ip -o route get '10.244.1.10'",
      "ip -o route get '10.244.2.10'",
      "sysctl 'net.ipv4.ip_forward' 'net.bridge.bridge-nf-call-iptables' 'net.netfilter.nf_conntrack_count' 'net.netfilter.nf_conntrack_max' 'net.ipv4.conf.all.rp_filter' 'net.ipv4.conf.all.route_localnet' 'net.ipv4.conf.cbr0.rp_filter' 'net.ipv4.conf.cbr0.route_localnet'",
      "conntrack -L -p 'tcp' -d '10.96.10.10'",
    ].sort(),
  )
  const path = observation.path!
  assert.deepEqual(path.sysctls?.status === 'read' && forwardingSettings(path.sysctls.value).ipForward, false)
  assert.equal(path.conntrack[0].result.status, 'not-read')
  const dir = mkdtempSync(join(tmpdir(), 'kpd-path-'))
  try {
    writeNodeRecording(dir, recording)
    assert.deepEqual(parseNodeRecording('node-a', loadNodeRecording(dir)!).path, path)
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
  const withoutTargets = new FakeNode()
  const plain = await collectNode('node-a', async () => withoutTargets, {timeoutMs: 5000})
  assert.equal(plain.observation.path, undefined, 'no targets (trace --node): no path reads')
  assert.ok(withoutTargets.asked.every((l) => !/route|conntrack/.test(l)))
})

test('ConnectTimeout bounds the SSH handshake: a server that accepts TCP and never speaks SSH is given up after it, not after --timeout', async () => {
  const sockets: Socket[] = []
  const server = createServer((s) => void sockets.push(s))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const dir = mkdtempSync(join(tmpdir(), 'kpd-ssh-'))
  const key = join(dir, 'id')
  writeFileSync(key, 'not parsed before the handshake\n')
  try {
    const port = (server.address() as {port: number}).port
    const host = {
      alias: 'mute',
      hostName: '127.0.0.1',
      port,
      user: 'root',
      identityFiles: [key],
      userKnownHostsFiles: [],
      identitiesOnly: true,
      connectTimeoutSeconds: 1,
    }
    const started = Date.now()
    await assert.rejects(
      SshSession.connect(host, {insecureIgnoreHostKey: false, timeoutMs: 20_000}),
      /no SSH handshake within 1s \(ConnectTimeout\)/,
    )
    const took = Date.now() - started
    assert.ok(took >= 900 && took < 10_000, `gave up after ${took} ms`)
  } finally {
    for (const s of sockets) s.destroy()
    server.close()
    rmSync(dir, {recursive: true, force: true})
  }
})
