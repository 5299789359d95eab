import assert from 'node:assert/strict'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {describe, test} from 'node:test'
import {labGuard} from '../helpers/lab-guard.js'
import {withLab} from '../helpers/lab-suite.js'
import {runCli, type CliResult} from '../helpers/run-cli.js'
import type {NetnsLab} from '../lab/netns-lab.js'
import {tryRun} from '../lab/sh.js'
import {labAccess} from '../helpers/lab-cli.js'

/**
 * The packet-path faults of the lab (proven with real traffic in packet-path-lab.test.ts), diagnosed end to end: `svc`
 * over the real sshd reads the node (sysctls, routes, conntrack) and names the fault on the right node with its code.
 */
const why = labGuard()

const CLUSTER_IP = '10.96.10.10'
const WEB_B1 = '10.244.2.10'
const WEB_NAME = 'web.shop.svc.cluster.local'
const PATH_CODES = [
  'KPD-NODE-FORWARDING-OFF',
  'KPD-BRIDGE-NF-OFF',
  'KPD-ROUTE-MISSING',
  'KPD-CONNTRACK-STALE',
  'KPD-CONNTRACK-FULL',
]

interface Finding {
  code: string
  node: string | null
  severity: string
  message: string
  check: {command: string; argv: string[][] | null} | null
  fix: {command: string | null; argv: string[][] | null; text: string | null} | null
  text: string | null
  evidence: string[]
}

