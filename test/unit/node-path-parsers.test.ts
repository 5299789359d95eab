import assert from 'node:assert/strict'
import {test} from 'node:test'
import {chainOwner, tableChains} from '../../src/parse/chain-owner.js'
import {parseConntrackList} from '../../src/parse/conntrack.js'
import {BufferSource} from '../../src/parse/dump-source.js'
import {IptablesSave} from '../../src/parse/iptables-save.js'
import {parseRouteGet, parseRouteTable, routeGetFailure} from '../../src/parse/ip-route.js'
import {
  ParseError as ConntrackParseError,
  ParseError as RouteParseError,
  ParseError as SysctlParseError,
} from '../../src/parse/parse-error.js'
import {
  conntrackTableUsage,
  effectiveRouteLocalnet,
  effectiveRpFilter,
  forwardingSettings,
  interfacesWith,
  parseSysctl,
} from '../../src/parse/sysctl.js'

// Fixtures follow the formats captured from conntrack v1.4.7 and iproute2 in a lab namespace; the numbers are made up.

test('conntrack -L: UDP unreplied, TCP states, DNAT target from the reply source, summary line skipped', () => {
  const out = [
    'udp      17 27 src=10.61.3.7 dst=10.100.0.10 sport=40053 dport=53 [UNREPLIED] src=10.61.9.54 dst=10.61.3.7 sport=53 dport=40053 mark=0 use=1',
    'tcp      6 86391 ESTABLISHED src=10.61.3.7 dst=10.100.4.4 sport=51234 dport=443 src=10.61.8.20 dst=10.61.3.7 sport=8443 dport=51234 [ASSURED] mark=16384 use=1',
    'tcp      6 9 CLOSE src=10.61.3.7 dst=10.100.4.4 sport=51240 dport=443 src=10.61.8.21 dst=10.61.3.7 sport=8443 dport=51240 mark=0 use=1',
    'conntrack v1.4.7 (conntrack-tools): 3 flow entries have been shown.',
    '',
  ].join('\n')
  const entries = parseConntrackList(out)
  assert.deepEqual(
    entries.map(({text: _t, ...rest}) => rest),
    [
      {
        protocol: 'udp',
        protocolNumber: 17,
        timeout: 27,
        original: {src: '10.61.3.7', dst: '10.100.0.10', sport: 40053, dport: 53},
        reply: {src: '10.61.9.54', dst: '10.61.3.7', sport: 53, dport: 40053},
        flags: ['UNREPLIED'],
        mark: 0,
        dnatTarget: {address: '10.61.9.54', port: 53},
        line: 1,
      },
      {
        protocol: 'tcp',
        protocolNumber: 6,
        timeout: 86391,
        state: 'ESTABLISHED',
        original: {src: '10.61.3.7', dst: '10.100.4.4', sport: 51234, dport: 443},
        reply: {src: '10.61.8.20', dst: '10.61.3.7', sport: 8443, dport: 51234},
        flags: ['ASSURED'],
        mark: 16384,
        dnatTarget: {address: '10.61.8.20', port: 8443},
        line: 2,
      },
      {
        protocol: 'tcp',
        protocolNumber: 6,
        timeout: 9,
        state: 'CLOSE',
        original: {src: '10.61.3.7', dst: '10.100.4.4', sport: 51240, dport: 443},
        reply: {src: '10.61.8.21', dst: '10.61.3.7', sport: 8443, dport: 51240},
        flags: [],
        mark: 0,
        dnatTarget: {address: '10.61.8.21', port: 8443},
        line: 3,
      },
    ],
  )
})

test('conntrack -L: no NAT means no DNAT target; -o extended prefix, ICMP without ports, IPv6 canonicalised', () => {
  const [plain, extended, icmp, v6] = parseConntrackList(
    [
      'tcp      6 431999 ESTABLISHED src=10.61.3.7 dst=10.61.3.9 sport=40000 dport=22 src=10.61.3.9 dst=10.61.3.7 sport=22 dport=40000 [ASSURED] mark=0 use=1',
      'ipv4     2 udp      17 15 src=10.61.3.7 dst=10.100.0.10 sport=5353 dport=53 src=10.61.9.53 dst=10.61.3.7 sport=53 dport=5353 mark=0 use=1',
      'icmp     1 29 src=10.61.3.7 dst=10.61.3.9 type=8 code=0 id=77 src=10.61.3.9 dst=10.61.3.7 type=0 code=0 id=77 mark=0 use=1',
      'udp      17 20 src=fd00:0:0:0::7 dst=fd00:100::a sport=999 dport=53 [UNREPLIED] src=fd00::99 dst=fd00::7 sport=53 dport=999 mark=0 use=1',
    ].join('\n'),
  )
  assert.equal(plain.dnatTarget, undefined)
  assert.deepEqual(extended.dnatTarget, {address: '10.61.9.53', port: 53})
  assert.deepEqual(icmp.original, {src: '10.61.3.7', dst: '10.61.3.9'})
  assert.equal(icmp.dnatTarget, undefined)
  assert.deepEqual(v6.original, {src: 'fd00::7', dst: 'fd00:100::a', sport: 999, dport: 53})
  assert.deepEqual(v6.dnatTarget, {address: 'fd00::99', port: 53})
  assert.deepEqual(parseConntrackList('conntrack v1.4.7 (conntrack-tools): 0 flow entries have been shown.\n'), [])
})

