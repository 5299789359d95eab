import {test} from 'node:test'
import assert from 'node:assert/strict'
import {cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join, resolve} from 'node:path'
import {XMLParser, XMLValidator} from 'fast-xml-parser'
import {parseLabelSelector} from '../../src/cluster/label-selector.js'
import {CHECKS} from '../../src/checks/index.js'
import {runCli} from '../helpers/run-cli.js'
import {CachedClusterSource} from '../../src/cluster/cached-source.js'
import {SnapshotClusterSource} from '../../src/cluster/snapshot-source.js'
import {readClusterState} from '../../src/cluster/read-cluster.js'
import {readSnapshotRecordings} from '../../src/diagnosis/gather.js'
import {judgeOnThreads, scanThreads} from '../../src/diagnosis/scan-threads.js'
import {parseNodeRecording} from '../../src/node/read/recording.js'
import {shareNodeReads} from '../../src/node/read/shared-reads.js'

const EXAMPLES = resolve(import.meta.dirname, '../../../examples')

interface ScanFinding {
  service: string
  code: string
  node: string | null
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
function findingsOf(json: any): ScanFinding[] {
  return json.services
    .flatMap(
      (s: {
        service: {namespace: string; name: string}
        findings: Array<{code: string; node: string | null; severity: string}>
      }) =>
        s.findings
          .filter((f) => f.severity !== 'info')
          .map((f) => ({service: `${s.service.namespace}/${s.service.name}`, code: f.code, node: f.node})),
    )
    .sort((a: ScanFinding, b: ScanFinding) =>
      `${a.service} ${a.code} ${a.node}`.localeCompare(`${b.service} ${b.code} ${b.node}`),
    )
}

/** The broken example plus Services a scan meets in every namespace: headless, ExternalName, one with no endpoints. */
function scanBundle(dir: string): string {
  const bundle = join(dir, 'bundle')
  cpSync(join(EXAMPLES, 'broken-cluster'), bundle, {recursive: true})
  const services = JSON.parse(readFileSync(join(bundle, 'services.json'), 'utf8'))
  services.items.push(
    {
      metadata: {name: 'db', namespace: 'shop', labels: {tier: 'data'}},
      spec: {
        type: 'ClusterIP',
        clusterIP: 'None',
        selector: {app: 'db'},
        ports: [{name: 'pg', port: 5432, protocol: 'TCP'}],
      },
    },
    {
      metadata: {name: 'payments', namespace: 'shop', labels: {tier: 'external'}},
      spec: {type: 'ExternalName', externalName: 'payments.example.com'},
    },
    {
      metadata: {name: 'empty', namespace: 'shop', labels: {tier: 'web'}},
      spec: {
        type: 'ClusterIP',
        clusterIP: '10.96.10.99',
        selector: {app: 'nothing'},
        ports: [{name: 'http', port: 80, targetPort: 8080, protocol: 'TCP'}],
      },
    },
  )
  writeFileSync(join(bundle, 'services.json'), JSON.stringify(services))
  const manifest = JSON.parse(readFileSync(join(bundle, 'manifest.json'), 'utf8'))
  manifest.services = ['shop/web', 'shop/db', 'shop/payments', 'shop/empty']
  writeFileSync(join(bundle, 'manifest.json'), JSON.stringify(manifest))
  for (const node of ['node-a', 'node-b']) {
    // kube-proxy failed two rule writes on every node: one warning per node, shown once per Service.
    const status = join(bundle, 'nodes', node, 'kube-proxy.json')
    const kubeProxy = JSON.parse(readFileSync(status, 'utf8'))
    kubeProxy.metrics.kubeproxy_sync_proxy_rules_iptables_restore_failures_total = 2
    writeFileSync(status, JSON.stringify(kubeProxy))
  }
  return bundle
}

test('scan: where some nodes were not read, the node shares count every node asked and say how many were read', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpd-scan-'))
  try {
    const bundle = scanBundle(dir)
    mkdirSync(join(bundle, 'nodes', 'node-c'))
    writeFileSync(join(bundle, 'nodes', 'node-c', 'error.txt'), 'SSH to 10.0.0.3:22 failed: connect ETIMEDOUT\n')
    const r = await runCli(['scan', '-n', 'shop', '--snapshot', bundle])
    assert.equal(r.code, 1)
    // node-c is in no API object: no kube-proxy Pod there is its worst finding, on 1 of the 3 nodes asked.
    assert.match(r.stdout, /│ shop\/web +│ NodePort +│ 3 ready +│ ✗ KPD-PROXY-POD-DOWN +│ 1 of 3 \(2 read\) +│/)
    assert.match(r.stdout, /^ {2}! KPD-PROXY-SYNC-FAILURES \[on 2 of 3 nodes \(2 read\): node-a, node-b\] /m)
    assert.match(r.stdout, /^node node-c not read: SSH to 10\.0\.0\.3:22 failed: connect ETIMEDOUT$/m)
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})

test('scan: every Service of the namespace with the same checks as svc, exact findings, skipped ones with the reason', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpd-scan-'))
  try {
    const bundle = scanBundle(dir)
    const r = await runCli(['scan', '-n', 'shop', '--snapshot', bundle, '-o', 'json'])
    assert.equal(r.code, 1, r.stderr)
    assert.equal(r.json.kind, 'ScanReport')
    assert.equal(r.json.ok, false)
    assert.deepEqual(r.json.counts, {
      services: 4,
      diagnosed: 2,
      skipped: 2,
      withErrors: 2,
      withWarnings: 2,
      withChecksNotRun: 0,
    })
    assert.deepEqual(findingsOf(r.json), [
      {service: 'shop/empty', code: 'KPD-PROXY-SYNC-FAILURES', node: 'node-a'},
      {service: 'shop/empty', code: 'KPD-PROXY-SYNC-FAILURES', node: 'node-b'},
      {service: 'shop/empty', code: 'KPD-SELECTOR-NO-PODS', node: null},
      {service: 'shop/web', code: 'KPD-HAIRPIN-OFF', node: 'node-a'},
      {service: 'shop/web', code: 'KPD-NODE-DIVERGES', node: 'node-b'},
      {service: 'shop/web', code: 'KPD-PROXY-SYNC-FAILURES', node: 'node-a'},
      {service: 'shop/web', code: 'KPD-PROXY-SYNC-FAILURES', node: 'node-b'},
      {service: 'shop/web', code: 'KPD-SEP-MISSING', node: 'node-b'},
      {service: 'shop/web', code: 'KPD-SEP-STALE', node: 'node-b'},
    ])
    assert.deepEqual(
      r.json.skipped.map((s: {name: string; reason: string}) => [s.name, s.reason.split(':')[0]]),
      [
        ['db', 'headless Service (clusterIP'],
        ['payments', 'ExternalName Service'],
      ],
    )
    const svc = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', bundle, '-o', 'json'])
    const web = r.json.services.find((s: {service: {name: string}}) => s.service.name === 'web')
    assert.deepEqual(
      web.findings.map((f: {code: string; node: string}) => `${f.code} ${f.node}`),
      svc.json.findings.map((f: {code: string; node: string}) => `${f.code} ${f.node}`),
      'the same engine: a scanned Service has the findings svc gives it',
    )
    // Each Service's report is written out as it is judged and the document assembled from the pieces: still one
    // document laid out as JSON.stringify lays it out, each Service in svc's shape.
    assert.equal(r.stdout, JSON.stringify(r.json, null, 2) + '\n')
    assert.deepEqual(Object.keys(web), Object.keys(svc.json))
    assert.deepEqual({...web, time: null}, {...svc.json, time: null})
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})

test('scan: nodes with the same chain at other lines each show their own lines (the parse is shared only where bytes and lines match)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpd-scan-'))
  try {
    const bundle = join(dir, 'bundle')
    cpSync(join(EXAMPLES, 'broken-cluster'), bundle, {recursive: true})
    // node-b holds node-a's rules one line further down, each with the same DNAT to a wrong port.
    const dumpOf = (node: string) => join(bundle, 'nodes', node, 'iptables-save.txt')
    const rules = readFileSync(dumpOf('node-a'), 'utf8').replace('10.244.2.10:8080', '10.244.2.10:8081')
    writeFileSync(dumpOf('node-a'), rules)
    writeFileSync(dumpOf('node-b'), rules.replace('\n', '\n# one line more\n'))
    const r = await runCli(['scan', '-n', 'shop', '--snapshot', bundle, '-o', 'json'])
    assert.equal(r.code, 1, r.stderr)
    const web = r.json.services.find((s: {service: {name: string}}) => s.service.name === 'web')
    const evidence = (node: string) =>
      web.findings
        .filter((f: {node: string; evidence?: string[]}) => f.node === node && f.evidence)
        .flatMap((f: {evidence: string[]}) => f.evidence)
        .filter((e: string) => e.includes('10.244.2.10:8081'))
    assert.deepEqual(
      evidence('node-a').map((e: string) => e.split(':')[0]),
      ['nat line 61'],
    )
    assert.deepEqual(
      evidence('node-b').map((e: string) => e.split(':')[0]),
      ['nat line 62'],
    )
    const svc = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', bundle, '-o', 'json'])
    assert.deepEqual({...web, time: null}, {...svc.json, time: null})
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})