describe('packet-path faults diagnosed over the real sshd', {skip: why}, () => {
  let lab: NetnsLab
  withLab((l) => (lab = l))

  const svc = (name: string, namespace: string, ...extra: string[]): Promise<CliResult> =>
    runCli(['svc', name, '-n', namespace, ...labAccess(lab), '-o', 'json', ...extra], {}, 150_000)
  const web = (...extra: string[]) => svc('web', 'shop', ...extra)
  /** Every error and warning, as "CODE node", sorted. */
  const problems = (r: CliResult): string[] =>
    (r.json?.findings ?? [])
      .filter((f: Finding) => f.severity !== 'info')
      .map((f: Finding) => `${f.code} ${f.node ?? '-'}`)
      .sort()
  const finding = (r: CliResult, code: string): Finding => r.json.findings.find((f: Finding) => f.code === code)
  const failures = (answers: string[]) => answers.filter((a) => a === '').length
  const direct = (fromPod: string, ip: string, port = 8080) => lab.probe(lab.podNs(fromPod), ip, port, 1).kind

  test('healthy lab: svc web and svc kube-dns have none of the node path findings', async () => {
    await lab.clearPathFaults()
    const r = await web()
    assert.equal(r.code, 0, r.stdout + r.stderr)
    assert.deepEqual(problems(r), [])
    const dns = await svc('kube-dns', 'kube-system')
    assert.deepEqual(
      problems(dns).filter((p) => PATH_CODES.includes(p.split(' ')[0])),
      [],
      dns.stdout + dns.stderr,
    )
  })

  test("(c) net.ipv4.ip_forward=0 on node-a: exactly one finding, KPD-NODE-FORWARDING-OFF on node-a, with node-b's unanswered DNS question as its evidence", async () => {
    lab.setSysctl('node-a', 'net.ipv4.ip_forward', '0')
    try {
      assert.equal(failures(lab.sample(lab.podNs('client-a'), CLUSTER_IP, 80, 3)), 3, 'the fault breaks real traffic')
      // CoreDNS runs on node-a: a pod on node-b really gets no answer, its question is not forwarded to CoreDNS.
      assert.deepEqual(lab.dnsQuery('client-b', WEB_NAME), [], "node-b's DNS through node-a really fails")
      const r = await web()
      assert.equal(r.code, 1, r.stdout + r.stderr)
      // One fault, one finding, on the node where the path breaks: the DNS symptom is evidence, never a second error.
      assert.deepEqual(problems(r), ['KPD-NODE-FORWARDING-OFF node-a'])
      const f = finding(r, 'KPD-NODE-FORWARDING-OFF')
      assert.deepEqual(f.fix?.argv, [
        ['ssh', '-F', lab.sshConfigPath, '--', 'node-a', 'sudo', 'sysctl', '-w', 'net.ipv4.ip_forward=1'],
      ])
      assert.ok(
        f.evidence.some((e) =>
          /^node-b: asking 10\.96\.0\.10 for the A record of web\.shop\.svc\.cluster\.local failed \(.+\): its DNS endpoint 10\.244\.1\.53 \(pod coredns-a\) on node-a is behind this fault$/.test(
            e,
          ),
        ),
        f.evidence.join('\n'),
      )
      // node-b's live probe of web-a1 really fails too (node-a forwards nothing): evidence on the same finding.
      assert.ok(
        f.evidence.some((e) =>
          /^live probe: endpoint 10\.244\.1\.10:8080 \(pod web-a1 on node-a\) answers from node-a \(\d+\/\d+ connected\) but not from node-b \(0\/\d+ connected/.test(
            e,
          ),
        ),
        f.evidence.join('\n'),
      )
      // The headline leads with the cause, and its next step is the cause's fix.
      assert.match(r.json.summary, /^✗ shop\/web: .*node-a/, r.json.summary)
      assert.doesNotMatch(r.json.summary, /DNS|10\.96\.0\.10/)
      assert.deepEqual(r.json.next.fix.argv, f.fix?.argv)
    } finally {
      lab.setSysctl('node-a', 'net.ipv4.ip_forward', '1')
    }
  })

  test('(b2) a stale UDP conntrack entry for cluster DNS on node-a, pinned client-a: svc web (not the DNS Service) finds it, KPD-CONNTRACK-STALE on node-a and nothing else; its conntrack -D fix works', async () => {
    const stalePort = 40055
    lab.clearFaults()
    lab.staleDnsConntrack('client-a', stalePort, '10.244.1.55')
    try {
      assert.deepEqual(lab.dnsQuery('client-a', WEB_NAME, stalePort), [], 'queries from the stale port get no answer')
      assert.deepEqual(lab.dnsQuery('client-a', WEB_NAME), [CLUSTER_IP], 'another port of the same client resolves')
      const keepAsking = setInterval(() => lab.dnsQuery('client-a', WEB_NAME, stalePort), 5000)
      let r: CliResult
      try {
        r = await web()
      } finally {
        clearInterval(keepAsking)
      }
      assert.equal(r.code, 1, r.stdout + r.stderr)
      assert.deepEqual(problems(r), ['KPD-CONNTRACK-STALE node-a'])
      const f = finding(r, 'KPD-CONNTRACK-STALE')
      assert.equal(
        f.message,
        `node-a: 1 conntrack entry for the cluster DNS Service kube-system/kube-dns:dns (UDP 10.96.0.10:53) still DNAT to 10.244.1.55:53, which is no ready DNS endpoint: 10.244.1.100:${stalePort} get no answer, so names do not resolve for them (each new packet refreshes a UDP entry, so a client that keeps asking from the same port never recovers)`,
      )
      const fix = [
        'conntrack',
        '-D',
        '-p',
        'udp',
        '--orig-dst',
        '10.96.0.10',
        '--orig-port-dst',
        '53',
        '--reply-src',
        '10.244.1.55',
      ]
      assert.deepEqual(f.fix?.argv, [['ssh', '-F', lab.sshConfigPath, '--', 'node-a', 'sudo', ...fix]])
      assert.equal(tryRun('ip', ['netns', 'exec', lab.nodeNs('node-a'), ...fix]).code, 0)
      assert.deepEqual(
        lab.dnsQuery('client-a', WEB_NAME, stalePort),
        [CLUSTER_IP],
        'after the fix the port works again',
      )
      const after = await web()
      assert.deepEqual(problems(after), [])
    } finally {
      lab.clearFaults()
    }
  })

  test('(d) bridge-nf-call-iptables=0 on node-a: KPD-BRIDGE-NF-OFF on node-a naming web-a1, and nothing else', async () => {
    lab.clearFaults()
    lab.setSysctl('node-a', 'net.bridge.bridge-nf-call-iptables', '0')
    try {
      const answers = lab.sample(lab.podNs('client-a'), CLUSTER_IP, 80, 18)
      assert.ok(!answers.includes('web-a1') && failures(answers) > 0, `the fault breaks real traffic: ${answers}`)
      const r = await web()
      assert.equal(r.code, 1, r.stdout + r.stderr)
      assert.deepEqual(problems(r), ['KPD-BRIDGE-NF-OFF node-a'])
      assert.match(finding(r, 'KPD-BRIDGE-NF-OFF').message, /DNATed to 10\.244\.1\.10 \(pod web-a1\) on the same node/)
    } finally {
      lab.setSysctl('node-a', 'net.bridge.bridge-nf-call-iptables', '1')
      lab.clearFaults()
    }
  })

  test('(k) route_localnet=0 on node-b: 127.0.0.1:30080 on node-b fails, its own address still answers; KPD-ROUTE-LOCALNET-OFF on node-b, and nothing else', async () => {
    lab.clearFaults()
    const localhost = () => lab.sample(lab.nodeNs('node-b'), '127.0.0.1', 30080, 6)
    assert.equal(
      failures(localhost()),
      0,
      'healthy: localhost NodePorts answer (route_localnet=1, as kube-proxy sets it)',
    )
    lab.setSysctl('node-b', 'net.ipv4.conf.all.route_localnet', '0')
    try {
      assert.equal(failures(localhost()), 6, 'the fault breaks real traffic to 127.0.0.1:30080')
      assert.equal(
        failures(lab.sample(lab.nodeNs('node-b'), '10.200.0.12', 30080, 6)),
        0,
        "the node's own address still answers",
      )
      const r = await web()
      assert.equal(r.code, 0, r.stdout + r.stderr)
      assert.deepEqual(problems(r), ['KPD-ROUTE-LOCALNET-OFF node-b'])
      const f = finding(r, 'KPD-ROUTE-LOCALNET-OFF')
      assert.match(
        f.message,
        /^node-b: route_localnet is off on cbr0, eth0: connections to 127\.0\.0\.1:30080 \(localhost NodePorts of shop\/web\) on node-b fail/,
      )
      assert.deepEqual(f.fix?.argv, [
        ['ssh', '-F', lab.sshConfigPath, '--', 'node-b', 'sudo', 'sysctl', '-w', 'net.ipv4.conf.all.route_localnet=1'],
      ])
    } finally {
      lab.setSysctl('node-b', 'net.ipv4.conf.all.route_localnet', '1')
    }
    assert.equal(failures(localhost()), 0, 'fixed by the printed command')
  })

  test('scan live: the packet-path reads are made once per node for every Service; ip_forward=0 and a stale DNS entry are found on node-a for the Services they break', async () => {
    lab.clearFaults()
    const scan = (...extra: string[]) => runCli(['scan', ...labAccess(lab), '-o', 'json', ...extra], {}, 150_000)
    const scanned = (r: CliResult) =>
      (r.json?.services ?? [])
        .flatMap((s: {service: {namespace: string; name: string}; findings: Finding[]}) =>
          s.findings
            .filter((f) => f.severity !== 'info')
            .map((f) => `${s.service.namespace}/${s.service.name} ${f.code} ${f.node ?? '-'}`),
        )
        .sort()
    const healthy = await scan('-A')
    assert.equal(healthy.code, 0, healthy.stdout + healthy.stderr)
    assert.deepEqual(scanned(healthy), [])
    const pathGaps = (r: CliResult) =>
      r.json.services.flatMap((s: {notChecked: Array<{check: string; node: string | null}>}) =>
        s.notChecked.filter((n) => ['path-reads', 'sysctls', 'routes', 'conntrack'].includes(n.check)),
      )
    assert.deepEqual(pathGaps(healthy), [], 'every path read was made')
    const stalePort = 40054
    lab.staleDnsConntrack('client-a', stalePort, '10.244.1.54')
    lab.setSysctl('node-a', 'net.ipv4.ip_forward', '0')
    const keepAsking = setInterval(() => lab.dnsQuery('client-a', WEB_NAME, stalePort), 5000)
    try {
      const r = await scan('-A')
      assert.equal(r.code, 1, r.stdout + r.stderr)
      // Each fault once, on node-a, for the Services it breaks: node-b's unanswered DNS question is evidence, the
      // stale DNS entry is the DNS Service's own (a scan judges it apart, not again under every other Service).
      assert.deepEqual(scanned(r), [
        'kube-system/kube-dns KPD-CONNTRACK-STALE node-a',
        'kube-system/kube-dns KPD-NODE-FORWARDING-OFF node-a',
        'shop/web KPD-NODE-FORWARDING-OFF node-a',
      ])
    } finally {
      clearInterval(keepAsking)
      lab.setSysctl('node-a', 'net.ipv4.ip_forward', '1')
      lab.clearFaults()
    }
  })

  test('scan live on 3 threads: the nodes read over SSH are judged by worker threads too, the same report as on one', async () => {
    lab.clearFaults()
    // 1500 more Services in shop (API objects only: no rules, no endpoints), enough for every thread to take some.
    type Obj = {
      metadata: {name: string}
      spec: {clusterIP?: string; clusterIPs?: string[]; ports?: Array<Record<string, unknown>>}
    }
    const published = lab.api.objects.get('services') as Obj[]
    const original = published.find((o) => o.metadata.name === 'web')!
    const copies = Array.from({length: 1500}, (_, i) => ({
      ...original,
      metadata: {...original.metadata, name: `web-${i}`},
      spec: {
        ...original.spec,
        clusterIP: `10.96.${20 + (i >> 8)}.${(i & 255) + 1}`,
        clusterIPs: undefined,
        ports: original.spec.ports?.map((p) => ({...p, nodePort: undefined})),
      },
    }))
    lab.api.set('services', [...published, ...copies])
    try {
      const scan = (threads: string) =>
        runCli(['scan', '-n', 'shop', '--threads', threads, '--verbose', ...labAccess(lab), '-o', 'json'], {}, 150_000)
      const one = await scan('1')
      const three = await scan('3')
      assert.equal(three.code, 1, three.stderr.slice(-2000))
      const counts = (/Services judged per thread: (\d+), (\d+), (\d+)/.exec(three.stderr) ?? []).slice(1).map(Number)
      assert.equal(counts.length, 3, three.stderr.slice(-2000))
      assert.ok(
        counts.every((n) => n > 0),
        `every thread judged some Services: ${counts.join(', ')}`,
      )
      assert.equal(
        counts.reduce((a, b) => a + b),
        three.json.counts.services,
      )
      assert.deepEqual(
        three.json.nodes.map((n: {name: string; reachable: boolean}) => [n.name, n.reachable]),
        [
          ['node-a', true],
          ['node-b', true],
        ],
      )
      const untimed = (out: string) => out.replace(/"time": "[^"]+"/g, '"time": null')
      assert.equal(untimed(three.stdout), untimed(one.stdout))
      const real = three.json.services.find((s: {service: {name: string}}) => s.service.name === 'web')
      assert.deepEqual(
        real.findings.filter((f: Finding) => f.severity !== 'info'),
        [],
        'the real Service is still healthy among the copies',
      )
    } finally {
      lab.publish()
    }
  })

  for (const kind of ['missing', 'unreachable', 'blackhole'] as const) {
    test(`(g) node-a's route to node-b's pod CIDR ${kind}: KPD-ROUTE-MISSING on node-a naming both node-b endpoints, and nothing else`, async () => {
      lab.breakPodRoute('node-a', 'node-b', kind)
      try {
        assert.notEqual(direct('client-a', WEB_B1), 'answer', 'the fault breaks real traffic')
        const r = await web()
        assert.equal(r.code, 1, r.stdout + r.stderr)
        assert.deepEqual(problems(r), ['KPD-ROUTE-MISSING node-a'])
        const f = finding(r, 'KPD-ROUTE-MISSING')
        assert.match(
          f.message,
          /^node-a: no working route to node-b's pod CIDR 10\.244\.2\.0\/24: .*, so node-a cannot reach endpoints 10\.244\.2\.10 \(pod web-b1\), 10\.244\.2\.11 \(pod web-b2\) on node-b$/,
        )
        assert.match(
          f.message,
          kind === 'missing'
            ? /only the default route matches \(via 10\.200\.0\.1 dev eth0\), not a route to node-b \(10\.200\.0\.12\)/
            : new RegExp(`the route is ${kind} `),
        )
      } finally {
        lab.restorePodRoute('node-a', 'node-b')
      }
      assert.equal(direct('client-a', WEB_B1), 'answer')
    })
  }

  test('(b) a stale UDP conntrack entry for cluster DNS on node-a: KPD-CONNTRACK-STALE on node-a; its conntrack -D fix works', async () => {
    const stalePort = 40053
    lab.clearFaults()
    const healthy = await svc('kube-dns', 'kube-system')
    lab.staleDnsConntrack('client-a', stalePort, '10.244.1.54')
    try {
      assert.deepEqual(lab.dnsQuery('client-a', WEB_NAME, stalePort), [], 'queries from the stale port get no answer')
      // The client keeps asking, as resolvers do: each query refreshes the UNREPLIED entry (30 s UDP timeout) while svc runs.
      const keepAsking = setInterval(() => lab.dnsQuery('client-a', WEB_NAME, stalePort), 5000)
      let r: CliResult
      try {
        r = await svc('kube-dns', 'kube-system')
      } finally {
        clearInterval(keepAsking)
      }
      assert.deepEqual(problems(r), [...problems(healthy), 'KPD-CONNTRACK-STALE node-a'].sort(), r.stdout + r.stderr)
      const f = finding(r, 'KPD-CONNTRACK-STALE')
      assert.equal(
        f.message,
        `node-a: 1 conntrack entry for kube-system/kube-dns:dns (UDP 10.96.0.10:53) still DNAT to 10.244.1.54:53, which is no endpoint of the Service: 10.244.1.100:${stalePort} get no answer (each new packet refreshes a UDP entry, so a client that keeps asking from the same port never recovers)`,
      )
      assert.deepEqual(f.fix?.argv, [
        [
          'ssh',
          '-F',
          lab.sshConfigPath,
          '--',
          'node-a',
          'sudo',
          'conntrack',
          '-D',
          '-p',
          'udp',
          '--orig-dst',
          '10.96.0.10',
          '--orig-port-dst',
          '53',
          '--reply-src',
          '10.244.1.54',
        ],
      ])
      // The printed fix, run on the node (the lab logs in as root: the words after sudo).
      const fix = f.fix!.argv![0].slice(6)
      assert.equal(tryRun('ip', ['netns', 'exec', lab.nodeNs('node-a'), ...fix]).code, 0)
      assert.deepEqual(
        lab.dnsQuery('client-a', WEB_NAME, stalePort),
        [CLUSTER_IP],
        'after the fix the port works again',
      )
      const after = await svc('kube-dns', 'kube-system')
      assert.deepEqual(problems(after), problems(healthy))
    } finally {
      lab.clearFaults()
    }
  })

  test('collect then svc --snapshot gives the same path findings as the live run', async () => {
    lab.breakPodRoute('node-a', 'node-b', 'unreachable')
    lab.setSysctl('node-b', 'net.ipv4.ip_forward', '0')
    const dir = mkdtempSync(join(tmpdir(), 'kpd-path-'))
    try {
      const live = await web()
      assert.deepEqual(problems(live), ['KPD-NODE-FORWARDING-OFF node-b', 'KPD-ROUTE-MISSING node-a'])
      const out = join(dir, 'bundle')
      const c = await runCli(['collect', 'svc', 'web', '-n', 'shop', ...labAccess(lab), '--out', out], {}, 150_000)
      assert.equal(c.code, 0, c.stdout + c.stderr)
      const offline = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', out, '-o', 'json'])
      // The same fixes, but the live run's ssh repeats --ssh-config (-F FILE) and a snapshot's cannot know it.
      const withoutF = (argv: string[][] | null) =>
        argv?.map((s) => (s[0] === 'ssh' && s[1] === '-F' ? ['ssh', ...s.slice(3)] : s)) ?? null
      const messages = (r: CliResult) =>
        r.json.findings.map((f: Finding) => [
          f.code,
          f.node,
          f.message,
          withoutF(f.check?.argv ?? null),
          withoutF(f.fix?.argv ?? null),
          f.text,
        ])
      assert.deepEqual(messages(offline), messages(live))
    } finally {
      lab.restorePodRoute('node-a', 'node-b')
      lab.setSysctl('node-b', 'net.ipv4.ip_forward', '1')
      rmSync(dir, {recursive: true, force: true})
    }
  })

  test('nftables mode: (c) and (g) give the same node findings', async () => {
    const baseline = await (async () => {
      lab.setMode('node-a', 'nftables')
      lab.setMode('node-b', 'nftables')
      return problems(await web())
    })()
    try {
      assert.deepEqual(
        baseline.filter((p) => PATH_CODES.includes(p.split(' ')[0])),
        [],
      )
      lab.setSysctl('node-a', 'net.ipv4.ip_forward', '0')
      try {
        assert.equal(failures(lab.sample(lab.podNs('client-a'), CLUSTER_IP, 80, 3)), 3, 'the fault breaks real traffic')
        assert.deepEqual(problems(await web()), [...baseline, 'KPD-NODE-FORWARDING-OFF node-a'].sort())
      } finally {
        lab.setSysctl('node-a', 'net.ipv4.ip_forward', '1')
      }
      lab.breakPodRoute('node-a', 'node-b', 'missing')
      try {
        assert.notEqual(direct('client-a', WEB_B1), 'answer', 'the fault breaks real traffic')
        assert.deepEqual(problems(await web()), [...baseline, 'KPD-ROUTE-MISSING node-a'].sort())
      } finally {
        lab.restorePodRoute('node-a', 'node-b')
      }
    } finally {
      lab.setMode('node-a', 'iptables')
      lab.setMode('node-b', 'iptables')
    }
  })
})