test('conntrack -L: garbage is a typed error naming the line', () => {
  const good =
    'udp      17 27 src=10.61.3.7 dst=10.100.0.10 sport=1 dport=53 src=10.61.9.54 dst=10.61.3.7 sport=53 dport=1 mark=0 use=1'
  const bad = (text: string, reason: RegExp, line = 2) =>
    assert.throws(
      () => parseConntrackList(`${good}\n${text}\n`),
      (e: unknown) => e instanceof ConntrackParseError && e.line === line && reason.test(e.message),
    )
  bad('hello world', /line 2: not "PROTOCOL NUMBER TIMEOUT/)
  bad('udp 17 27 src=10.61.3.7 dst=10.100.0.10 sport=1 dport=53', /expected an original and a reply tuple, found 1/)
  bad(
    'udp 17 27 src=10.61.3.300 dst=10.100.0.10 sport=1 dport=53 src=1.2.3.4 dst=1.2.3.5 sport=1 dport=2',
    /bad src address "10.61.3.300"/,
  )
  bad(
    'udp 17 27 src=10.61.3.7 dst=10.100.0.10 sport=1 dport=99999 src=1.2.3.4 dst=1.2.3.5 sport=1 dport=2',
    /bad dport "99999"/,
  )
  bad(
    'tcp 6 5 ESTABLISHED src=10.61.3.7 dst=10.100.0.10 sport=1 dport=2 surprise src=1.2.3.4 dst=1.2.3.5 sport=2 dport=1',
    /unexpected word "surprise"/,
  )
})

test('ip -o route get: via, dev, src; local answers; the cache tail is dropped', () => {
  assert.deepEqual(parseRouteGet('10.62.2.14 via 10.50.0.12 dev eth0 src 10.50.0.11 uid 0 \\    cache \n'), {
    type: 'unicast',
    destination: '10.62.2.14',
    via: '10.50.0.12',
    dev: 'eth0',
    src: '10.50.0.11',
    flags: [],
    nexthops: [],
    line: 1,
    text: '10.62.2.14 via 10.50.0.12 dev eth0 src 10.50.0.11 uid 0',
  })
  const onBridge = parseRouteGet('10.62.1.30 dev cni0 src 10.62.1.1 uid 0 \\    cache \n')
  assert.deepEqual(
    [onBridge.type, onBridge.via, onBridge.dev, onBridge.src],
    ['unicast', undefined, 'cni0', '10.62.1.1'],
  )
  const local = parseRouteGet('local 10.50.0.11 dev lo src 10.50.0.11 uid 0 \\    cache <local> \n')
  assert.deepEqual([local.type, local.dev], ['local', 'lo'])
  const from = parseRouteGet('10.62.1.30 from 10.62.1.1 dev cni0 uid 0 \\    cache \n')
  assert.equal(from.dev, 'cni0')
})

test('ip route get failures: the RTNETLINK message says which kind of route stopped it', () => {
  assert.deepEqual(routeGetFailure('RTNETLINK answers: Network is unreachable\n'), {
    type: 'none',
    message: 'RTNETLINK answers: Network is unreachable',
  })
  assert.equal(routeGetFailure('RTNETLINK answers: No route to host\n')?.type, 'unreachable')
  assert.equal(routeGetFailure('RTNETLINK answers: Invalid argument\n')?.type, 'blackhole')
  assert.equal(routeGetFailure('RTNETLINK answers: Permission denied\n')?.type, 'prohibit')
  assert.equal(routeGetFailure('Error: any valid prefix is expected rather than "x".\n'), undefined)
})

test('ip route show: kinds of route, multipath folded, IPv6 gateways', () => {
  const routes = parseRouteTable(
    [
      'default via 10.50.0.1 dev eth0 proto dhcp src 10.50.0.11 metric 100 ',
      '10.50.0.0/24 dev eth0 proto kernel scope link src 10.50.0.11 ',
      '10.62.1.0/24 dev cni0 proto kernel scope link src 10.62.1.1 linkdown ',
      '10.62.2.0/24 via 10.50.0.12 dev eth0 onlink ',
      'unreachable 10.62.3.0/24 ',
      'blackhole 10.62.4.0/24 proto bird ',
      'prohibit 10.62.5.0/24 ',
      '10.62.6.0/24 proto static ',
      '\tnexthop via 10.50.0.13 dev eth0 weight 1 ',
      '\tnexthop via 10.50.0.14 dev eth1 weight 2 ',
      'fd00:62:7::/64 via inet6 fe80::1 dev eth0 metric 1024 pref medium',
    ].join('\n'),
  )
  assert.deepEqual(
    routes.map((r) => [
      r.type,
      r.destination,
      r.via ?? '',
      r.dev ?? '',
      r.src ?? '',
      r.flags.join(','),
      r.metric ?? '',
    ]),
    [
      ['unicast', 'default', '10.50.0.1', 'eth0', '10.50.0.11', '', 100],
      ['unicast', '10.50.0.0/24', '', 'eth0', '10.50.0.11', '', ''],
      ['unicast', '10.62.1.0/24', '', 'cni0', '10.62.1.1', 'linkdown', ''],
      ['unicast', '10.62.2.0/24', '10.50.0.12', 'eth0', '', 'onlink', ''],
      ['unreachable', '10.62.3.0/24', '', '', '', '', ''],
      ['blackhole', '10.62.4.0/24', '', '', '', '', ''],
      ['prohibit', '10.62.5.0/24', '', '', '', '', ''],
      ['unicast', '10.62.6.0/24', '', '', '', '', ''],
      ['unicast', 'fd00:62:7::/64', 'fe80::1', 'eth0', '', '', 1024],
    ],
  )
  assert.deepEqual(routes[7].nexthops, [
    {via: '10.50.0.13', dev: 'eth0', weight: 1},
    {via: '10.50.0.14', dev: 'eth1', weight: 2},
  ])
  assert.deepEqual(
    parseRouteTable('10.62.8.0/24 nexthop via 10.50.0.15 dev eth0 weight 1 nexthop via 10.50.0.16 dev eth0 weight 1')[0]
      .nexthops,
    [
      {via: '10.50.0.15', dev: 'eth0', weight: 1},
      {via: '10.50.0.16', dev: 'eth0', weight: 1},
    ],
  )
})

test('ip route: garbage is a typed error naming the line', () => {
  const fails = (f: () => unknown, line: number, reason: RegExp) =>
    assert.throws(f, (e: unknown) => e instanceof RouteParseError && e.line === line && reason.test(e.message))
  fails(() => parseRouteTable('10.62.2.0/24 dev eth0\nnot-a-route dev eth0\n'), 2, /"not-a-route" is not a destination/)
  fails(() => parseRouteTable('\tnexthop via 10.50.0.13 dev eth0\n'), 1, /nexthop line before any route/)
  fails(() => parseRouteTable('10.62.2.0/24 via 10.50.0.999 dev eth0\n'), 1, /bad gateway "10.50.0.999"/)
  fails(() => parseRouteTable('10.62.2.0/24 dev\n'), 1, /"dev" without a value/)
  fails(() => parseRouteTable('10.62.2.0/24 dev eth0 wobble\n'), 1, /unexpected word "wobble"/)
  fails(() => parseRouteGet(''), 1, /empty output/)
})

test('sysctl: both spellings, absent keys, the settings the path needs', () => {
  const s = parseSysctl(
    [
      'net.ipv4.ip_forward = 0',
      '/proc/sys/net/ipv4/conf/all/rp_filter:1',
      '/proc/sys/net/ipv4/conf/eth0/rp_filter:2',
      'net.ipv4.conf.cni0.rp_filter = 0',
      '/proc/sys/net/ipv4/conf/eth0.100/rp_filter:0',
      'net.ipv4.conf.all.route_localnet = 0',
      'net.ipv4.conf.eth0.route_localnet = 1',
      'sysctl: cannot stat /proc/sys/net/bridge/bridge-nf-call-iptables: No such file or directory',
      '/proc/sys/net/netfilter/nf_conntrack_count:117964',
      'net.netfilter.nf_conntrack_max = 131072',
    ].join('\n'),
  )
  assert.equal(s.values.get('net.ipv4.conf.eth0/100.rp_filter'), '0')
  assert.deepEqual([...s.absent], ['net.bridge.bridge-nf-call-iptables'])
  assert.deepEqual(forwardingSettings(s), {ipForward: false, bridgeNfCallIptables: undefined, brNetfilterLoaded: false})
  assert.deepEqual(interfacesWith(s, 'rp_filter'), ['cni0', 'eth0', 'eth0.100'])
  assert.equal(effectiveRpFilter(s, 'eth0'), 2)
  assert.equal(effectiveRpFilter(s, 'cni0'), 1, 'conf.all=1 wins over conf.cni0=0')
  assert.equal(effectiveRpFilter(s, 'eth0.100'), 1)
  assert.equal(effectiveRpFilter(parseSysctl(''), 'eth0'), undefined)
  assert.equal(effectiveRouteLocalnet(s, 'eth0'), true)
  assert.equal(effectiveRouteLocalnet(s, 'cni0'), false)
  assert.deepEqual(conntrackTableUsage(s), {count: 117964, max: 131072, fraction: 117964 / 131072})
  assert.equal(conntrackTableUsage(parseSysctl('net.netfilter.nf_conntrack_max = 131072')), undefined)
  const loaded = parseSysctl(
    '/proc/sys/net/bridge/bridge-nf-call-iptables:0\ngrep: /proc/sys/net/ipv4/ip_forward: No such file or directory\n',
  )
  assert.deepEqual(forwardingSettings(loaded), {
    ipForward: undefined,
    bridgeNfCallIptables: false,
    brNetfilterLoaded: true,
  })
})

test('sysctl: garbage is a typed error naming the line', () => {
  assert.throws(
    () => parseSysctl('net.ipv4.ip_forward = 1\nPermission denied\n'),
    (e: unknown) => e instanceof SysctlParseError && e.line === 2 && /neither "key = value"/.test(e.message),
  )
})

test('chain owners: by the names each project gives its chains', () => {
  const owners = Object.fromEntries(
    [
      'FORWARD',
      'KUBE-SERVICES',
      'KUBE-SEP-ABCDEFGH12345678',
      'KUBE-FORWARD',
      'KUBE-FIREWALL',
      'KUBE-ROUTER-FORWARD',
      'KUBE-NWPLCY-QQQQ',
      'KUBE-POD-FW-RRRR',
      'DOCKER',
      'DOCKER-USER',
      'DOCKER-ISOLATION-STAGE-1',
      'cali-FORWARD',
      'cali-tw-cali12345',
      'ANTREA-FORWARD',
      'CILIUM_FORWARD',
      'FLANNEL-FWD',
      'WEAVE-NPC',
      'my-firewall',
      'kube-lowercase',
    ].map((c) => [c, chainOwner(c)]),
  )
  assert.deepEqual(owners, {
    FORWARD: 'built-in',
    'KUBE-SERVICES': 'kube-proxy',
    'KUBE-SEP-ABCDEFGH12345678': 'kube-proxy',
    'KUBE-FORWARD': 'kube-proxy',
    'KUBE-FIREWALL': 'kubelet',
    'KUBE-ROUTER-FORWARD': 'kube-router',
    'KUBE-NWPLCY-QQQQ': 'kube-router',
    'KUBE-POD-FW-RRRR': 'kube-router',
    DOCKER: 'Docker',
    'DOCKER-USER': 'Docker',
    'DOCKER-ISOLATION-STAGE-1': 'Docker',
    'cali-FORWARD': 'Calico',
    'cali-tw-cali12345': 'Calico',
    'ANTREA-FORWARD': 'Antrea',
    CILIUM_FORWARD: 'Cilium',
    'FLANNEL-FWD': 'Flannel',
    'WEAVE-NPC': 'Weave Net',
    'my-firewall': 'hand-written',
    'kube-lowercase': 'hand-written',
  })
})

test('filter chains of a dump: policy, owner, rule count', () => {
  const dump = IptablesSave.parse(
    new BufferSource(
      Buffer.from(
        [
          '*filter',
          ':INPUT ACCEPT [0:0]',
          ':FORWARD DROP [7:420]',
          ':OUTPUT ACCEPT [0:0]',
          ':DOCKER-USER - [0:0]',
          ':KUBE-FORWARD - [0:0]',
          ':cali-FORWARD - [0:0]',
          '-A FORWARD -j cali-FORWARD',
          '-A FORWARD -j DOCKER-USER',
          '-A FORWARD -j KUBE-FORWARD',
          '-A DOCKER-USER -j RETURN',
          '-A cali-FORWARD -d 10.62.2.11/32 -j DROP',
          'COMMIT',
          '',
        ].join('\n'),
      ),
    ),
  )
  assert.deepEqual(tableChains(dump), [
    {chain: 'INPUT', policy: 'ACCEPT', owner: 'built-in', rules: 0},
    {chain: 'FORWARD', policy: 'DROP', owner: 'built-in', rules: 3},
    {chain: 'OUTPUT', policy: 'ACCEPT', owner: 'built-in', rules: 0},
    {chain: 'DOCKER-USER', policy: '-', owner: 'Docker', rules: 1},
    {chain: 'KUBE-FORWARD', policy: '-', owner: 'kube-proxy', rules: 0},
    {chain: 'cali-FORWARD', policy: '-', owner: 'Calico', rules: 1},
  ])
})
