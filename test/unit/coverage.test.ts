import assert from 'node:assert/strict'
import {describe, test} from 'node:test'
import {Chalk} from 'chalk'
import {diagnose, type DiagnoseOptions} from '../../src/diagnosis/diagnose.js'
import type {NodeReadVia} from '../../src/diagnosis/choose-transport.js'
import {PROBES_OFF} from '../../src/diagnosis/probe-stage.js'
import type {NodeObservation} from '../../src/node/observation.js'
import {buildReport, exitCode, parseFailOn, type Report} from '../../src/report/report.js'
import {renderNotChecked} from '../../src/report/coverage-human.js'
import {renderExplainTree} from '../../src/report/explain-tree.js'
import {buildScanReport, scanExitCode} from '../../src/report/scan-report.js'
import {renderJunit} from '../../src/report/junit.js'
import {renderScanHuman} from '../../src/report/scan-human.js'
import {offlineCluster, type OfflineOptions} from '../helpers/offline-cluster.js'
import {runCli} from '../helpers/run-cli.js'
import {IpsetState} from '../../src/parse/ipset-save.js'
import {parseNodeRecording} from '../../src/node/read/recording.js'
import {defaultKubeProxyConfig} from '../../src/cluster/kube-proxy-config.js'
import type {ClusterState} from '../../src/cluster/types.js'
import {kubeProxyRules} from '../fixtures/kube-proxy-rules.js'
import {DNS, NODES, WEB, labPods} from '../fixtures/lab-cluster.js'
import {IptablesSave} from '../../src/parse/iptables-save.js'
import {BufferSource} from '../../src/parse/dump-source.js'
import {NftRuleset} from '../../src/parse/nft-ruleset.js'

const META = {toolVersion: '0.0.0', time: '2026-01-01T00:00:00.000Z', context: null}

/** Every node read in full: packet-path reads made (empty), so only what a case changes is not checked. */
const fullyRead = (obs: NodeObservation): NodeObservation => ({
  ...obs,
  path: obs.path ?? {routeLookups: [], conntrack: [], skipped: []},
})

function report(state: OfflineOptions = {}, options: DiagnoseOptions = {}): Report {
  const edits = state.editObservation ?? {}
  const editObservation = Object.fromEntries(
    ['node-a', 'node-b'].map((n) => [
      n,
      (o: NodeObservation) => (edits[n] ?? ((x: NodeObservation) => x))(fullyRead(o)),
    ]),
  )
  const {cluster, observations} = offlineCluster({...state, editObservation})
  return buildReport(diagnose(cluster, observations, {probes: PROBES_OFF, ...options}))
}

/** node, check, required, reason: what a user reads in the JSON (the codes are the check's, asserted once below). */
const rows = (r: Report) => r.notChecked.map((n) => [n.node ?? '-', n.check, n.required, n.reason])

/** A node's iptables-save with no kube-proxy chain. */
const NO_KUBE_PROXY = '*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n'
const PROBES_OFF_ROW = ['-', 'live-probes', false, 'live probes are off (--no-probe): the diagnosis is static only']
const plain = new Chalk({level: 0})
const NO_NODE_READ_ROW = ['-', 'node-read', true, 'no node was read: the packet path on the nodes is unchecked']

/**
 * node-b as recorded where its nft could not run and its iptables-save holds kube-proxy chains left from before a switch
 * to nftables mode (they miss an endpoint that came later), /proxyMode not answering.
 */
const staleNftNode = (o: NodeObservation): NodeObservation => ({
  ...parseNodeRecording(
    'node-b',
    new Map([
      [
        'iptables-save.txt',
        Buffer.from(kubeProxyRules(NODES[1], [WEB, DNS], labPods(), {omitEndpoint: '10.244.2.11'})),
      ],
      ['nft-not-read.txt', Buffer.from('#kpd-not-read 127\tnft list ruleset\tsh: 1: nft: not found\n')],
      ['kube-proxy.json', Buffer.from(JSON.stringify({proxyModeError: 'connect ECONNREFUSED 127.0.0.1:10249'}))],
    ]),
  ),
  path: o.path,
  network: o.network,
  dns: o.dns,
})
const noConfigMap = (c: ClusterState) => {
  c.proxyConfig = defaultKubeProxyConfig('no ConfigMap kube-system/kube-proxy')
}

