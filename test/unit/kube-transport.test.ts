import assert from 'node:assert/strict'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {test} from 'node:test'
import type {KubeConfig} from '@kubernetes/client-node'
import {PodExecNodeAccess} from '../../src/node/transport/pod/pod-exec-transport.js'
import {parseIpvsadm} from '../../src/parse/ipvsadm.js'
import {parseBridgeState} from '../../src/parse/bridge-state.js'
import {procIpVsAsIpvsadm} from '../../src/node/transport/pod/proc-ip-vs.js'
import {hairpinLines, interfacesOfProcNetDev} from '../../src/node/transport/pod/sysfs-bridges.js'
import {sshConfigNames} from '../../src/node/transport/transports.js'
import {COMMAND_ARGV, NODE_COMMANDS, onNodeRoot, QUERY_ARGV} from '../../src/node/node-commands.js'
import type {NodeReadVia} from '../../src/diagnosis/choose-transport.js'
import {withReadVia} from '../../src/report/document.js'
import {apiOnlyNote, renderReadVia} from '../../src/report/read-via.js'

test('/proc/net/ip_vs (hex addresses and ports) reads as ipvsadm -Ln: virtual servers, schedulers, persistence, real servers and weights', () => {
  const proc = [
    'IP Virtual Server version 1.2.1 (size=4096)',
    'Prot LocalAddress:Port Scheduler Flags',
    '  -> RemoteAddress:Port Forward Weight ActiveConn InActConn',
    'TCP  0A600A0A:0050 rr ',
    '  -> 0AF4020B:1F90      Masq    0      0          0         ',
    '  -> 0AF4010A:1F90      Masq    1      2          5         ',
    'UDP  0A60000A:0035 rr persistent 10800 FFFFFFFF',
    '  -> 0AF40135:0035      Masq    1      0          0         ',
    'TCP  [fd00:0000:0000:0000:0000:0000:0000:000a]:01BB sh ',
    '  -> [fd00:0000:0000:0000:0000:0000:0001:0002]:1F90      Masq    1      0          0         ',
    'garbage line',
  ].join('\n')
  const text = procIpVsAsIpvsadm(proc)
  const vs = parseIpvsadm(text)
  assert.deepEqual(
    vs.map(
      (v) =>
        `${v.proto} ${v.address}:${v.port} ${v.scheduler} ${v.persistent ?? '-'} ${v.reals.map((r) => `${r.address}:${r.port}/${r.forward}/${r.weight}`).join(',')}`,
    ),
    [
      'tcp 10.96.10.10:80 rr - 10.244.2.11:8080/Masq/0,10.244.1.10:8080/Masq/1',
      'udp 10.96.0.10:53 rr 10800 10.244.1.53:53/Masq/1',
      'tcp fd00::a:443 sh - fd00::1:2:8080/Masq/1',
    ],
  )
})

test('sysfs bridge ports: interfaces from /proc/net/dev, hairpin flags labelled by grep -H, as the network read writes them', () => {
  const dev = [
    'Inter-|   Receive                                                |  Transmit',
    ' face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed',
    '    lo:    1234      10    0    0    0     0          0         0     1234      10    0    0    0     0       0          0',
    '  cbr0:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0',
    'vethweba1:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0',
    '../x: 0 0',
  ].join('\n')
  assert.deepEqual(interfacesOfProcNetDev(dev), ['lo', 'cbr0', 'vethweba1'])
  const grep = [
    '/sys/class/net/vethweba1/brport/hairpin_mode:0',
    '/sys/class/net/vethweba1/brport/bridge/uevent:DEVTYPE=bridge',
    '/sys/class/net/vethweba1/brport/bridge/uevent:INTERFACE=cbr0',
    '/sys/class/net/vethweba1/brport/bridge/uevent:IFINDEX=3',
    '/sys/class/net/vethclient/brport/hairpin_mode:1',
    '/sys/class/net/vethclient/brport/bridge/uevent:INTERFACE=cbr0',
    '/sys/class/net/orphan/brport/hairpin_mode:1',
  ].join('\n')
  const lines = hairpinLines(grep)
  assert.deepEqual(lines, [
    '/sys/class/net/cbr0/brif/vethweba1/hairpin_mode 0',
    '/sys/class/net/cbr0/brif/vethclient/hairpin_mode 1',
  ])
  assert.deepEqual(parseBridgeState(['## hairpin', ...lines].join('\n')).ports, [
    {bridge: 'cbr0', port: 'vethweba1', hairpin: false},
    {bridge: 'cbr0', port: 'vethclient', hairpin: true},
  ])
})

test('auto picks SSH only for nodes a Host pattern names (a bare Host * holds defaults); a missing explicit config is an error', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpd-sshnames-'))
  try {
    const cfg = join(dir, 'config')
    writeFileSync(
      cfg,
      'ServerAliveInterval 30\nHost *\n  User admin\nHost node-a worker-* !worker-9\n  Port 2222\nMatch host x\n  Port 1\n',
    )
    const names = await sshConfigNames(cfg)
    assert.deepEqual(
      ['node-a', 'node-b', 'worker-1', 'worker-9'].map((n) => `${n} ${names(n)}`),
      ['node-a true', 'node-b false', 'worker-1 true', 'worker-9 false'],
    )
    await assert.rejects(sshConfigNames(join(dir, 'nope')), /SSH config .*nope does not exist/)
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})

