import assert from 'node:assert/strict'
import {cpSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {after, test} from 'node:test'
import {runCli} from '../helpers/run-cli.js'
import {BROKEN_EXAMPLE_TRACE} from '../helpers/example-args.js'

const tmp = mkdtempSync(join(tmpdir(), 'kpd-cli-'))
after(() => rmSync(tmp, {recursive: true, force: true}))

test('the bundled examples: broken gives exit 1 with the first line naming node and step, healthy exit 0', async () => {
  const broken = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', 'examples/broken-cluster', '-o', 'json'])
  assert.equal(broken.code, 1)
  assert.match(broken.json.summary, /breaks at DNAT on node-b/)
  assert.deepEqual(broken.json.findings.map((f: {code: string; node: string}) => `${f.code}@${f.node}`).sort(), [
    'KPD-HAIRPIN-OFF@node-a',
    'KPD-NODE-DIVERGES@node-b',
    'KPD-SEP-MISSING@node-b',
    'KPD-SEP-STALE@node-b',
  ])
  const healthy = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', 'examples/healthy-cluster'])
  assert.equal(healthy.code, 0)
  assert.match(healthy.stdout, /^✓ shop\/web: every traced path works on 2 node\(s\)/)
})

test('the dual-stack example: IPv4 whole, node-b IPv6 endpoint chain DNATs to a wrong port; exactly that, read from ip6tables-save', async () => {
  const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', 'examples/dualstack-cluster', '-o', 'json'])
  assert.equal(r.code, 1, r.stderr)
  assert.deepEqual(r.json.service.clusterIPs, ['10.96.10.10', 'fd00:10:96::10:10'])
  assert.deepEqual(
    r.json.findings.map((f: {code: string; node: string; message: string}) => [f.code, f.node, f.message]),
    [
      [
        'KPD-DNAT-WRONG',
        'node-b',
        'node-b (IPv6): KUBE-SEP-3EIK7ZMJLCQCLWUX DNATs to [fd00:10:244:2::10]:9999, but the endpoint (pod web-b1) is [fd00:10:244:2::10]:8080 (targetPort http)',
      ],
      [
        'KPD-NODE-DIVERGES',
        'node-b',
        'IPv6: node-b sends shop/web:http to {[fd00:10:244:1::10]:8080, [fd00:10:244:2::10]:9999, [fd00:10:244:2::11]:8080} while 1 other node(s) (node-a) send it to {[fd00:10:244:1::10]:8080, [fd00:10:244:2::10]:8080, [fd00:10:244:2::11]:8080}',
      ],
    ],
  )
  const broken = r.json.paths
    .filter((p: {ok: boolean}) => !p.ok)
    .map((p: {node: string; family: string; entry: string}) => `${p.node} ${p.family} ${p.entry}`)
  assert.deepEqual(broken, [
    'node-b IPv6 pod→ClusterIP',
    'node-b IPv6 node→ClusterIP',
    'node-b IPv6 outside→NodePort',
    'node-b IPv6 pod→itself',
  ])
  assert.ok(r.json.paths.filter((p: {family: string}) => p.family === 'IPv4').every((p: {ok: boolean}) => p.ok))
  assert.deepEqual(
    r.json.notChecked.filter((n: {required: boolean}) => n.required),
    [],
  )
  // The same node's IPv6 rules, traced by hand: a third of new connections to the wrong port.
  const t = await runCli([
    'trace',
    '--iptables-save',
    'examples/dualstack-cluster/nodes/node-b/ip6tables-save.txt',
    '--src',
    'fd00:10:244:2::20',
    '--dst',
    'fd00:10:96::10:10',
    '--dport',
    '80',
    '-o',
    'json',
  ])
  assert.equal(t.code, 0, t.stderr)
  assert.deepEqual(t.json.destinations, [
    '[fd00:10:244:1::10]:8080',
    '[fd00:10:244:2::10]:9999',
    '[fd00:10:244:2::11]:8080',
  ])
})

test('the IPVS example (recorded ipvsadm/ipset output): weight stuck at 0 found on node-b', async () => {
  const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', 'examples/ipvs-cluster', '-o', 'json'])
  assert.equal(r.code, 1)
  assert.deepEqual(
    r.json.findings.map((f: {code: string; node: string}) => `${f.code}@${f.node}`),
    ['KPD-IPVS-WEIGHT-ZERO@node-b'],
  )
  assert.deepEqual(
    r.json.nodes.map((n: {mode: string}) => n.mode),
    ['ipvs', 'ipvs'],
  )
  assert.match(r.json.next.check.command, /ipvsadm -Ln/)
  assert.equal(r.json.next.fix.command, 'kubectl -n kube-system delete pod kube-proxy-bx7k2')
  const forced = await runCli([
    'svc',
    'web',
    '-n',
    'shop',
    '--snapshot',
    'examples/ipvs-cluster',
    '-o',
    'json',
    '--proxy-mode',
    'iptables',
  ])
  assert.ok(forced.json.nodes.every((n: {modeSource: string}) => n.modeSource === '--proxy-mode'))
})

test('--explain shows the walk behind a broken path', async () => {
  const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', 'examples/broken-cluster', '--explain'])
  assert.match(r.stdout, /^node-b pod→ClusterIP, node→ClusterIP, outside→NodePort, pod→itself \(http\): ✗ DNAT/m)
  assert.match(
    r.stdout,
    /^✗ 2c +33\.3% :73 → KUBE-SEP-DYSIX5QMVXZZP7LU:59 → DNAT 10\.244\.2\.7:8080 ✗ not a ready endpoint$/m,
  )
})

test('a garbage dump makes that node unreadable with the line; with no readable node the API-side checks are still reported', async () => {
  const dir = join(tmp, 'garbage')
  cpSync('examples/healthy-cluster', dir, {recursive: true})
  writeFileSync(
    join(dir, 'nodes/node-b/iptables-save.txt'),
    '*nat\n:PREROUTING ACCEPT [0:0]\nthis is not a rule\nCOMMIT\n',
  )
  const one = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', dir, '-o', 'json'])
  assert.equal(one.code, 3, 'a node not read: the run is incomplete')
  const b = one.json.nodes.find((n: {name: string}) => n.name === 'node-b')
  assert.match(b.error, /line 3: not iptables-save output/)
  writeFileSync(join(dir, 'nodes/node-a/iptables-save.txt'), '<html>oops</html>\n')
  const none = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', dir, '-o', 'json'])
  assert.equal(none.code, 3)
  assert.match(none.stderr, /^kproxy-doctor: warning: no node could be read: node-a: .*line 1/)
  assert.equal(none.json.summary, '? shop/web: no node could be read, the packet path is unchecked')
  assert.deepEqual(
    none.json.notChecked.map((n: {node: string; check: string; required: boolean}) => [n.node, n.check, n.required]),
    [
      ['node-a', 'node-read', true],
      ['node-b', 'node-read', true],
      [null, 'node-read', true],
      [null, 'live-probes', false],
    ],
  )
  assert.deepEqual(
    none.json.findings.map((f: {code: string; node: string}) => `${f.code}@${f.node}`),
    ['KPD-NODE-UNREADABLE@node-a', 'KPD-NODE-UNREADABLE@node-b'],
  )
  const lenient = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', dir, '--fail-on', 'error'])
  assert.equal(lenient.code, 0, '--fail-on without incomplete: no exit 3')
  const strict = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', dir, '--fail-on', 'warning,incomplete'])
  assert.equal(strict.code, 1, 'a warning finding named by --fail-on wins over incomplete')
})

test('one-line errors with exit 2: unknown Service, unreachable API, unknown context, bad flags', async () => {
  const missing = await runCli(['svc', 'nope', '-n', 'shop', '--snapshot', 'examples/healthy-cluster'])
  assert.equal(missing.code, 2)
  assert.equal(missing.stderr.trim().split('\n').length, 1)
  const kc = join(tmp, 'kubeconfig')
  writeFileSync(
    kc,
    'apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user:\n    token: t\ncurrent-context: x\n',
  )
  const down = await runCli(['svc', 'web', '--kubeconfig', kc, '--timeout', '3'])
  assert.equal(down.code, 2)
  assert.match(down.stderr, /cannot reach the Kubernetes API at https:\/\/127\.0\.0\.1:1: ECONNREFUSED/)
  const ctx = await runCli(['svc', 'web', '--kubeconfig', kc, '--context', 'prod'])
  assert.equal(ctx.code, 2)
  assert.match(ctx.stderr, /context "prod" not found in kubeconfig \(known: x\)/)
  const bad = await runCli(['svc', 'web', '-o', 'xml', '--snapshot', 'examples/healthy-cluster'])
  assert.equal(bad.code, 2)
})

test('trace: JSON contract on a dump, stdin, and line numbers for unreadable input', async () => {
  const args = [...BROKEN_EXAMPLE_TRACE, '--in-iface', 'cbr0', '-o', 'json']
  const r = await runCli(args)
  assert.equal(r.code, 0)
  assert.equal(r.json.verdict, 'DNAT')
  assert.deepEqual(r.json.destinations, ['10.244.1.10:8080', '10.244.2.10:8080', '10.244.2.7:8080'])
  assert.equal(r.json.masquerade, false)
  for (const o of r.json.outcomes)
    assert.ok(
      Math.abs(o.probability - 1 / 3) < 1e-6 &&
        o.steps.every((s: object) => Object.keys(s).join() === 'table,chain,line,rule'),
    )
  const {readFileSync} = await import('node:fs')
  const piped = await runCli(
    ['trace', '--iptables-save', '-', ...args.slice(3)],
    {},
    60_000,
    readFileSync(args[2], 'utf8'),
  )
  assert.deepEqual({...piped.json, time: null}, {...r.json, time: null})
  const bad = join(tmp, 'bad.txt')
  writeFileSync(bad, '*nat\n:A - [0:0]\n-A A -j\nCOMMIT\n')
  const broken = await runCli(['trace', '--iptables-save', bad, '--src', '1.1.1.1', '--dst', '2.2.2.2', '--dport', '1'])
  assert.equal(broken.code, 0, 'chain A is never walked, so its broken rule does not matter')
  // Not the table's last rule: a last rule that looks cut off is left out of a paste, its table read as cut there.
  writeFileSync(bad, '*nat\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -j\n-A PREROUTING -j ACCEPT\nCOMMIT\n')
  const refused = await runCli([
    'trace',
    '--iptables-save',
    bad,
    '--src',
    '1.1.1.1',
    '--dst',
    '2.2.2.2',
    '--dport',
    '1',
  ])
  assert.equal(refused.code, 2)
  assert.match(refused.stderr, /line 3: -j without a target/)
  const notIp = await runCli(['trace', '--iptables-save', bad, '--src', 'pod-a', '--dst', '2.2.2.2', '--dport', '1'])
  assert.equal(notIp.code, 2)
  assert.match(notIp.stderr, /--src pod-a is not an IP address/)
})