describe('notChecked: what could not be checked, per node, with the reason', () => {
  test('every node read in full with --no-probe: only the probes are listed, not required; the headline stays ✓ and exit 0, complete', () => {
    const r = report()
    assert.deepEqual(rows(r), [PROBES_OFF_ROW])
    assert.deepEqual(r.notChecked[0].codes, [
      'KPD-VIP-FAILS',
      'KPD-ENDPOINT-CROSS-NODE',
      'KPD-BACKEND-REFUSED',
      'KPD-PROBE-CONTRADICTS',
    ])
    assert.equal(r.summary, '✓ shop/web: every traced path works on 2 node(s)')
    assert.equal(exitCode(r), 0)
  })

  test('a node that could not be read: required; the headline says ? and how many checks did not run; exit 3 (incomplete), 0 when --fail-on leaves incomplete out', () => {
    const r = report({
      editObservation: {
        'node-b': () => ({name: 'node-b', reachable: false, error: 'ssh: connect ECONNREFUSED 10.200.0.12:22'}),
      },
    })
    assert.deepEqual(rows(r), [
      ['node-b', 'node-read', true, 'not read: ssh: connect ECONNREFUSED 10.200.0.12:22'],
      PROBES_OFF_ROW,
    ])
    assert.ok(
      r.notChecked[0].codes.includes('KPD-SEP-MISSING') &&
        r.notChecked[0].codes.includes('KPD-DNS-NO-ANSWER') &&
        !r.notChecked[0].codes.includes('KPD-SELECTOR-NO-PODS'),
    )
    assert.equal(
      r.summary,
      '? shop/web: no fault found in what was checked, but 1 check(s) could not run (see Not checked); 1 warning(s)',
    )
    assert.equal(r.ok, true)
    assert.equal(exitCode(r), 3)
    assert.equal(exitCode(r, {severity: 'error', incomplete: false}), 0)
    assert.equal(
      exitCode(r, {severity: 'warning', incomplete: true}),
      1,
      'a finding --fail-on names wins over incomplete',
    )
  })

  test('an error finding still decides the headline (✗) when checks were also skipped', () => {
    const r = report({
      faults: {'node-a': {dropDnatFor: '10.244.1.10'}},
      editObservation: {'node-b': () => ({name: 'node-b', reachable: false, error: 'timed out'})},
    })
    assert.match(r.summary, /^✗ shop\/web: /)
    assert.deepEqual(rows(r), [['node-b', 'node-read', true, 'not read: timed out'], PROBES_OFF_ROW])
  })

  test("a section of the network read that failed (bridge not on the node, ip refused): the hairpin check not made on that node, required, in the command's words; no finding", () => {
    const r = report({
      editNetwork: {
        'node-a': (t) =>
          t
            .replace(
              /## links[\s\S]*?## neigh/,
              '## links\n#kpd-not-read 1\tip -o link show\tCannot open netlink socket\n## neigh',
            )
            .replace(/## fdb[\s\S]*$/, '## fdb\n#kpd-not-read 127\tbridge fdb show\t/bin/sh: 1: bridge: not found\n'),
      },
    })
    assert.deepEqual(rows(r), [
      ['node-a', 'hairpin', true, 'ip -o link show: exited 1: Cannot open netlink socket'],
      ['node-a', 'hairpin', true, 'bridge fdb show: not available on the node (/bin/sh: 1: bridge: not found)'],
      PROBES_OFF_ROW,
    ])
    assert.deepEqual(r.notChecked[0].codes, ['KPD-HAIRPIN-OFF', 'KPD-HAIRPIN-UNMAPPED'])
    assert.deepEqual(r.findings, [])
    assert.equal(exitCode(r), 3)
  })

  test('a DNS question that could not be asked from a node: required, no DNS finding', () => {
    const error = 'no TCP to the server; and the node has neither dig nor nslookup'
    const r = report({dns: {'node-a': {addresses: [], method: 'none', error}}})
    assert.deepEqual(rows(r), [
      ['node-a', 'dns-from-node', true, `web.shop.svc.cluster.local not asked of 10.96.0.10: ${error}`],
      PROBES_OFF_ROW,
    ])
    assert.deepEqual(r.notChecked[0].codes, ['KPD-DNS-NO-ANSWER'])
    assert.deepEqual(r.findings, [])
    assert.equal(
      r.summary,
      '? shop/web: no fault found in what was checked, but 1 check(s) could not run (see Not checked)',
    )
  })

  test("kube-proxy's /healthz and /metrics not answering, path reads that failed and lookups over the cap", () => {
    const r = report({
      editObservation: {
        'node-a': (o) => ({
          ...o,
          kubeProxy: {
            proxyMode: 'iptables',
            healthzError: 'connect ECONNREFUSED 127.0.0.1:10256',
            metricsError: 'HTTP 403',
          },
          path: {
            sysctls: {status: 'not-read', reason: 'sysctl: not available on the node (sh: sysctl: not found)'},
            routeLookups: [
              {
                address: '10.244.2.10',
                result: {status: 'not-read', reason: 'ip route get 10.244.2.10: exited 2: Error'},
              },
            ],
            conntrack: [
              {
                protocol: 'tcp',
                address: '10.96.10.10',
                result: {
                  status: 'not-read',
                  reason: 'conntrack -L -p tcp -d 10.96.10.10: exited 1: Operation not permitted',
                },
              },
            ],
            skipped: ['ip route get: 2 of 66 endpoint addresses not looked up (at most 64 per node)'],
          },
        }),
      },
    })
    assert.deepEqual(rows(r), [
      ['node-a', 'sysctls', true, 'sysctl: not available on the node (sh: sysctl: not found)'],
      ['node-a', 'routes', true, 'ip route get 10.244.2.10: exited 2: Error'],
      ['node-a', 'conntrack', true, 'conntrack -L -p tcp -d 10.96.10.10: exited 1: Operation not permitted'],
      ['node-a', 'routes', false, 'ip route get: 2 of 66 endpoint addresses not looked up (at most 64 per node)'],
      [
        'node-a',
        'kube-proxy-healthz',
        true,
        "kube-proxy's /healthz did not answer: connect ECONNREFUSED 127.0.0.1:10256",
      ],
      ['node-a', 'kube-proxy-metrics', true, "kube-proxy's /metrics did not answer: HTTP 403"],
      PROBES_OFF_ROW,
    ])
    assert.equal(
      r.summary,
      '? shop/web: no fault found in what was checked, but 5 check(s) could not run (see Not checked)',
    )
  })

  test('a node in IPVS mode whose ipvsadm output was not read: its rules not judged, required', () => {
    const r = report({editObservation: {'node-b': (o) => ({...o, kubeProxy: {proxyMode: 'ipvs'}})}})
    const unsupported = r.notChecked.filter((n) => n.check === 'proxy-rules')
    assert.deepEqual(
      unsupported.map((n) => [n.node, n.required]),
      [['node-b', true]],
    )
    assert.match(unsupported[0].reason, /^ipvs rules not judged: .*but no ipvsadm output was read$/)
    assert.ok(
      unsupported[0].codes.includes('KPD-SVC-RULE-MISSING') && !unsupported[0].codes.includes('KPD-ROUTE-MISSING'),
    )
  })

  test("an IPVS node whose sysctl could not run: KPD-IPVS-SYSCTL's input is a required not-checked row in the command's words, never a node with its sysctls right; exit 3", () => {
    const unread = report({
      ipvs: {'node-a': {}, 'node-b': {sysctl: {'net.ipv4.vs.conntrack': '0'}}},
      editObservation: {
        'node-b': (o) => ({
          ...o,
          ipvs: {
            ...o.ipvs!,
            sysctls: {},
            sysctlsNotRead: 'sysctl: not available on the node (sh: 1: sysctl: not found)',
          },
        }),
      },
    })
    // The fixture's configuration says iptables: both IPVS nodes are a mode mismatch, in both runs alike.
    assert.deepEqual(
      unread.findings.map((f) => [f.code, f.node]),
      [
        ['KPD-MODE-MISMATCH', 'node-a'],
        ['KPD-MODE-MISMATCH', 'node-b'],
      ],
    )
    assert.deepEqual(rows(unread), [
      ['node-b', 'proxy-rules', true, 'sysctl: not available on the node (sh: 1: sysctl: not found)'],
      PROBES_OFF_ROW,
    ])
    assert.ok(unread.notChecked[0].codes.includes('KPD-IPVS-SYSCTL'))
    assert.equal(
      unread.summary,
      '? shop/web: no fault found in what was checked, but 1 check(s) could not run (see Not checked); 2 warning(s)',
    )
    assert.equal(exitCode(unread), 3)
    // A node judged in iptables mode whose ipvsadm answered (the module loaded, nothing in it): IPVS's sysctls are no input.
    const iptablesNode = report({
      editObservation: {
        'node-b': (o) => ({
          ...o,
          ipvs: {
            virtualServers: [],
            ipsets: IpsetState.parse(''),
            sysctls: {},
            sysctlsNotRead: 'sysctl: not available on the node (sh: 1: sysctl: not found)',
          },
        }),
      },
    })
    assert.deepEqual(rows(iptablesNode), [PROBES_OFF_ROW])
    assert.equal(exitCode(iptablesNode), 0)
    // Read, the same node's sysctl is judged: no row, the finding.
    const read = report({ipvs: {'node-a': {}, 'node-b': {sysctl: {'net.ipv4.vs.conntrack': '0'}}}})
    assert.deepEqual(rows(read), [PROBES_OFF_ROW])
    assert.deepEqual(
      read.findings.map((f) => [f.code, f.node]),
      [
        ['KPD-MODE-MISMATCH', 'node-a'],
        ['KPD-MODE-MISMATCH', 'node-b'],
        ['KPD-IPVS-SYSCTL', 'node-b'],
      ],
    )
  })

  test("a node in nftables mode whose nft could not run (not on the host): its rules not judged, required, in nft's words; no finding about kube-proxy's tables; exit 3", () => {
    const r = report({
      editObservation: {
        'node-b': (o) => ({
          ...o,
          kubeProxy: {proxyMode: 'nftables'},
          nftNotRead: 'nft list ruleset: not available on the node (sh: 1: nft: not found)',
        }),
      },
    })
    assert.deepEqual(r.findings, [])
    assert.deepEqual(rows(r), [
      [
        'node-b',
        'proxy-rules',
        true,
        'IPv4 rules not read (nft list ruleset: not available on the node (sh: 1: nft: not found))',
      ],
      PROBES_OFF_ROW,
    ])
    assert.equal(
      r.summary,
      '? shop/web: no fault found in what was checked, but 1 check(s) could not run (see Not checked)',
    )
    assert.equal(exitCode(r), 3)
  })

  test("a node whose nft could not run and whose iptables-save holds stale kube-proxy chains, /proxyMode not answering: the mode is not known (the iptables rules may be leftovers of nftables mode), a required row in nft's words, no finding about those rules; exit 3", () => {
    const recorded = staleNftNode
    const unknown = report({editCluster: noConfigMap, editObservation: {'node-b': recorded}})
    assert.deepEqual(unknown.findings, [])
    assert.deepEqual(rows(unknown), [
      [
        'node-b',
        'proxy-rules',
        true,
        "IPv4 rules not judged: the proxy mode is not known (kube-proxy's /proxyMode did not answer: connect ECONNREFUSED 127.0.0.1:10249; nftables mode's rules were not read: nft list ruleset: not available on the node (sh: 1: nft: not found)): iptables mode's rules on the node may be leftovers of a mode no longer run (--proxy-mode says which mode runs)",
      ],
      PROBES_OFF_ROW,
    ])
    assert.equal(
      unknown.summary,
      '? shop/web: no fault found in what was checked, but 1 check(s) could not run (see Not checked)',
    )
    assert.equal(exitCode(unknown), 3)
    // No kube-proxy rule in what was read either: kube-proxy's default (iptables) is no more a decision.
    const bare = report({
      editCluster: noConfigMap,
      editObservation: {
        'node-b': (o) => ({...recorded(o), iptables: IptablesSave.parse(new BufferSource(Buffer.from(NO_KUBE_PROXY)))}),
      },
    })
    assert.deepEqual(bare.findings, [])
    assert.deepEqual(rows(bare), [
      [
        'node-b',
        'proxy-rules',
        true,
        "IPv4 rules not judged: the proxy mode is not known (kube-proxy's /proxyMode did not answer: connect ECONNREFUSED 127.0.0.1:10249; nftables mode's rules were not read: nft list ruleset: not available on the node (sh: 1: nft: not found)): no kube-proxy rules were found in what was read (--proxy-mode says which mode runs)",
      ],
      PROBES_OFF_ROW,
    ])
    assert.equal(exitCode(bare), 3)
    // The configuration naming nftables decides it: that mode's rules were not read.
    const nftables = report({
      editCluster: (c) => {
        c.proxyConfig = {...c.proxyConfig, mode: 'nftables'}
      },
      editObservation: {'node-b': recorded},
    })
    // node-a's rules are read whole and settle its mode: it does not run the mode the configuration names.
    assert.deepEqual(
      nftables.findings.map((f) => [f.code, f.node]),
      [['KPD-MODE-MISMATCH', 'node-a']],
    )
    assert.deepEqual(rows(nftables), [
      [
        'node-b',
        'proxy-rules',
        true,
        'IPv4 rules not read (nft list ruleset: not available on the node (sh: 1: nft: not found))',
      ],
      PROBES_OFF_ROW,
    ])
    assert.equal(exitCode(nftables), 3)
    // The configuration naming iptables decides it too: the rules are judged in that mode, its source named.
    const iptables = report({editObservation: {'node-b': recorded}})
    assert.deepEqual(
      iptables.findings.map((f) => [f.code, f.node]),
      [
        ['KPD-SEP-MISSING', 'node-b'],
        ['KPD-NODE-DIVERGES', 'node-b'],
      ],
    )
    assert.deepEqual(rows(iptables), [PROBES_OFF_ROW])
    // --proxy-mode decides it: judged in that mode.
    const given = report({editCluster: noConfigMap, editObservation: {'node-b': recorded}}, {proxyMode: 'iptables'})
    assert.deepEqual(
      given.findings.map((f) => [f.code, f.node]),
      [
        ['KPD-SEP-MISSING', 'node-b'],
        ['KPD-NODE-DIVERGES', 'node-b'],
      ],
    )
    assert.deepEqual(rows(given), [PROBES_OFF_ROW])
  })

  test("the paths that end on a node whose mode is not known: their half there is not followed, in that row's words (pointing to Not checked and --proxy-mode), never as a node not read", () => {
    const r = report({editCluster: noConfigMap, editObservation: {'node-b': staleNftNode}})
    const notFollowed =
      "not followed: node-b's IPv4 rules not judged: the proxy mode is not known (Not checked says why; --proxy-mode says which mode runs)"
    const fromA = r.paths.filter((p) => p.node === 'node-a')
    assert.deepEqual(
      fromA.map((p) => [p.entry, p.ok, p.remote.map((h) => [h.node, h.followed, h.ok, h.detail])]),
      ['pod→ClusterIP', 'node→ClusterIP', 'outside→NodePort', 'pod→itself'].map((entry) => [
        entry,
        true,
        [
          ['node-b', false, null, notFollowed],
          ['node-b', false, null, notFollowed],
        ],
      ]),
    )
    assert.equal(exitCode(r), 3)
    // The walk's tree says the same of each half (it said "the node was not read").
    const tree = renderExplainTree(r, plain).filter((l) => l.includes('on node-b'))
    assert.equal(tree.length, 8)
    assert.ok(
      tree.every((l) => l.endsWith(`(web-b${l.includes('10.244.2.10') ? 1 : 2}) on node-b: ${notFollowed}`)),
      tree.join('\n'),
    )
    // A node not read keeps its words.
    const unread = report({
      editObservation: {'node-b': (o) => ({...o, reachable: false, error: 'ssh: connection refused'})},
    })
    const unreadTree = renderExplainTree(unread, plain).filter((l) => l.includes('on node-b'))
    assert.equal(unreadTree.length, 8)
    assert.ok(
      unreadTree.every((l) => l.endsWith('on node-b: not followed (the node was not read)')),
      unreadTree.join('\n'),
    )
  })

  test("a backend save not on the node (a host with one backend's tools): a not-required iptables-backend row for the Service's family in the shell's words, only for the backend its own save does not show; the headline stays ✓, exit 0", () => {
    const missing = (backend: 'legacy' | 'nft', family: 4 | 6 = 4) => ({
      family,
      backend,
      reason: `${family === 6 ? 'ip6' : 'ip'}tables-${backend}-save: not available on the node (sh: 1: ${family === 6 ? 'ip6' : 'ip'}tables-${backend}-save: not found)`,
    })
    const r = report({
      // node-a's save names the nft backend: its missing iptables-nft-save loses nothing.
      editDump: {'node-a': (t) => `# Generated by iptables-save v1.8.9 (nf_tables) on Sat Nov 21 12:00:00 2026\n${t}`},
      editObservation: {
        'node-a': (o) => ({...o, backendsNotRead: [missing('nft')]}),
        // The IPv6 family is not the Service's.
        'node-b': (o) => ({...o, backendsNotRead: [missing('legacy'), missing('legacy', 6)]}),
      },
    })
    assert.deepEqual(r.findings, [])
    assert.deepEqual(rows(r), [
      [
        'node-b',
        'iptables-backend',
        false,
        'iptables-legacy-save: not available on the node (sh: 1: iptables-legacy-save: not found): kube-proxy rules left in iptables-legacy are not looked for',
      ],
      PROBES_OFF_ROW,
    ])
    assert.deepEqual(r.notChecked[0].codes, ['KPD-MODE-LEFTOVER'])
    assert.equal(r.summary, '✓ shop/web: every traced path works on 2 node(s)')
    assert.equal(exitCode(r), 0)
  })

  test("a dual-stack Service: a backend save not on the node gets its not-required row for each family judged on the node, in whichever family's run (node-b's IPv4 rules not read, its IPv6 judged), and none for a family not judged there", () => {
    const notFound = (family: 4 | 6) => ({
      family,
      backend: 'legacy' as const,
      reason: `${family === 6 ? 'ip6' : 'ip'}tables-legacy-save: not available on the node (sh: 1: ${family === 6 ? 'ip6' : 'ip'}tables-legacy-save: not found)`,
    })
    const withTable6 = (o: NodeObservation): NodeObservation => ({
      ...o,
      path: {routeLookups: [], conntrack: [], skipped: [], routeTable6: {status: 'read', value: []}},
    })
    const r = report({
      dualStack: true,
      editObservation: {
        // node-a: no ip6tables-save, so its IPv6 family is not judged; its IPv4 one is.
        'node-a': (o) => ({...withTable6(o), ip6tables: undefined, backendsNotRead: [notFound(4), notFound(6)]}),
        // node-b: no iptables-save (kube-proxy's nft tables read, none there), so only its IPv6 family is judged.
        'node-b': (o) => ({
          ...withTable6(o),
          iptables: undefined,
          nft: new NftRuleset(),
          nftKubeProxyTablesOnly: true,
          backendsNotRead: [notFound(4), notFound(6)],
        }),
      },
    })
    assert.deepEqual(
      rows(r).filter((row) => row[1] === 'iptables-backend'),
      [
        [
          'node-a',
          'iptables-backend',
          false,
          'iptables-legacy-save: not available on the node (sh: 1: iptables-legacy-save: not found): kube-proxy rules left in iptables-legacy are not looked for',
        ],
        [
          'node-b',
          'iptables-backend',
          false,
          'ip6tables-legacy-save: not available on the node (sh: 1: ip6tables-legacy-save: not found): kube-proxy rules left in ip6tables-legacy are not looked for',
        ],
      ],
    )
    // The family not judged on each node is a required row of its own.
    assert.deepEqual(
      rows(r).filter((row) => row[1] !== 'iptables-backend'),
      [
        ['node-b', 'proxy-rules', true, 'IPv4 rules not read (iptables-save)'],
        ['node-a', 'proxy-rules', true, 'IPv6 rules not read (ip6tables-save)'],
        PROBES_OFF_ROW,
      ],
    )
    assert.equal(exitCode(r), 3)
  })

  test('a dual-stack Service: both families judged when both were read (✓); a node whose ip6tables-save was not read is a required entry, so the headline is ? and not ✓', () => {
    // Path reads with the IPv6 route table (as collect reads them now): every family's routes judged, nothing unchecked.
    const withTable6 = (o: NodeObservation): NodeObservation => ({
      ...o,
      path: {routeLookups: [], conntrack: [], skipped: [], routeTable6: {status: 'read', value: []}},
    })
    const read = report({dualStack: true, editObservation: {'node-a': withTable6, 'node-b': withTable6}})
    assert.deepEqual(rows(read), [PROBES_OFF_ROW])
    assert.equal(read.summary, '✓ shop/web: every traced path works on 2 node(s)')
    // Without it (a bundle from before it was read): said per node, not required.
    const whole = report({dualStack: true})
    const paths =
      'IPv6 route table not read (recorded by a version that read the IPv4 table only): IPv6 endpoints reached by the default route alone are not told'
    assert.deepEqual(rows(whole), [
      ['node-a', 'routes', false, paths],
      ['node-b', 'routes', false, paths],
      PROBES_OFF_ROW,
    ])
    assert.equal(whole.summary, '✓ shop/web: every traced path works on 2 node(s)')
    const r = report({dualStack: true, editObservation: {'node-b': (o) => ({...o, ip6tables: undefined})}})
    assert.deepEqual(rows(r), [
      ['node-a', 'routes', false, paths],
      ['node-b', 'routes', false, paths],
      ['node-b', 'proxy-rules', true, 'IPv6 rules not read (ip6tables-save)'],
      PROBES_OFF_ROW,
    ])
    assert.ok(r.notChecked[2].codes.includes('KPD-SEP-MISSING'))
    assert.deepEqual(r.findings, [])
    assert.equal(
      r.summary,
      '? shop/web: no fault found in what was checked, but 1 check(s) could not run (see Not checked)',
    )
    assert.equal(exitCode(r), 3)
  })

  test('a dual-stack Service on IPVS nodes: both families judged (IPv6 from ipvsadm and ip6tables-save); without ip6tables-save the IPv6 family is a required entry', () => {
    const r = report({dualStack: true, ipvs: {'node-a': {}, 'node-b': {}}})
    assert.deepEqual(
      rows(r).filter(([, check]) => check !== 'routes'),
      [PROBES_OFF_ROW],
    )
    const unread = report({
      dualStack: true,
      ipvs: {'node-a': {}, 'node-b': {}},
      editObservation: {'node-b': (o) => ({...o, ip6tables: undefined})},
    })
    assert.deepEqual(
      rows(unread).filter(([, check]) => check !== 'routes'),
      [
        [
          'node-b',
          'proxy-rules',
          true,
          "IPv6 rules not read (ipvsadm -Sn and ip6tables-save, for IPVS mode: kube-proxy's /proxyMode on the node)",
        ],
        PROBES_OFF_ROW,
      ],
    )
    assert.match(unread.summary, /^\? shop\/web: /)
  })

  test('--via none: every node API-only, listed but not required, and the run is incomplete (no node read, exit 3); RBAC or no way in: required', () => {
    const via = (why: string): NodeReadVia => ({transport: null, address: null, why, notUsed: [], notRead: []})
    const {cluster} = offlineCluster()
    const none = buildReport(
      diagnose(cluster, [], {
        probes: PROBES_OFF,
        readVia: new Map([
          ['node-b', via('API-only (--via none)')],
          ['node-a', via('API-only (--via none)')],
        ]),
      }),
    )
    assert.deepEqual(rows(none), [
      ['node-a', 'node-read', false, 'not read: API-only (--via none)'],
      ['node-b', 'node-read', false, 'not read: API-only (--via none)'],
      NO_NODE_READ_ROW,
      PROBES_OFF_ROW,
    ])
    assert.equal(none.summary, '? shop/web: no node could be read, the packet path is unchecked')
    assert.equal(exitCode(none), 3)
    assert.equal(exitCode(none, {severity: 'error', incomplete: false}), 0)
    const rbac =
      'API-only: ssh: no Host entry for node-a in ~/.ssh/config; kube-proxy: RBAC forbids list on pods in namespace "kube-system" (403): needed to find kube-proxy\'s Pods'
    const denied = buildReport(diagnose(cluster, [], {probes: PROBES_OFF, readVia: new Map([['node-a', via(rbac)]])}))
    assert.deepEqual(rows(denied), [
      ['node-a', 'node-read', true, `not read: ${rbac}`],
      NO_NODE_READ_ROW,
      PROBES_OFF_ROW,
    ])
    assert.equal(exitCode(denied), 3)
  })

  test("tools missing from kube-proxy's image: what was gone around is not listed, what was lost is", () => {
    const readVia = (name: string): NodeReadVia => ({
      transport: 'kube-proxy',
      address: `kube-system/kube-proxy-${name}`,
      why: 'test',
      notUsed: [],
      notRead: [
        'ipvsadm not in the kube-proxy image: IPVS state read from /proc/net/ip_vs instead',
        'bridge not in the kube-proxy image: the bridge FDB not read (the pod-to-bridge-port mapping of the hairpin check)',
        "/var/lib/cni/results (the CNI result cache) is not mounted in kube-proxy's Pod: pods mapped to bridge ports through fdb and neighbour entries only (they expire on idle Pods)",
      ],
    })
    const r = report({}, {readVia: new Map([['node-a', readVia('node-a')]])})
    assert.deepEqual(rows(r), [
      [
        'node-a',
        'hairpin',
        true,
        'bridge not in the kube-proxy image: the bridge FDB not read (the pod-to-bridge-port mapping of the hairpin check)',
      ],
      PROBES_OFF_ROW,
    ])
    assert.deepEqual(r.notChecked[0].codes, ['KPD-HAIRPIN-OFF', 'KPD-HAIRPIN-UNMAPPED'])
  })

  test('probes that ran: a node read through kube-proxy is listed (not required), an SSH node that refused probes is required', () => {
    const settings = {vipAttempts: 8, endpointAttempts: 3, timeoutMs: 1500, concurrency: 8}
    const r = report(
      {},
      {
        probes: {
          ran: true,
          settings,
          notes: [],
          nodes: [
            {
              node: 'node-b',
              via: 'nothing',
              error:
                'not probed: read through kube-proxy, which cannot open connections from the node to other addresses',
              tallies: [],
            },
            {node: 'node-a', via: 'nothing', error: 'ssh: connect ECONNREFUSED', tallies: []},
          ],
        },
      },
    )
    assert.deepEqual(rows(r), [
      ['node-a', 'live-probes', true, 'ssh: connect ECONNREFUSED'],
      [
        'node-b',
        'live-probes',
        false,
        'not probed: read through kube-proxy, which cannot open connections from the node to other addresses',
      ],
    ])
  })
})

describe('--fail-on', () => {
  test('a comma list of error, warning, incomplete, or none alone; skipped names its new spelling; anything else the accepted words', () => {
    assert.deepEqual(parseFailOn('error,incomplete'), {severity: 'error', incomplete: true})
    assert.deepEqual(parseFailOn('error'), {severity: 'error', incomplete: false})
    assert.deepEqual(parseFailOn('warning'), {severity: 'warning', incomplete: false})
    assert.deepEqual(parseFailOn('incomplete'), {severity: 'none', incomplete: true})
    assert.deepEqual(parseFailOn('warning, incomplete'), {severity: 'warning', incomplete: true})
    assert.deepEqual(parseFailOn('none'), {severity: 'none', incomplete: false})
    const words =
      '--fail-on takes a comma list of error, warning, incomplete, or none alone (got "X"; the default is error,incomplete)'
    assert.equal(parseFailOn('warnings'), words.replace('X', 'warnings'))
    assert.equal(parseFailOn(','), words.replace('X', ','))
    assert.equal(parseFailOn('none,error'), words.replace('X', 'none,error'))
    assert.equal(
      parseFailOn('warning,skipped'),
      '--fail-on skipped is now --fail-on incomplete (a required check that could not run exits 3; the default is error,incomplete)',
    )
  })

  test('svc and scan refuse an unknown --fail-on word with exit 2; the healthy snapshot passes the strictest --fail-on', async () => {
    const bad = await runCli([
      'svc',
      'web',
      '-n',
      'shop',
      '--snapshot',
      'examples/healthy-cluster',
      '--fail-on',
      'skip',
    ])
    assert.equal(bad.code, 2)
    assert.match(bad.stderr, /--fail-on takes a comma list of error, warning, incomplete, or none alone \(got "skip";/)
    const scanBad = await runCli(['scan', '-n', 'shop', '--snapshot', 'examples/healthy-cluster', '--fail-on', 'info'])
    assert.equal(scanBad.code, 2)
    const ok = await runCli([
      'svc',
      'web',
      '-n',
      'shop',
      '--snapshot',
      'examples/healthy-cluster',
      '--fail-on',
      'warning,incomplete',
      '-o',
      'json',
    ])
    assert.equal(ok.code, 0, ok.stderr)
    assert.equal(ok.json.summary, '✓ shop/web: every traced path works on 2 node(s)')
  })
})

describe('a snapshot: the probes and the packet-path reads it does not hold are listed, not required', () => {
  test('healthy example: JSON notChecked exactly, headline ✓, the human "Not checked" section groups the nodes', async () => {
    const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', 'examples/healthy-cluster', '-o', 'json'])
    assert.equal(r.code, 0)
    const pathReason = 'no packet-path reads were recorded for this node (an older bundle has no path-reads.json)'
    const probeReason = 'live probes are not run from a snapshot (it opens no connection): the diagnosis is static only'
    const kernelReason =
      'not recorded in the bundle (collected without --probe, or by a version that did not record it)'
    assert.deepEqual(rows(r.json), [
      ['node-a', 'path-reads', false, pathReason],
      ['node-b', 'path-reads', false, pathReason],
      ['-', 'live-probes', false, probeReason],
      ['node-a', 'kernel-evidence', false, kernelReason],
      ['node-b', 'kernel-evidence', false, kernelReason],
    ])
    assert.equal(r.json.summary, '✓ shop/web: every traced path works on 2 node(s)')
    const human = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', 'examples/healthy-cluster'])
    const section = human.stdout.slice(human.stdout.indexOf('Not checked'), human.stdout.indexOf('\n\nFindings'))
    assert.equal(
      section,
      'Not checked (not required): path-reads on node-a, node-b; live-probes; kernel-evidence on node-a, node-b',
    )
  })
})

describe('human and JUnit rendering of checks not run', () => {
  const r = report({
    dns: {
      'node-a': {addresses: [], method: 'none', error: 'no way'},
      'node-b': {addresses: [], method: 'none', error: 'no way'},
    },
    editObservation: {'node-a': (o) => ({...o, kubeProxy: {healthzError: 'refused'}})},
  })

  test('required first, one line per reason with its nodes (in the order met); nothing when every check ran', () => {
    assert.deepEqual(renderNotChecked(r, plain), [
      '',
      'Not checked (3 required):',
      "  ? kube-proxy-healthz (KPD-PROXY-UNHEALTHY) on node-a: kube-proxy's /healthz did not answer: refused",
      '  ? dns-from-node (KPD-DNS-NO-ANSWER) on node-a, node-b: web.shop.svc.cluster.local not asked of 10.96.0.10: no way',
      '  - also not checked (not required): live-probes',
    ])
    assert.deepEqual(renderNotChecked({notChecked: []}, plain), [])
  })

  test('JUnit: a "not checked" testcase, an error by default (incomplete, exit 3), skipped when --fail-on leaves incomplete out; the scan headline says ?', () => {
    const {cluster, observations} = offlineCluster({
      dns: {'node-a': {addresses: [], method: 'none', error: 'no way'}},
      editObservation: {'node-a': fullyRead, 'node-b': fullyRead},
    })
    const scan = {
      outcomes: [
        {
          namespace: 'shop',
          name: 'web',
          type: 'NodePort',
          diagnosis: buildReport(diagnose(cluster, observations, {probes: PROBES_OFF})),
        },
      ],
      observations,
      warnings: [],
      notes: [],
    }
    const incomplete = {severity: 'error', incomplete: true} as const
    const strict = buildScanReport(scan, 'namespace shop', incomplete, META)
    assert.equal(strict.ok, true)
    assert.equal(scanExitCode(strict, incomplete), 3)
    assert.equal(
      strict.summary,
      '? namespace shop: no fault found in what was checked, but 1 of 1 diagnosed Services have checks that could not run (see Not checked) (0 skipped; 2 of 2 nodes read)',
    )
    const errorXml = renderJunit(strict, incomplete)
    assert.match(errorXml, /<testsuites name="kproxy-doctor scan" tests="9" failures="0" errors="1" skipped="1">/)
    assert.match(errorXml, /<testsuite name="shop\/web" tests="9" failures="0" errors="1" skipped="1">/)
    assert.ok(
      errorXml.includes(
        '<testcase classname="shop/web" name="not checked"><error type="incomplete" message="1 required check(s) could not run: the run is incomplete">node-a: dns-from-node: web.shop.svc.cluster.local not asked of 10.96.0.10: no way</error></testcase>',
      ),
      errorXml,
    )
    const human = renderScanHuman(strict, plain).split('\n')
    assert.deepEqual(human.slice(human.indexOf('Not checked (1 required):')), [
      'Not checked (1 required):',
      '  ? dns-from-node (KPD-DNS-NO-ANSWER) on node-a: web.shop.svc.cluster.local not asked of 10.96.0.10: no way',
      '  - also not checked (not required): live-probes',
    ])
    const lenientOn = {severity: 'error', incomplete: false} as const
    const lenient = buildScanReport(scan, 'namespace shop', lenientOn, META)
    assert.equal(scanExitCode(lenient, lenientOn), 0)
    assert.equal(lenient.summary, strict.summary, 'the headline says ? whatever --fail-on says')
    const skippedXml = renderJunit(lenient, lenientOn)
    assert.match(skippedXml, /<testsuite name="shop\/web" tests="9" failures="0" errors="0" skipped="2">/)
    assert.ok(
      skippedXml.includes(
        '<testcase classname="shop/web" name="not checked"><skipped message="1 required check(s) could not run: the run is incomplete"/><system-out>node-a: dns-from-node: web.shop.svc.cluster.local not asked of 10.96.0.10: no way</system-out></testcase>',
      ),
      skippedXml,
    )
  })
})