test('read-via in the report: every node says how it was read; API-only nodes are listed, in order, with the note and the human block', () => {
  const readVia = new Map<string, NodeReadVia>([
    [
      'node-b',
      {
        transport: null,
        address: null,
        why: 'API-only (--via none)',
        notUsed: [{transport: 'ssh', reason: '--via none'}],
        notRead: [],
      },
    ],
    [
      'node-a',
      {
        transport: 'kube-proxy',
        address: 'pod kube-system/kube-proxy-ax7k2',
        why: "kube-proxy's Pod runs on node-a and exec into it is allowed",
        notUsed: [{transport: 'ssh', reason: 'no Host entry for node-a in ~/.ssh/config'}],
        notRead: ['ip not in the kube-proxy image'],
      },
    ],
  ])
  const report = {
    kind: 'ServiceReport',
    nodes: [{name: 'node-a', reachable: true, error: null, mode: 'iptables', modeSource: 'x'}],
  }
  const out = withReadVia(report, readVia, ['node-a', 'node-b'])
  assert.deepEqual(out, {
    kind: 'ServiceReport',
    nodes: [
      {name: 'node-a', reachable: true, error: null, mode: 'iptables', modeSource: 'x', readVia: readVia.get('node-a')},
      {
        name: 'node-b',
        reachable: false,
        error: 'API-only (--via none)',
        mode: null,
        modeSource: null,
        implementer: null,
        readVia: readVia.get('node-b'),
      },
    ],
  })
  assert.equal(
    apiOnlyNote(readVia),
    "node checks not done (rules, packet paths, hairpin, kube-proxy's /healthz and /metrics, DNS from the node) on node-b: API-only (--via none); the API-side checks ran",
  )
  assert.equal(apiOnlyNote(new Map([['node-a', readVia.get('node-a')!]])), undefined)
  assert.equal(
    renderReadVia(readVia, ['node-a', 'node-b']),
    [
      'Nodes read via:',
      "  node-a: kube-proxy (pod kube-system/kube-proxy-ax7k2): kube-proxy's Pod runs on node-a and exec into it is allowed; not used: ssh (no Host entry for node-a in ~/.ssh/config)",
      '    not read: ip not in the kube-proxy image',
      '  node-b: not read (API-only): API-only (--via none)',
    ].join('\n'),
  )
})

test('the Pod transports run the same programs as the shell forms: each argv is its NODE_COMMANDS line, word for word', () => {
  for (const [key, argv] of Object.entries(COMMAND_ARGV))
    assert.equal(argv!.join(' '), NODE_COMMANDS[key as keyof typeof NODE_COMMANDS], key)
})

test("the debug Pod's way to the node's own programs: chroot /host before an allow-listed argv, never around nothing or another chroot", () => {
  assert.deepEqual(onNodeRoot(COMMAND_ARGV.routeTable!), ['chroot', '/host', 'ip', 'route', 'show'])
  assert.deepEqual(onNodeRoot(QUERY_ARGV.routeGet({address: '10.0.0.1'})), [
    'chroot',
    '/host',
    'ip',
    '-o',
    'route',
    'get',
    '10.0.0.1',
  ])
  assert.throws(() => onNodeRoot([]), /refusing/)
  assert.throws(() => onNodeRoot(['chroot', '/', 'sh']), /refusing/)
})

test("kube-proxy's Pod: a network section whose program fails is said not read in its place, never empty; a program the image lacks stays in the transport's notes", async () => {
  const access = new PodExecNodeAccess(
    undefined as unknown as KubeConfig,
    {namespace: 'kube-system', name: 'kube-proxy-a', container: 'kube-proxy'},
    1000,
  )
  // The Pod's exec answered by the test: /proc/net/dev without bridge ports, ip's answers, no bridge in the image.
  const answers: Record<
    string,
    {stdout: string; stderr: string; exitCode: number | null} | {kind: 'missing'; tool: string}
  > = {
    'cat /proc/net/dev': {stdout: '', stderr: '', exitCode: 0},
    'ip -o link show': {stdout: '3: cbr0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500\n', stderr: '', exitCode: 0},
    'ip neigh show': {stdout: '', stderr: 'Cannot open netlink socket\nsecond line\n', exitCode: 1},
    'bridge fdb show': {kind: 'missing', tool: 'bridge'},
  }
  Object.assign(access, {execRaw: (argv: string[]) => Promise.resolve(answers[argv.join(' ')])})
  const r = await access.run('network')
  assert.equal(r.kind, 'ran')
  const out = r.kind === 'ran' ? r.stdout.toString() : ''
  assert.equal(
    out,
    '## hairpin\n## links\n3: cbr0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500\n## neigh\n#kpd-not-read 1\tip neigh show\tCannot open netlink socket second line\n## fdb\n',
  )
  assert.deepEqual(parseBridgeState(out).failed, [
    {section: 'neigh', command: 'ip neigh show', code: 1, stderr: 'Cannot open netlink socket second line'},
  ])
  assert.deepEqual(access.notes().missingTools, [
    'bridge not in the kube-proxy image: the bridge FDB not read (the pod-to-bridge-port mapping of the hairpin check)',
  ])
})
