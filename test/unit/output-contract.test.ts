/**
 * One output contract: `svc`, `scan` and `trace` print documents of one shape (apiVersion, kind, toolVersion) in JSON
 * and YAML, each valid against schema/report.schema.json (runCli validates every one it reads); `-o junit` on svc and
 * scan, `-q` where `-v` is; one vocabulary for what to do (check:, fix (changes …):, hint:).
 */
import assert from 'node:assert/strict'
import {readFileSync} from 'node:fs'
import {test} from 'node:test'
import {runCli} from '../helpers/run-cli.js'
import {schemaErrors} from '../helpers/report-schema.js'
import {offlineCluster} from '../helpers/offline-cluster.js'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {assertKubectlParses, kubectlInstalled} from '../helpers/kubectl-parse.js'

/** A document with every `time` (when it was made: each run differs) left out, at any depth. */
const withoutTimes = (doc: unknown): unknown =>
  JSON.parse(JSON.stringify(doc, (key, value) => (key === 'time' ? undefined : value)))

const version = JSON.parse(readFileSync('package.json', 'utf8')).version
const svc = ['svc', 'web', '-n', 'shop', '--snapshot', 'examples/broken-cluster']
const scan = ['scan', '-n', 'shop', '--snapshot', 'examples/broken-cluster']
const trace = [
  'trace',
  '--iptables-save',
  'examples/broken-cluster/nodes/node-b/iptables-save.txt',
  '--src',
  '10.244.2.100',
  '--dst',
  '10.96.10.10',
  '--dport',
  '80',
  '--in-iface',
  'cbr0',
]

for (const [args, kind, code] of [
  [svc, 'ServiceReport', 1],
  [scan, 'ScanReport', 1],
  [trace, 'TraceReport', 0],
] as const) {
  test(`${args[0]} -o json and -o yaml: one document of kind ${kind} with apiVersion and toolVersion, valid, the same in both`, async () => {
    const json = await runCli([...args, '-o', 'json'])
    const yaml = await runCli([...args, '-o', 'yaml'])
    assert.equal(json.code, code, json.stderr)
    assert.equal(yaml.code, code, yaml.stderr)
    assert.deepEqual(Object.keys(json.json).slice(0, 4), ['apiVersion', 'kind', 'toolVersion', 'time'])
    assert.equal(json.json.apiVersion, 'kproxy-doctor/v3')
    assert.equal(json.json.kind, kind)
    assert.equal(json.json.toolVersion, version)
    assert.equal(schemaErrors(json.json, args[0] as 'svc' | 'scan' | 'trace'), null)
    assert.deepEqual(withoutTimes(yaml.json), withoutTimes(json.json))
  })

  test(`${args[0]} that cannot run: an Error document in JSON and YAML, exit 2`, async () => {
    for (const format of ['json', 'yaml']) {
      const r = await runCli([
        ...args.map((a) => a.replace('examples/broken-cluster', '/nonexistent/bundle')),
        '-o',
        format,
      ])
      assert.equal(r.code, 2, r.stderr)
      assert.equal(r.json?.kind, 'Error', r.stdout)
      assert.equal(r.json.apiVersion, 'kproxy-doctor/v3')
      assert.equal(r.json.toolVersion, version)
    }
  })
}

test('a document of one command is not taken for another: the schema tells the kinds apart', async () => {
  const r = await runCli([...scan, '-o', 'json'])
  assert.match(schemaErrors(r.json, 'svc') ?? '', /kind ScanReport, expected ServiceReport/)
  assert.match(schemaErrors({...r.json, kind: 'ServiceReport'}) ?? '', /must/)
})