test('scan: the human report has one row per Service and the findings grouped by Service then code, nodes listed once', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpd-scan-'))
  try {
    const r = await runCli(['scan', '-n', 'shop', '--snapshot', scanBundle(dir)])
    assert.equal(r.code, 1)
    const lines = r.stdout.split('\n')
    assert.equal(lines[0], '✗ namespace shop: 2 of 2 diagnosed Services are broken (2 skipped; 2 of 2 nodes read)')
    assert.match(r.stdout, /│ shop\/empty +│ ClusterIP +│ 0 ready +│ ✗ KPD-SELECTOR-NO-PODS +│ cluster +│/)
    assert.match(r.stdout, /│ shop\/web +│ NodePort +│ 3 ready +│ ✗ KPD-SEP-MISSING +│ 1 of 2 +│/)
    assert.match(r.stdout, /│ shop\/db +│ ClusterIP +│ – +│ skipped +│/)
    assert.match(
      r.stdout,
      /^ {2}! KPD-PROXY-SYNC-FAILURES \[on 2 of 2 nodes: node-a, node-b\] kube-proxy on each node counts 2 iptables_restore_failures_total$/m,
    )
    assert.equal(
      r.stdout.match(/KPD-PROXY-SYNC-FAILURES \[/g)?.length,
      2,
      'one line per Service for a code found on many nodes',
    )
    assert.match(r.stdout, /^ {2}shop\/payments: ExternalName Service/m)
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})

test('scan -o junit: valid XML, one testcase per Service and check family, failures carry the findings', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpd-scan-'))
  try {
    const r = await runCli(['scan', '-n', 'shop', '--snapshot', scanBundle(dir), '-o', 'junit'])
    assert.equal(r.code, 1)
    assert.equal(XMLValidator.validate(r.stdout), true)
    const doc = new XMLParser({
      ignoreAttributes: false,
      attributeNamePrefix: '',
      isArray: (name) => name === 'testsuite' || name === 'testcase',
    }).parse(r.stdout)
    const suites = doc.testsuites.testsuite as Array<{
      name: string
      failures: string
      skipped: string
      testcase: Array<{name: string; failure?: {type: string; '#text': string}; skipped?: {message: string}}>
    }>
    assert.deepEqual(
      suites.map((s) => [s.name, s.failures, s.skipped]),
      [
        // The policy family is skipped on each judged Service: scan does not judge NetworkPolicies.
        ['shop/empty', '1', '1'],
        ['shop/web', '2', '1'],
        ['shop/db', '0', '1'],
        ['shop/payments', '0', '1'],
      ],
    )
    const web = suites.find((s) => s.name === 'shop/web')!
    assert.deepEqual(
      web.testcase.map((t) => [t.name, t.failure?.type ?? t.skipped?.message ?? null]),
      [
        ['service', null],
        ['endpoints', null],
        ['dns', null],
        ['kube-proxy', null],
        ['rules', 'KPD-SEP-MISSING'],
        ['hairpin', 'KPD-HAIRPIN-OFF'],
        ['path', null],
        [
          'policy',
          'scan does not judge NetworkPolicies (they depend on the client): svc NAME --from POD or --from-namespace NS judges them',
        ],
      ],
    )
    assert.match(
      web.testcase.find((t) => t.name === 'rules')!.failure!['#text'],
      /error KPD-SEP-STALE: node-b: KUBE-SVC-\w+ sends the remaining traffic to 10\.244\.2\.7:8080/,
    )
    assert.equal(doc.testsuites.tests, String(suites.reduce((n, s) => n + s.testcase.length, 0)))
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})

test('scan --fail-on: warnings fail only when asked; -l and --services narrow the Services; bad input is exit 2', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpd-scan-'))
  try {
    const bundle = scanBundle(dir)
    const web = await runCli(['scan', '-n', 'shop', '--snapshot', bundle, '--services', 'web', '-o', 'json'])
    assert.deepEqual(
      web.json.services.map((s: {service: {name: string}}) => s.service.name),
      ['web'],
    )
    const healthy = await runCli(['scan', '-n', 'shop', '--snapshot', join(EXAMPLES, 'healthy-cluster')])
    assert.equal(healthy.code, 0, healthy.stdout)
    const selected = await runCli([
      'scan',
      '-n',
      'shop',
      '--snapshot',
      bundle,
      '-l',
      'tier in (data,external)',
      '-o',
      'json',
    ])
    assert.equal(selected.code, 0, 'only skipped Services: nothing fails')
    assert.deepEqual(
      selected.json.skipped.map((s: {name: string}) => s.name),
      ['db', 'payments'],
    )
    const missing = await runCli(['scan', '-n', 'shop', '--snapshot', bundle, '--services', 'web,nope'])
    assert.equal(missing.code, 2)
    assert.equal(missing.stderr, 'kproxy-doctor: --services names Service(s) not found in namespace "shop": nope\n')
    const badSelector = await runCli(['scan', '-n', 'shop', '--snapshot', bundle, '-l', 'a=(b'])
    assert.equal(badSelector.code, 2)
    assert.match(badSelector.stderr, /^kproxy-doctor: label selector "a=\(b": cannot read "a=\(b"/)
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})

test('scan --fail-on warning: a Service with only warnings fails the run', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpd-scan-'))
  try {
    const bundle = join(dir, 'bundle')
    cpSync(join(EXAMPLES, 'healthy-cluster'), bundle, {recursive: true})
    const status = join(bundle, 'nodes', 'node-b', 'kube-proxy.json')
    const kubeProxy = JSON.parse(readFileSync(status, 'utf8'))
    // kube-proxy on node-b failed three rule writes and recovered: a warning, every path still works.
    kubeProxy.metrics.kubeproxy_sync_proxy_rules_iptables_restore_failures_total = 3
    writeFileSync(status, JSON.stringify(kubeProxy))
    const errorsOnly = await runCli(['scan', '-n', 'shop', '--snapshot', bundle, '-o', 'json'])
    assert.equal(errorsOnly.code, 0)
    assert.deepEqual(findingsOf(errorsOnly.json), [
      {service: 'shop/web', code: 'KPD-PROXY-SYNC-FAILURES', node: 'node-b'},
    ])
    const strict = await runCli(['scan', '-n', 'shop', '--snapshot', bundle, '--fail-on', 'warning'])
    assert.equal(strict.code, 1)
    assert.equal(
      strict.stdout.split('\n')[0],
      '✗ namespace shop: 1 of 1 diagnosed Services have errors or warnings (0 skipped; 2 of 2 nodes read)',
    )
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})

test('label selectors read as kubectl reads them', () => {
  const labels = {app: 'web', tier: 'frontend', 'app.kubernetes.io/part-of': 'shop'}
  const cases: Array<[string, boolean]> = [
    ['app=web', true],
    ['app==web', true],
    ['app=db', false],
    ['app!=db', true],
    ['app!=web', false],
    ['tier', true],
    ['!tier', false],
    ['!canary', true],
    ['tier in (frontend, backend)', true],
    ['tier notin (frontend)', false],
    ['canary notin (yes)', true],
    ['app=web,tier in (frontend),app.kubernetes.io/part-of=shop', true],
    ['app=web,tier=backend', false],
  ]
  for (const [selector, expected] of cases) assert.equal(parseLabelSelector(selector)(labels), expected, selector)
  assert.throws(() => parseLabelSelector('app=web,=x'), /cannot read "=x"/)
})

test('every finding code belongs to a named JUnit check family', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpd-scan-'))
  try {
    const r = await runCli(['scan', '-n', 'shop', '--snapshot', join(EXAMPLES, 'healthy-cluster'), '-o', 'junit'])
    const families = [...r.stdout.matchAll(/<testcase classname="shop\/web" name="([^"]+)"/g)].map((m) => m[1])
    assert.ok(!families.includes('other'), `codes without a family: ${CHECKS.map((c) => c.meta.code).join(', ')}`)
    assert.deepEqual(families, ['service', 'endpoints', 'dns', 'kube-proxy', 'rules', 'hairpin', 'path', 'policy'])
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})

test('scan --threads: Services judged on worker threads give the same report, byte for byte, as on one thread', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpd-scan-'))
  try {
    const bundle = scanBundle(dir)
    // 1500 more Services, enough for every thread to take some (each takes the next 8 as it is free; a worker thread
    // is ready within a second, the scan takes several): copies of web on other addresses (no rules on the nodes for
    // them, no EndpointSlices: each is judged and found broken), every tenth one headless.
    const services = JSON.parse(readFileSync(join(bundle, 'services.json'), 'utf8'))
    const web = services.items.find((s: {metadata: {name: string}}) => s.metadata.name === 'web')
    const copies = Array.from({length: 1500}, (_, i) => ({
      ...web,
      metadata: {...web.metadata, name: `web-${i}`},
      spec: {
        ...web.spec,
        clusterIP: i % 10 === 0 ? 'None' : `10.96.${20 + (i >> 8)}.${(i & 255) + 1}`,
        clusterIPs: undefined,
        ports: web.spec.ports.map((p: object) => ({...p, nodePort: undefined})),
      },
    }))
    services.items.push(...copies)
    writeFileSync(join(bundle, 'services.json'), JSON.stringify(services))
    const manifest = JSON.parse(readFileSync(join(bundle, 'manifest.json'), 'utf8'))
    manifest.services.push(...copies.map((c) => `shop/${c.metadata.name}`))
    writeFileSync(join(bundle, 'manifest.json'), JSON.stringify(manifest))

    const scan = (threads: string, ...more: string[]) =>
      runCli(['scan', '-n', 'shop', '--snapshot', bundle, '--threads', threads, ...more], {}, 120_000)
    const one = await scan('1', '-o', 'json', '--verbose')
    const three = await scan('3', '-o', 'json', '--verbose')
    assert.match(one.stderr, /1352 of 1504 Service\(s\) to diagnose, on 1 thread\(s\)/)
    assert.match(three.stderr, /1352 of 1504 Service\(s\) to diagnose, on 3 thread\(s\)/)
    const perThread = /Services judged per thread: (\d+), (\d+), (\d+)/.exec(three.stderr)
    assert.ok(perThread, three.stderr.slice(-2000))
    const counts = perThread.slice(1).map(Number)
    assert.equal(
      counts.reduce((a, b) => a + b),
      1504,
    )
    assert.ok(
      counts.every((n) => n > 0),
      `every thread judged some Services: ${counts.join(', ')}`,
    )
    assert.equal(three.code, 1, three.stderr.slice(-2000))
    assert.deepEqual([three.json.counts.services, three.json.counts.diagnosed], [1504, 1352])
    const untimed = (out: string) => out.replace(/"time": "[^"]+"/g, '"time": null')
    assert.equal(untimed(three.stdout), untimed(one.stdout))
    // Log lines of the worker threads reach --verbose too: one mode line per node and judged Service, on either count.
    const modeLines = (err: string) => err.split('\n').filter((l) => / proxy mode iptables /.test(l)).length
    assert.equal(modeLines(three.stderr), modeLines(one.stderr))
    assert.ok(modeLines(one.stderr) >= 1352 * 2)
    for (const output of ['table', 'junit']) {
      const a = await scan('1', '-o', output)
      const b = await scan('3', '-o', output)
      assert.equal(b.stdout, a.stdout, output)
      assert.equal(b.code, a.code)
    }
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})

test('scan threads: a worker thread that fails fails the scan with its error', async () => {
  const bundle = join(EXAMPLES, 'broken-cluster')
  const state = await readClusterState(new CachedClusterSource(new SnapshotClusterSource(bundle)), 'shop', 'web')
  const recordings = readSnapshotRecordings(bundle)
  const judged: number[] = []
  await assert.rejects(
    judgeOnThreads({
      states: [{service: state.service, state}],
      observations: recordings.map((r) => parseNodeRecording(r.name, r.rec, r.onDisk)),
      sharedNodes: () => recordings.map((r) => shareNodeReads(r.name, r.rec, r.onDisk)),
      opts: {},
      summarise: () => 'judged here',
      // The worker thread makes its Summarise from this recipe, which throws.
      recipe: {
        module: 'data:text/javascript,export function explode() { throw new Error("summariser exploded") }',
        name: 'explode',
        args: [],
      },
      threads: 2,
      onJudged: (index) => judged.push(index),
    }),
    /summariser exploded/,
  )
  assert.deepEqual(judged, [0], 'this thread judged the one Service; the failure is still the outcome')
})

test('scan threads: --threads beyond one per usable CPU (or 4) is cut to it, each thread holding every node parsed', () => {
  const cases: Array<[requested: number | undefined, services: number, cpus: number, threads: number]> = [
    [64, 10_000, 2, 4],
    [64, 10_000, 16, 16],
    [3, 10_000, 2, 3],
    [undefined, 10_000, 8, 4],
    [undefined, 10_000, 2, 2],
    [undefined, 999, 8, 1],
    [64, 16, 2, 2],
  ]
  for (const [requested, services, cpus, threads] of cases)
    assert.equal(
      scanThreads(requested, services, cpus),
      threads,
      `--threads ${requested} on ${services} Services, ${cpus} CPUs`,
    )
})
