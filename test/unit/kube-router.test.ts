/**
 * kube-router's service proxy judged by the IPVS engine kube-proxy's IPVS mode is judged by: each node's virtual
 * servers (ClusterIP, NodePort, externalIPs) and their real servers, as `ipvsadm -Ln` prints them (recorded), against
 * the EndpointSlices' ready endpoints, and the nodes with one another; the findings say kube-router and restart its Pod.
 */
import assert from 'node:assert/strict'
import {cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {after, describe, test} from 'node:test'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {parseIpvsadm} from '../../src/parse/ipvsadm.js'
import {IpsetState} from '../../src/parse/ipset-save.js'
import type {ClusterState} from '../../src/cluster/types.js'
import {offlineCluster, type OfflineOptions} from '../helpers/offline-cluster.js'
import {checkTester} from '../helpers/check-tester.js'
import {kubeRouterIpvsadm, kubeRouterNodeDump, type KubeRouterFaults} from '../fixtures/kube-router-ipvs.js'
import {kubeRouterPod} from '../fixtures/implementers.js'
import {NODES} from '../fixtures/lab-cluster.js'
import {nodeImplementers} from '../helpers/node-implementers.js'
import {runCli} from '../helpers/run-cli.js'

const NAMES = NODES.map((n) => n.name)
const EXTERNAL_IP = '192.0.2.50'

/**
 * The lab with kube-router's service proxy in kube-proxy's place on both nodes (its Pods, its chains, no KUBE- rule),
 * each node's `ipvsadm -Ln` recorded with its faults; a node left out of `read` had its IPVS state not read.
 */
function kubeRouter(
  faults: Record<string, KubeRouterFaults> = {},
  opts: {annotations?: Record<string, string>; externalIPs?: string[]; read?: string[]} = {},
): OfflineOptions {
  return {
    dumpFor: Object.fromEntries(NODES.map((n) => [n.name, kubeRouterNodeDump(n)])),
    editCluster: (c: ClusterState) => {
      c.implementerObjects = {
        pods: NAMES.map((n) => kubeRouterPod(n, ['--run-router=true', '--run-service-proxy=true'])) as unknown[],
        configMaps: [],
      } as ClusterState['implementerObjects']
      if (opts.externalIPs) c.service.spec!.externalIPs = opts.externalIPs
      if (opts.annotations) c.service.metadata!.annotations = opts.annotations
    },
    editObservation: Object.fromEntries(
      NODES.filter((n) => (opts.read ?? NAMES).includes(n.name)).map((n) => [
        n.name,
        (o) => ({
          ...o,
          ipvs: {
            virtualServers: parseIpvsadm(kubeRouterIpvsadm(n, {externalIPs: opts.externalIPs, ...faults[n.name]})),
            ipsets: IpsetState.parse(''),
            sysctls: {},
          },
        }),
      ]),
    ),
  }
}

const LOOK_B = ['ssh', '--', 'node-b', 'sudo', 'ipvsadm', '-Ln']
const RESTART_B = {
  argv: [['kubectl', '-n', 'kube-system', 'delete', 'pod', 'kube-router-bq4zt']],
  text: null,
  changes: 'cluster' as const,
  node: null,
}

checkTester("kube-router's IPVS state against the EndpointSlices", [
  {
    name: 'both nodes hold the ClusterIP and NodePort virtual servers with the three ready endpoints: nothing to say',
    state: kubeRouter(),
    findings: [],
  },
  {
    name: 'externalIPs: a virtual server per externalIP port on both nodes: nothing to say',
    state: kubeRouter({}, {externalIPs: [EXTERNAL_IP]}),
    findings: [],
  },
  {
    name: "node-b's kube-router left out web-b2 (ready in the slice): missing from both virtual servers, node-b diverges",
    state: kubeRouter({'node-b': {omitRealServer: '10.244.2.11'}}),
    findings: [
      ['KPD-SEP-MISSING', 'node-b', 'error'],
      ['KPD-SEP-MISSING', 'node-b', 'error'],
      ['KPD-NODE-DIVERGES', 'node-b', 'warning'],
    ],
    messages: {
      'KPD-SEP-MISSING node-b': [
        /^node-b: endpoint 10\.244\.2\.11:8080 \(pod web-b2 on node-b\) of shop\/web:http is missing from kube-router's VS TCP 10\.96\.10\.10:80$/,
      ],
      'KPD-NODE-DIVERGES node-b': [
        /^node-b \(kube-router\) sends shop\/web:http to \{10\.244\.1\.10:8080, 10\.244\.2\.10:8080\} while 1 other node\(s\) \(node-a\) send it to \{10\.244\.1\.10:8080, 10\.244\.2\.10:8080, 10\.244\.2\.11:8080\}$/,
      ],
    },
    fixes: {
      'KPD-NODE-DIVERGES node-b': {check: null, fix: RESTART_B, text: null},
    },
  },
  {
    name: 'both nodes keep a real server the EndpointSlice dropped (10.244.2.99): stale in every virtual server, no divergence',
    state: kubeRouter({
      'node-a': {staleRealServer: {ip: '10.244.2.99', port: 8080}},
      'node-b': {staleRealServer: {ip: '10.244.2.99', port: 8080}},
    }),
    findings: [
      ['KPD-SEP-STALE', 'node-a', 'error'],
      ['KPD-SEP-STALE', 'node-a', 'error'],
      ['KPD-SEP-STALE', 'node-b', 'error'],
      ['KPD-SEP-STALE', 'node-b', 'error'],
    ],
    messages: {
      'KPD-SEP-STALE node-b': [
        /^node-b: kube-router's VS TCP 10\.96\.10\.10:80 sends the remaining traffic to 10\.244\.2\.99:8080, in no EndpointSlice and owned by no Pod in shop$/,
      ],
    },
    fixes: {
      'KPD-SEP-STALE node-b': {
        check: [[...LOOK_B], ['grep', '-A4', '--', '10.244.2.99:8080']],
        fix: RESTART_B,
        text: null,
      },
    },
  },
  {
    name: "node-b's kube-router has no ClusterIP virtual server for shop/web: missing, and node-b diverges",
    state: kubeRouter({'node-b': {omitVs: ['ClusterIP']}}),
    findings: [
      ['KPD-SVC-RULE-MISSING', 'node-b', 'error'],
      ['KPD-NODE-DIVERGES', 'node-b', 'warning'],
    ],
    messages: {
      'KPD-SVC-RULE-MISSING node-b': [
        /^node-b: no kube-router IPVS entry for shop\/web:http cluster IP 10\.96\.10\.10:80\/tcp$/,
      ],
    },
    fixes: {
      'KPD-SVC-RULE-MISSING node-b': {
        check: [[...LOOK_B], ['grep', '-A4', '--', '10.96.10.10']],
        fix: RESTART_B,
        text: null,
      },
    },
  },
  {
    name: "node-a's kube-router has no NodePort virtual server on its address",
    state: kubeRouter({'node-a': {omitVs: ['NodePort']}}),
    findings: [['KPD-NODEPORT-MISSING', 'node-a', 'error']],
    messages: {
      'KPD-NODEPORT-MISSING node-a': [
        /^node-a: node port 30080\/tcp of shop\/web:http is missing from kube-router IPVS$/,
      ],
    },
  },
  {
    name: "node-b's kube-router has no virtual server for the externalIP",
    state: kubeRouter({'node-b': {omitVs: ['externalIP']}}, {externalIPs: [EXTERNAL_IP]}),
    findings: [['KPD-SVC-RULE-MISSING', 'node-b', 'error']],
    messages: {
      'KPD-SVC-RULE-MISSING node-b': [/^node-b: no kube-router IPVS entry for shop\/web:http at 192\.0\.2\.50:80$/],
    },
  },
  {
    name: 'DSR (fwmark services): the externalIP is not judged, so its missing virtual server is not a finding',
    state: kubeRouter(
      {'node-b': {omitVs: ['externalIP']}},
      {externalIPs: [EXTERNAL_IP], annotations: {'kube-router.io/service.dsr': 'tunnel'}},
    ),
    findings: [],
  },
  {
    name: "node-b's kube-router holds web-a1 at weight 0 although it is ready",
    state: kubeRouter({'node-b': {weightZeroFor: '10.244.1.10'}}),
    findings: [['KPD-IPVS-WEIGHT-ZERO', 'node-b', 'error']],
    messages: {
      'KPD-IPVS-WEIGHT-ZERO node-b': [
        /^node-b: real server 10\.244\.1\.10:8080 \(pod web-a1\) of kube-router's TCP 10\.96\.10\.10:80 has weight 0 although the endpoint is ready/,
      ],
    },
    fixes: {
      'KPD-IPVS-WEIGHT-ZERO node-b': {
        check: [[...LOOK_B], ['grep', '-A4', '--', '10.96.10.10:80']],
        fix: RESTART_B,
        text: null,
      },
    },
  },
  {
    name: "node-b's IPVS state not read: node-a judged, node-b not (listed as not checked)",
    state: kubeRouter({'node-a': {omitRealServer: '10.244.1.10'}}, {read: ['node-a']}),
    findings: [
      ['KPD-SEP-MISSING', 'node-a', 'error'],
      ['KPD-SEP-MISSING', 'node-a', 'error'],
    ],
  },
])

test("no kube-proxy finding on kube-router's nodes, and what is not checked there is listed, not required", () => {
  const {cluster, observations} = offlineCluster(kubeRouter())
  const d = diagnose(cluster, observations)
  assert.deepEqual(d.findings, [])
  assert.deepEqual(
    d.context.implementers.map((i) => [i.node, i.name, i.kubeProxyJudged]),
    [
      ['node-a', 'kube-router', false],
      ['node-b', 'kube-router', false],
    ],
  )
  assert.deepEqual(d.context.nodes, [])
  assert.deepEqual(
    d.notChecked.filter((n) => n.check === 'proxy-rules').map((n) => [n.node, n.required, n.reason]),
    NAMES.map((node) => [
      node,
      false,
      "kube-router's IPVS virtual and real servers were judged; not checked: its iptables rules (the KUBE-ROUTER-SERVICES chain and the kube-router-svip and kube-router-svip-prt ipsets, the KUBE-ROUTER-HAIRPIN chain), the Service addresses on kube-dummy-if, masquerading and the packet walk",
    ]),
  )
})

test("DSR: the externalIP's fwmark virtual service is listed as not checked", () => {
  const {cluster, observations} = offlineCluster(
    kubeRouter({}, {externalIPs: [EXTERNAL_IP], annotations: {'kube-router.io/service.dsr': 'tunnel'}}),
  )
  const reasons = diagnose(cluster, observations)
    .notChecked.filter((n) => n.check === 'proxy-rules')
    .map((n) => n.reason)
  assert.equal(reasons.length, 2)
  for (const r of reasons)
    assert.match(
      r,
      /; 192\.0\.2\.50: a fwmark virtual service \(kube-router\.io\/service\.dsr\), tied to the address by kube-router's mangle rules, which the doctor does not read$/,
    )
})

test("a kube-router node whose IPVS state was not read: kube-proxy's rules not judged, kube-router's not read (required)", () => {
  const {cluster, observations} = offlineCluster(kubeRouter({}, {read: ['node-a']}))
  const gaps = diagnose(cluster, observations)
    .notChecked.filter((n) => n.check === 'proxy-rules')
    .map((n) => [n.node, n.required, n.reason.replace(/\(.*\)/, '(…)')])
    .sort((a, b) => String(a[0]).localeCompare(String(b[0])))
  assert.equal(gaps.length, 2)
  assert.deepEqual(gaps[1], [
    'node-b',
    true,
    "Services here are implemented by kube-router, not kube-proxy (…): kube-proxy's rules were not judged, and kube-router's Service state was not read; look with: kubectl -n kube-system exec kube-router-bq4zt -- ipvsadm -Ln",
  ])
  assert.deepEqual(gaps[0].slice(0, 2), ['node-a', false])
})

/**
 * The healthy example cluster as it would be recorded with kube-router's service proxy instead of kube-proxy: no
 * kube-proxy Pods or rules; kube-router's Pods, its chains and each node's `ipvsadm -Ln` (with that node's faults).
 */
function kubeRouterBundle(name: string, faults: Record<string, KubeRouterFaults> = {}): string {
  const dir = join(scratch, name)
  cpSync('examples/healthy-cluster', dir, {recursive: true})
  const list = JSON.parse(readFileSync(join(dir, 'pods.json'), 'utf8')) as {
    items: Array<{metadata: {labels?: Record<string, string>}}>
  }
  const pods = list.items.filter((p) => p.metadata.labels?.['k8s-app'] !== 'kube-proxy')
  const routers = NAMES.map((n) => kubeRouterPod(n, ['--run-router=true', '--run-service-proxy=true']))
  writeFileSync(join(dir, 'pods.json'), JSON.stringify({apiVersion: 'v1', kind: 'List', items: [...pods, ...routers]}))
  const configMaps = JSON.parse(readFileSync(join(dir, 'configmaps.json'), 'utf8')) as {
    items: Array<{metadata: {name: string}}>
  }
  const others = configMaps.items.filter((c) => c.metadata.name !== 'kube-proxy')
  writeFileSync(join(dir, 'configmaps.json'), JSON.stringify({apiVersion: 'v1', kind: 'List', items: others}))
  for (const node of NODES) {
    const folder = join(dir, 'nodes', node.name)
    for (const f of ['kube-proxy.json', 'nft-ruleset.txt', 'iptables-nft-save.txt'])
      rmSync(join(folder, f), {force: true})
    writeFileSync(join(folder, 'iptables-save.txt'), kubeRouterNodeDump(node))
    writeFileSync(join(folder, 'ipvsadm.txt'), kubeRouterIpvsadm(node, faults[node.name]))
  }
  return dir
}

const scratch = mkdtempSync(join(tmpdir(), 'kpd-kube-router-'))
after(() => rmSync(scratch, {recursive: true, force: true}))

describe('a kube-router cluster replayed from a bundle (svc --snapshot)', () => {
  test('healthy: no finding, each node names kube-router, its unchecked glue listed as not required, exit 0', async () => {
    const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', kubeRouterBundle('healthy'), '-o', 'json'])
    assert.deepEqual(r.json.findings, [])
    assert.deepEqual(nodeImplementers(r.json), [
      ['node-a', 'kube-router', 'api+node'],
      ['node-b', 'kube-router', 'api+node'],
    ])
    assert.deepEqual(
      r.json.notChecked
        .filter((n: {check: string}) => n.check === 'proxy-rules')
        .map((n: {node: string; required: boolean}) => [n.node, n.required]),
      [
        ['node-a', false],
        ['node-b', false],
      ],
    )
    assert.equal(r.code, 0)
  })

  test("node-b's kube-router missed web-b2 and keeps a stale real server: exact findings, kube-router's Pod restarted, exit 1", async () => {
    const dir = kubeRouterBundle('broken', {
      'node-b': {omitRealServer: '10.244.2.11', staleRealServer: {ip: '10.244.2.99', port: 8080}},
    })
    const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', dir, '-o', 'json'])
    assert.deepEqual(
      r.json.findings.map((f: {code: string; node: string}) => [f.code, f.node]),
      [
        ['KPD-SEP-MISSING', 'node-b'],
        ['KPD-SEP-MISSING', 'node-b'],
        ['KPD-SEP-STALE', 'node-b'],
        ['KPD-SEP-STALE', 'node-b'],
        ['KPD-NODE-DIVERGES', 'node-b'],
      ],
    )
    for (const f of r.json.findings as Array<{fix: {command: string}; message: string}>) {
      assert.equal(f.fix.command, 'kubectl -n kube-system delete pod kube-router-bq4zt')
      assert.doesNotMatch(f.message, /kube-proxy/)
    }
    assert.equal(r.code, 1)
  })
})