test('scan -q prints only the verdict line, with the same exit code; -q with -o json is refused', async () => {
  const full = await runCli(scan)
  const quiet = await runCli([...scan, '-q'])
  assert.equal(quiet.code, full.code)
  assert.equal(quiet.code, 1)
  assert.deepEqual(quiet.stdout.trimEnd().split('\n'), [full.stdout.split('\n')[0]])
  const both = await runCli([...scan, '-q', '-o', 'json'])
  assert.equal(both.code, 2)
  assert.match(both.stderr, /--quiet prints only the verdict line of the table: it cannot be combined with -o json/)
})

test('svc -o junit: the Service as one testsuite, a failing family carries its check and fix lines', async () => {
  const r = await runCli([...svc, '-o', 'junit'])
  assert.equal(r.code, 1)
  assert.match(r.stdout, /^<\?xml version="1\.0" encoding="UTF-8"\?>\n<testsuites name="kproxy-doctor scan"/)
  assert.match(r.stdout, /<testsuite name="shop\/web" tests="\d+" failures="[1-9]\d*"/)
  assert.match(
    r.stdout,
    /<failure type="KPD-SEP-MISSING"[^>]*>error KPD-SEP-MISSING: [^\n]*\ncheck: ssh -- node-b sudo iptables-save \| grep -- KUBE-SVC-67NZLRHBNDSAWJRO\nfix \(changes the cluster\): kubectl -n kube-system delete pod kube-proxy-bx7k2/,
  )
  const scanXml = await runCli([...scan, '-o', 'junit'])
  const suite = (xml: string) => /<testsuite name="shop\/web"[\s\S]*?<\/testsuite>/.exec(xml)?.[0]
  assert.equal(suite(r.stdout), suite(scanXml.stdout), "svc's testsuite is the one scan writes for the Service")
})

test('one vocabulary in svc and scan: check:, fix (changes …):, hint:; never next: or a bare fix:', async () => {
  for (const args of [svc, scan]) {
    const r = await runCli(args)
    assert.doesNotMatch(r.stdout, /^\s*(next|fix):/m, args[0])
    assert.match(r.stdout, /^\s+check: ssh -- node-b sudo iptables-save \| grep -- /m, args[0])
    assert.match(
      r.stdout,
      /^\s+fix \(changes node-a\): ssh -- node-a sudo bridge link set dev vweb-a1 hairpin on$/m,
      args[0],
    )
    assert.match(
      r.stdout,
      /^\s+fix \(changes the cluster\): kubectl -n kube-system delete pod kube-proxy-bx7k2$/m,
      args[0],
    )
  }
})

test(
  'every kubectl check and fix of the examples parses as kubectl reads it (it gets as far as the API server)',
  {skip: !kubectlInstalled && 'kubectl is not installed'},
  async () => {
    const commands = new Set<string>()
    for (const example of ['broken-cluster', 'ipvs-cluster', 'healthy-cluster']) {
      const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', `examples/${example}`, '-o', 'json'])
      for (const f of [...r.json.findings, r.json.next].filter(Boolean))
        for (const argv of [f.check?.argv, f.fix?.argv])
          if (argv?.[0][0] === 'kubectl') commands.add(JSON.stringify(argv[0]))
    }
    // kube-proxy's log where no Pod of it is known: the Pods on the node, by field selector (kubectl logs has none).
    const {cluster, observations} = offlineCluster({
      editObservation: {'node-b': (o) => ({...o, kubeProxy: {proxyMode: 'iptables', healthz: {status: 503}}})},
    })
    const unhealthy = diagnose(cluster, observations).findings.find((f) => f.code === 'KPD-PROXY-UNHEALTHY')
    assert.ok(unhealthy?.check)
    commands.add(JSON.stringify(unhealthy.check.argv[0]))
    // The restart of kube-proxy by its Pod's name, and the Pods on a node where no Pod of it is known.
    assert.ok(commands.has(JSON.stringify(['kubectl', '-n', 'kube-system', 'delete', 'pod', 'kube-proxy-bx7k2'])))
    assert.ok(commands.size >= 2, [...commands].join('\n'))
    for (const command of commands) assertKubectlParses(JSON.parse(command) as string[], command)
  },
)
