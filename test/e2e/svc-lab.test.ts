import assert from 'node:assert/strict'
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {describe, test} from 'node:test'
import {labGuard} from '../helpers/lab-guard.js'
import {runCli, type CliResult} from '../helpers/run-cli.js'
import type {NetnsLab} from '../lab/netns-lab.js'
import {withLab} from '../helpers/lab-suite.js'
import {runAsync, tryRun} from '../lab/sh.js'
import {labAccess, labSvc} from '../helpers/lab-cli.js'

const why = labGuard()

const CLUSTER_IP = '10.96.10.10'
const NODE_A = '10.200.0.11'
const NODE_B = '10.200.0.12'

describe('svc against the netns lab', {skip: why}, () => {
  let lab: NetnsLab
  withLab((l) => (lab = l))

  const doctor = (...extra: string[]): Promise<CliResult> => labSvc(lab, '-o', 'json', ...extra)

  const codes = (r: CliResult, node?: string | null, severity = 'error') =>
    (r.json?.findings ?? [])
      .filter(
        (f: {node: string | null; severity: string}) =>
          (node === undefined || f.node === node) && f.severity === severity,
      )
      .map((f: {code: string}) => f.code)

  const path = (r: CliResult, node: string, entry: string) =>
    r.json.paths.find((p: {node: string; entry: string}) => p.node === node && p.entry === entry)

  const failures = (answers: string[]) => answers.filter((a) => a === '').length

  test('kubectl reads the test API server', async () => {
    const r = await runAsync('kubectl', [
      '--kubeconfig',
      lab.kubeconfigPath,
      'get',
      'svc',
      'web',
      '-n',
      'shop',
      '-o',
      'jsonpath={.spec.clusterIP}',
    ])
    assert.equal(r.code, 0, r.stderr)
    assert.equal(r.stdout.trim(), CLUSTER_IP)
    const slices = await runAsync('kubectl', [
      '--kubeconfig',
      lab.kubeconfigPath,
      'get',
      'endpointslices',
      '-n',
      'shop',
      '-l',
      'kubernetes.io/service-name=web',
      '-o',
      'jsonpath={.items[*].endpoints[*].addresses[0]}',
    ])
    assert.equal(slices.code, 0, slices.stderr)
    assert.deepEqual(slices.stdout.trim().split(' ').sort(), ['10.244.1.10', '10.244.2.10', '10.244.2.11'])
  })

  test('healthy cluster: traffic works, exit 0, no error finding, every path ✓', async () => {
    const answers = lab.sample(lab.podNs('client-a'), CLUSTER_IP, 80, 6)
    assert.equal(failures(answers), 0, `healthy lab must answer: ${answers}`)
    const r = await doctor()
    assert.equal(r.code, 0, r.stdout + r.stderr)
    assert.deepEqual(codes(r), [])
    assert.equal(r.json.ok, true)
    assert.match(r.json.summary, /^✓ shop\/web/)
    // Read over SSH with probes: every check the run was expected to make was made.
    assert.deepEqual(
      r.json.notChecked.filter((n: {required: boolean}) => n.required),
      [],
    )
    assert.ok(r.json.paths.length >= 8)
    assert.ok(
      r.json.paths.every((p: {ok: boolean}) => p.ok === true),
      JSON.stringify(r.json.paths.filter((p: {ok: boolean}) => !p.ok)),
    )
    assert.deepEqual(
      r.json.nodes.map((n: {reachable: boolean}) => n.reachable),
      [true, true],
    )
    assert.deepEqual(
      r.json.nodes.map((n: {modeSource: string}) => n.modeSource),
      ["kube-proxy's /proxyMode on the node", "kube-proxy's /proxyMode on the node"],
    )
  })

  test('ClientIP session affinity: clients stick (real traffic); rules without it are found', async () => {
    lab.services[0].affinitySeconds = 10800
    lab.publish()
    lab.clearFaults()
    try {
      const sticky = lab.sample(lab.podNs('client-a'), CLUSTER_IP, 80, 8)
      assert.equal(new Set(sticky).size, 1, `every connection from one client goes to one backend: ${sticky}`)
      const ok = await doctor()
      assert.equal(ok.code, 0, JSON.stringify(ok.json.findings))
      assert.ok(ok.json.findings.every((f: {code: string}) => f.code !== 'KPD-AFFINITY-MISMATCH'))
      lab.applyRules('node-a', {omitAffinity: true})
      const spread = lab.sample(lab.podNs('client-a'), CLUSTER_IP, 80, 12)
      assert.ok(new Set(spread).size > 1, `without the recent rules connections spread: ${spread}`)
      const r = await doctor()
      assert.ok(codes(r, 'node-a', 'warning').includes('KPD-AFFINITY-MISMATCH'), JSON.stringify(r.json.findings))
    } finally {
      lab.services[0].affinitySeconds = undefined
      lab.publish()
      lab.clearFaults()
    }
  })

  test('kube-proxy stuck on node-b: its stale rules come with KPD-PROXY-STUCK and KPD-PROXY-UNHEALTHY, and how long ago it last synced', async () => {
    const now = Math.floor(Date.now() / 1000)
    lab.setKubeProxy('node-b', {healthy: false, lastSync: now - 900, lastQueued: now - 30, restoreFailures: 4})
    lab.applyRules('node-b', {omitEndpoint: '10.244.2.11'})
    try {
      const r = await doctor()
      assert.equal(r.code, 1)
      const b = r.json.findings.filter((f: {node: string}) => f.node === 'node-b').map((f: {code: string}) => f.code)
      for (const code of ['KPD-PROXY-UNHEALTHY', 'KPD-PROXY-STUCK', 'KPD-PROXY-SYNC-FAILURES', 'KPD-SEP-MISSING'])
        assert.ok(b.includes(code), `${code} in ${b}`)
      assert.ok(
        b.indexOf('KPD-PROXY-STUCK') < b.indexOf('KPD-SEP-MISSING'),
        'the cause is listed next to, before, the stale rules',
      )
      const stuck = r.json.findings.find((f: {code: string}) => f.code === 'KPD-PROXY-STUCK')
      assert.match(stuck.message, /last successful sync was 15 min ago/)
      assert.match(
        r.json.findings.find((f: {code: string}) => f.code === 'KPD-PROXY-UNHEALTHY').message,
        /answers \/healthz with 503/,
      )
      assert.deepEqual(codes(r, 'node-a'), [])
    } finally {
      lab.setKubeProxy('node-b', {healthy: true, lastSync: now, lastQueued: now, restoreFailures: 0})
      lab.clearFaults()
    }
  })

  test("kube-proxy's Pod crash-looping on node-a: KPD-PROXY-POD-DOWN with the reason", async () => {
    lab.kubeProxyPodReady.set('node-a', false)
    lab.publish()
    try {
      const r = await doctor()
      assert.equal(r.code, 1)
      const f = r.json.findings.find((x: {code: string}) => x.code === 'KPD-PROXY-POD-DOWN')
      assert.equal(f.node, 'node-a')
      assert.match(f.message, /CrashLoopBackOff, 7 restarts, last exit Error \(code 1\)/)
    } finally {
      lab.kubeProxyPodReady.set('node-a', true)
      lab.publish()
    }
  })

  test('human report: first line, matrix, no colour when piped', async () => {
    const r = await labSvc(lab)
    assert.equal(r.code, 0)
    const lines = r.stdout.split('\n')
    assert.match(lines[0], /^✓ shop\/web: every traced path works on 2 node\(s\)/)
    assert.match(r.stdout, /│ node-a │ iptables │ ✓/)
    assert.ok(!r.stdout.includes('\u001b['), 'no colour escapes when stdout is not a terminal')
  })

  test('SEP DNAT deleted on node-b: web-a1 gets no traffic from node-b, KPD-SEP-MISSING on node-b only', async () => {
    lab.applyRules('node-b', {dropDnatFor: '10.244.1.10'})
    try {
      const fromB = lab.sample(lab.podNs('client-b'), CLUSTER_IP, 80, 18)
      assert.ok(!fromB.includes('web-a1'), `the jump to web-a1's chain falls through: ${fromB}`)
      assert.ok(
        lab.sample(lab.podNs('client-a'), CLUSTER_IP, 80, 18).includes('web-a1'),
        'node-a still sends to web-a1',
      )
      const r = await doctor()
      assert.equal(r.code, 1)
      assert.ok(codes(r, 'node-b').includes('KPD-SEP-MISSING'), JSON.stringify(r.json.findings))
      assert.deepEqual(codes(r, 'node-a'), [])
      assert.equal(path(r, 'node-b', 'pod→ClusterIP').breaksAt, 'endpoint')
      assert.equal(path(r, 'node-a', 'pod→ClusterIP').ok, true)
      assert.match(r.json.summary, /breaks at endpoint on node-b/)
    } finally {
      lab.clearFaults()
    }
  })

  test('stale endpoint on node-a: some connections time out, KPD-SEP-STALE on node-a', async () => {
    lab.applyRules('node-a', {staleEndpoint: {ip: '10.244.2.99', port: 8080}})
    try {
      const answers = lab.sample(lab.podNs('client-a'), CLUSTER_IP, 80, 24)
      assert.ok(failures(answers) > 0, `the stale endpoint must swallow some connections: ${answers}`)
      const r = await doctor()
      assert.equal(r.code, 1)
      const stale = r.json.findings.find((f: {code: string}) => f.code === 'KPD-SEP-STALE')
      assert.equal(stale.node, 'node-a')
      assert.match(stale.message, /10\.244\.2\.99:8080/)
      assert.match(stale.message, /owned by no Pod/)
      assert.equal(path(r, 'node-a', 'pod→ClusterIP').breaksAt, 'DNAT')
      assert.ok(codes(r, 'node-a', 'warning').includes('KPD-NODE-DIVERGES'))
      assert.ok(codes(r, 'node-a', 'warning').includes('KPD-PROBABILITY-WRONG') === false)
    } finally {
      lab.clearFaults()
    }
  })

  test('NodePort missing on node-b: refused on node-b, fine on node-a, KPD-NODEPORT-MISSING on node-b', async () => {
    lab.applyRules('node-b', {omitNodePorts: true})
    try {
      assert.equal(failures(lab.sample(lab.ns('outside'), NODE_B, 30080, 3)), 3)
      assert.equal(failures(lab.sample(lab.ns('outside'), NODE_A, 30080, 3)), 0)
      const r = await doctor()
      assert.equal(r.code, 1)
      assert.ok(codes(r, 'node-b').includes('KPD-NODEPORT-MISSING'))
      assert.ok(!codes(r, 'node-a').includes('KPD-NODEPORT-MISSING'))
      assert.equal(path(r, 'node-b', 'outside→NodePort').breaksAt, 'nodeport-match')
      assert.equal(path(r, 'node-a', 'outside→NodePort').ok, true)
    } finally {
      lab.clearFaults()
    }
  })

  test('hairpin off on web-a1: web-a1 cannot reach itself, KPD-HAIRPIN-OFF on node-a', async () => {
    lab.setHairpin('web-a1', false)
    try {
      const answers = lab.sample(lab.podNs('web-a1'), CLUSTER_IP, 80, 24)
      assert.ok(!answers.includes('web-a1'), `web-a1 must never reach itself: ${answers}`)
      assert.ok(failures(answers) > 0, `the self-chosen connections must fail: ${answers}`)
      const r = await doctor()
      assert.equal(r.code, 1)
      const f = r.json.findings.find((x: {code: string}) => x.code === 'KPD-HAIRPIN-OFF')
      assert.equal(f.node, 'node-a')
      assert.match(f.message, /web-a1/)
      assert.equal(path(r, 'node-a', 'pod→itself').breaksAt, 'bridge/hairpin')
    } finally {
      lab.setHairpin('web-a1', true)
    }
    lab.clearFaults()
    assert.ok(
      lab.sample(lab.podNs('web-a1'), CLUSTER_IP, 80, 24).includes('web-a1'),
      'with hairpin back on, web-a1 reaches itself',
    )
  })

  test('hairpin off on an idle web-a1 (no FDB entry for its port): the CNI result cache still maps it, KPD-HAIRPIN-OFF', async () => {
    lab.setHairpin('web-a1', false)
    lab.forgetPod('web-a1', true)
    try {
      const r = await doctor()
      assert.equal(r.code, 1)
      const f = r.json.findings.find((x: {code: string}) => x.code === 'KPD-HAIRPIN-OFF')
      assert.equal(f?.node, 'node-a', JSON.stringify(r.json.findings))
      assert.match(f.message, /pod web-a1 sits on cbr0 port vweb-a1 with hairpin_mode 0/)
      assert.ok(
        f.evidence.some((e: string) =>
          /^pod 10\.244\.1\.10 → vweb-a1: CNI result cache \(\/var\/lib\/cni\/results\/cbr0-[0-9a-f]{64}-eth0\)$/.test(
            e,
          ),
        ),
        f.evidence.join('\n'),
      )
      assert.equal(r.json.findings.filter((x: {code: string}) => x.code === 'KPD-HAIRPIN-UNMAPPED').length, 0)
    } finally {
      lab.forgetPod('web-a1', false)
      lab.setHairpin('web-a1', true)
    }
  })

  test('KUBE-SERVICES unhooked from PREROUTING on node-a: pods on node-a cannot use the Service, KPD-HOOK-MISSING', async () => {
    lab.applyRules('node-a', {unhookPrerouting: true})
    try {
      assert.equal(failures(lab.sample(lab.podNs('client-a'), CLUSTER_IP, 80, 3)), 3)
      assert.equal(failures(lab.sample(lab.podNs('client-b'), CLUSTER_IP, 80, 3)), 0)
      const r = await doctor()
      assert.equal(r.code, 1)
      assert.ok(codes(r, 'node-a').includes('KPD-HOOK-MISSING'))
      assert.deepEqual(codes(r, 'node-b'), [])
      assert.equal(path(r, 'node-a', 'pod→ClusterIP').breaksAt, 'entry')
      assert.equal(path(r, 'node-a', 'node→ClusterIP').ok, true, 'OUTPUT is still hooked')
    } finally {
      lab.clearFaults()
    }
  })

  test('MASQUERADE missing on node-a: NodePort traffic to other nodes loses its replies, KPD-MASQ-MISSING', async () => {
    lab.applyRules('node-a', {omitMasquerade: true})
    try {
      const answers = lab.sample(lab.ns('outside'), NODE_A, 30080, 12)
      assert.ok(failures(answers) > 0, `connections sent on to node-b must fail: ${answers}`)
      assert.ok(
        !answers.includes('web-b1') && !answers.includes('web-b2'),
        `no answer can come back from node-b: ${answers}`,
      )
      const r = await doctor()
      assert.equal(r.code, 1)
      assert.ok(codes(r, 'node-a').includes('KPD-MASQ-MISSING'))
      assert.equal(path(r, 'node-a', 'outside→NodePort').breaksAt, 'masquerade')
    } finally {
      lab.clearFaults()
    }
  })

  test('DNAT to the wrong target port on node-a: refused, KPD-DNAT-WRONG names the endpoint', async () => {
    lab.applyRules('node-a', {wrongPortFor: {ip: '10.244.2.10', port: 9999}})
    try {
      const answers = lab.sample(lab.podNs('client-a'), CLUSTER_IP, 80, 18)
      assert.ok(
        failures(answers) > 0 && !answers.includes('web-b1'),
        `web-b1 is unreachable through node-a: ${answers}`,
      )
      const r = await doctor()
      assert.equal(r.code, 1)
      const f = r.json.findings.find((x: {code: string}) => x.code === 'KPD-DNAT-WRONG')
      assert.equal(f.node, 'node-a')
      assert.match(f.message, /10\.244\.2\.10:9999/)
      assert.match(f.message, /10\.244\.2\.10:8080/)
    } finally {
      lab.clearFaults()
    }
  })

  test('every backend not ready: REJECTed at once, KPD-NO-READY-ENDPOINTS with each pod and why', async () => {
    for (const p of ['web-a1', 'web-b1', 'web-b2']) lab.setPodReady(p, false)
    try {
      const started = Date.now()
      assert.equal(failures(lab.sample(lab.podNs('client-a'), CLUSTER_IP, 80, 3)), 3)
      assert.ok(Date.now() - started < 2500, 'REJECT answers at once, no timeout')
      const r = await doctor()
      assert.equal(r.code, 1)
      const f = r.json.findings.find((x: {code: string}) => x.code === 'KPD-NO-READY-ENDPOINTS')
      assert.equal(f.node, null)
      assert.equal(f.evidence.length, 3)
      assert.match(
        f.evidence.join('\n'),
        /web-b2 on node-b: container web running but not ready \(readiness probe failing\)/,
      )
      assert.equal(path(r, 'node-a', 'pod→ClusterIP').breaksAt, 'endpoints')
      assert.match(r.json.summary, /none ready/)
    } finally {
      for (const p of ['web-a1', 'web-b1', 'web-b2']) lab.setPodReady(p, true)
    }
  })

  test('one backend not ready: a warning only, exit 0', async () => {
    lab.setPodReady('web-b2', false)
    try {
      const r = await doctor()
      assert.equal(r.code, 0, JSON.stringify(r.json.findings))
      const f = r.json.findings.find((x: {code: string}) => x.code === 'KPD-ENDPOINT-NOT-READY')
      assert.equal(f.node, 'node-b')
      assert.match(f.message, /web-b2/)
    } finally {
      lab.setPodReady('web-b2', true)
    }
  })

  test('DNS down: the name does not resolve, KPD-DNS-NO-ANSWER on every node', async () => {
    await lab.stopDns()
    try {
      const dig = tryRun(
        'ip',
        ['netns', 'exec', lab.podNs('client-a'), 'socat', '-T1', '-u', 'TCP:10.96.0.10:53,connect-timeout=1', 'STDOUT'],
        undefined,
        5000,
      )
      assert.notEqual(dig.code, 0, 'nothing answers on the DNS Service')
      const r = await doctor()
      assert.equal(r.code, 1)
      assert.deepEqual(
        r.json.findings
          .filter((f: {code: string}) => f.code === 'KPD-DNS-NO-ANSWER')
          .map((f: {node: string}) => f.node)
          .sort(),
        ['node-a', 'node-b'],
      )
    } finally {
      lab.startDns()
    }
  })

  test("node-b's sshd refuses port forwarding: DNS is asked with dig on the node instead, no false finding", async () => {
    await lab.restartSshd('node-b', false)
    try {
      const r = await doctor()
      // No finding; the probes and kube-proxy's ports node-b's sshd would not forward are required checks that could
      // not run (exit 3, as docs/output.md says: --no-probe opts out of the probes).
      assert.deepEqual(r.json.findings, [])
      assert.equal(r.code, 3, r.stderr)
      assert.deepEqual(
        r.json.notChecked
          .filter((n: {required: boolean}) => n.required)
          .map((n: {node: string; check: string}) => `${n.check} ${n.node}`),
        ['kube-proxy-healthz node-b', 'kube-proxy-metrics node-b', 'live-probes node-b'],
      )
      const dns = Object.fromEntries(
        r.json.dns.map((d: {node: string; method: string; addresses: string[]}) => [d.node, d]),
      )
      assert.equal(dns['node-a'].method, 'DNS over TCP through an SSH port forward')
      assert.equal(dns['node-b'].method, 'dig/nslookup on the node')
      assert.deepEqual(dns['node-b'].addresses, [CLUSTER_IP])
      assert.equal(
        r.json.nodes.find((n: {name: string}) => n.name === 'node-b').modeSource,
        'the rules on the node',
        'without forwarding, /proxyMode cannot be read',
      )
    } finally {
      await lab.restartSshd('node-b', true)
    }
  })

  test('trace --node reads the dump live and takes the node addresses from the cluster', async () => {
    const r = await runCli([
      'trace',
      '--node',
      'node-b',
      ...labAccess(lab),
      '--src',
      '10.200.0.100',
      '--dst',
      NODE_B,
      '--dport',
      '30080',
      '-o',
      'json',
    ])
    assert.equal(r.code, 0, r.stderr)
    assert.equal(r.json.verdict, 'DNAT')
    assert.deepEqual(r.json.destinations, ['10.244.1.10:8080', '10.244.2.10:8080', '10.244.2.11:8080'])
    assert.equal(r.json.masquerade, true)
  })

  test('an unreachable node is reported; the other is still diagnosed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kpd-ssh-'))
    try {
      const cfg = join(dir, 'ssh_config')
      const closed = lab.sshPorts.get('node-b')! + 1
      writeFileSync(cfg, `Host node-b\n  Port ${closed}\n\nInclude-not-read\n`)
      const base = (await import('node:fs')).readFileSync(lab.sshConfigPath, 'utf8').replace(/Host node-b[\s\S]*$/, '')
      writeFileSync(
        cfg,
        `${base}Host node-b\n  HostName 127.0.0.1\n  Port ${closed}\n  User root\n  IdentityFile ${join(lab.dir, 'id_ed25519')}\n`,
      )
      const r = await runCli([
        'svc',
        'web',
        '-n',
        'shop',
        '--kubeconfig',
        lab.kubeconfigPath,
        '--ssh-config',
        cfg,
        '-o',
        'json',
        '--timeout',
        '3',
      ])
      assert.equal(r.code, 3, r.stderr)
      const b = r.json.nodes.find((n: {name: string}) => n.name === 'node-b')
      assert.equal(b.reachable, false)
      assert.match(b.error, /ECONNREFUSED|refused/)
      assert.ok(codes(r, 'node-b', 'warning').includes('KPD-NODE-UNREADABLE'))
      assert.ok(r.json.paths.some((p: {node: string; ok: boolean}) => p.node === 'node-a' && p.ok))
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })

  test('a hung SSH server times out with a clear message', async () => {
    const {startDaemon} = await import('../lab/sh.js')
    const dir = mkdtempSync(join(tmpdir(), 'kpd-hung-'))
    const port = lab.sshPorts.get('node-b')! + 2
    const silent = startDaemon('socat', [`TCP-LISTEN:${port},bind=127.0.0.1,reuseaddr,fork`, 'EXEC:sleep 30'])
    try {
      const base = (await import('node:fs')).readFileSync(lab.sshConfigPath, 'utf8').replace(/Host node-b[\s\S]*$/, '')
      const cfg = join(dir, 'ssh_config')
      writeFileSync(
        cfg,
        `${base}Host node-b\n  HostName 127.0.0.1\n  Port ${port}\n  User root\n  IdentityFile ${join(lab.dir, 'id_ed25519')}\n`,
      )
      const started = Date.now()
      const r = await runCli([
        'svc',
        'web',
        '-n',
        'shop',
        '--kubeconfig',
        lab.kubeconfigPath,
        '--ssh-config',
        cfg,
        '-o',
        'json',
        '--timeout',
        '2',
      ])
      assert.ok(Date.now() - started < 20_000)
      const b = r.json.nodes.find((n: {name: string}) => n.name === 'node-b')
      assert.equal(b.reachable, false)
      assert.match(b.error, /timed out/)
    } finally {
      silent.kill('SIGKILL')
      rmSync(dir, {recursive: true, force: true})
    }
  })

  test('unknown host key is refused unless --insecure-ignore-host-key, which warns; the API-side checks are still reported', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kpd-kh-'))
    try {
      const cfg = join(dir, 'ssh_config')
      writeFileSync(
        cfg,
        readFileSync(lab.sshConfigPath, 'utf8').replaceAll(
          join(lab.dir, 'known_hosts'),
          join(dir, 'empty_known_hosts'),
        ),
      )
      const refused = await runCli([
        'svc',
        'web',
        '-n',
        'shop',
        '--kubeconfig',
        lab.kubeconfigPath,
        '--ssh-config',
        cfg,
        '-o',
        'json',
      ])
      // No node readable: the API-side checks are still reported, every node listed as not checked (required), and
      // the run is incomplete: exit 3.
      assert.equal(refused.code, 3, refused.stderr)
      assert.match(refused.stderr, /warning: no node could be read: .*not in known_hosts/)
      assert.equal(refused.json.summary, '? shop/web: no node could be read, the packet path is unchecked')
      assert.deepEqual(
        refused.json.notChecked
          .filter((n: {check: string}) => n.check === 'node-read')
          .map((n: {node: string; required: boolean}) => [n.node, n.required]),
        [
          ['node-a', true],
          ['node-b', true],
          [null, true], // the whole run's entry: no node read at all
        ],
      )
      const strict = await runCli([
        'svc',
        'web',
        '-n',
        'shop',
        '--kubeconfig',
        lab.kubeconfigPath,
        '--ssh-config',
        cfg,
        '--fail-on',
        'error',
      ])
      assert.equal(strict.code, 0, '--fail-on without incomplete accepts required checks not made')
      const forced = await runCli([
        'svc',
        'web',
        '-n',
        'shop',
        '--kubeconfig',
        lab.kubeconfigPath,
        '--ssh-config',
        cfg,
        '-o',
        'json',
        '--insecure-ignore-host-key',
      ])
      assert.equal(forced.code, 0)
      assert.match(forced.stderr, /warning: host keys are NOT checked/)
      // Checking turned off by the SSH config, not the flag: the unknown keys are accepted, and each is said.
      const lenientCfg = join(dir, 'ssh_config_lenient')
      writeFileSync(lenientCfg, `StrictHostKeyChecking no\n${readFileSync(cfg, 'utf8')}`)
      const lenient = await runCli([
        'svc',
        'web',
        '-n',
        'shop',
        '--kubeconfig',
        lab.kubeconfigPath,
        '--ssh-config',
        lenientCfg,
        '-o',
        'json',
      ])
      assert.equal(lenient.code, 0, lenient.stderr)
      assert.deepEqual(
        lenient.stderr
          .split('\n')
          .filter((l) => /accepted unchecked/.test(l))
          .map((l) => l.replace(/\[127\.0\.0\.1\]:\d+/, 'ADDRESS'))
          .sort(),
        ['node-a', 'node-b'].map(
          (n) =>
            `kproxy-doctor: warning: ${n}: host key of ${n === 'node-a' ? 'ADDRESS' : 'node-b'} is not in known_hosts and was accepted unchecked (StrictHostKeyChecking in the SSH config): a man-in-the-middle would go unnoticed`,
        ),
      )
      assert.ok(lenient.json.summary.startsWith('✓'), lenient.json.summary)
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })

  test('Service not found: exit 2, one line, the near name suggested', async () => {
    const r = await runCli(['svc', 'wbe', '-n', 'shop', ...labAccess(lab)])
    assert.equal(r.code, 2)
    assert.equal(r.stderr.trim().split('\n').length, 1)
    assert.match(r.stderr, /Service "shop\/wbe" not found.*Did you mean: web\?/)
  })

  test('RBAC 403 names the refused verb and resource; exit 2', async () => {
    lab.api.opts.forbidden = new Set(['list pods shop'])
    try {
      const r = await doctor()
      assert.equal(r.code, 2)
      assert.match(r.stderr, /RBAC forbids list pods in namespace "shop" \(403\)/)
    } finally {
      lab.api.opts.forbidden = undefined
    }
  })

  test('bad token: exit 2 with a 401 message', async () => {
    const kc = lab.api.writeKubeconfig('shop', 'wrong-token')
    const r = await runCli(['svc', 'web', '--kubeconfig', kc, '--ssh-config', lab.sshConfigPath])
    assert.equal(r.code, 2)
    assert.match(r.stderr, /401 Unauthorized/)
  })

  test('collect then --snapshot gives the same diagnosis as live', async () => {
    const out = mkdtempSync(join(tmpdir(), 'kpd-bundle-'))
    lab.applyRules('node-b', {dropDnatFor: '10.244.2.11'})
    try {
      const c = await runCli(['collect', 'svc', 'web', '-n', 'shop', ...labAccess(lab), '--out', out])
      assert.equal(c.code, 0, c.stderr)
      const live = await doctor()
      const offline = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', out, '-o', 'json'])
      assert.equal(offline.code, 1)
      const strip = (r: CliResult) =>
        r.json.findings.map((f: {code: string; node: string}) => `${f.code}@${f.node}`).sort()
      assert.deepEqual(strip(offline), strip(live))
      assert.deepEqual(
        offline.json.paths.map((p: {breaksAt: string}) => p.breaksAt),
        live.json.paths.map((p: {breaksAt: string}) => p.breaksAt),
      )
    } finally {
      lab.clearFaults()
      rmSync(out, {recursive: true, force: true})
    }
  })

  test('clusters without discovery.k8s.io/v1 fall back to v1 Endpoints', async () => {
    lab.api.opts.withoutEndpointSlices = true
    lab.api.set('endpoints', [
      {
        metadata: {name: 'kube-dns', namespace: 'kube-system'},
        subsets: [
          {
            addresses: [{ip: '10.244.1.53', nodeName: 'node-a'}],
            ports: [
              {name: 'dns-tcp', port: 53, protocol: 'TCP'},
              {name: 'dns', port: 53, protocol: 'UDP'},
            ],
          },
        ],
      },
      {
        metadata: {name: 'web', namespace: 'shop'},
        subsets: [
          {
            addresses: [
              {ip: '10.244.1.10', nodeName: 'node-a', targetRef: {kind: 'Pod', name: 'web-a1'}},
              {ip: '10.244.2.10', nodeName: 'node-b'},
              {ip: '10.244.2.11', nodeName: 'node-b'},
            ],
            ports: [{name: 'http', port: 8080, protocol: 'TCP'}],
          },
        ],
      },
    ])
    try {
      const r = await doctor()
      assert.equal(r.code, 0, JSON.stringify(r.json?.findings) + r.stderr)
      assert.equal(r.json.endpoints.source, 'Endpoints')
      assert.equal(r.json.endpoints.ready, 3)
    } finally {
      lab.api.opts.withoutEndpointSlices = false
    }
  })
})
