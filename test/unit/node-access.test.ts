import assert from 'node:assert/strict'
import {spawnSync} from 'node:child_process'
import {mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {Duplex} from 'node:stream'
import {test} from 'node:test'
import {loadNodeRecording, readNodeBundle, writeNodeRecording} from '../../src/node/read/bundle.js'
import {collectNode} from '../../src/node/read/collect-node.js'
import type {FileRead, NodeAccess, RunResult, TcpOpen} from '../../src/node/transport/node-access.js'
import type {ArgsOf, NodeCommandKey} from '../../src/node/read/node-reads.js'
import {buildCommandLine, linesOfBatch, type CommandLine} from '../../src/node/node-commands.js'
import {SnapshotNodeAccess} from '../../src/node/transport/snapshot-transport.js'
import {loggedAccess} from '../../src/node/transport/logged-access.js'
import {SshNodeAccess, type SshChannel} from '../../src/node/transport/ssh/ssh-transport.js'
import type {ExecResult} from '../../src/node/transport/ssh/ssh-session.js'
import {kubeProxyRules} from '../fixtures/kube-proxy-rules.js'
import {answerBatch, FIRST_EXEC} from '../helpers/batch-answer.js'
import {DNS, NODES, WEB, labPods} from '../fixtures/lab-cluster.js'
import {Chalk} from 'chalk'
import {offlineCluster} from '../helpers/offline-cluster.js'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {PROBES_OFF} from '../../src/diagnosis/probe-stage.js'
import {buildReport, exitCode} from '../../src/report/report.js'
import {renderHuman} from '../../src/report/human.js'
import {defaultKubeProxyConfig} from '../../src/cluster/kube-proxy-config.js'
import type {NodeObservation} from '../../src/node/observation.js'

const IPTABLES_SAVE = kubeProxyRules(NODES[0], [WEB, DNS], labPods(), {})

/** A stream standing in for a TCP connection from the node: answers each request with `reply(request)`. */
function answeringStream(reply: (request: string) => Buffer): Duplex {
  let request = ''
  const stream: Duplex = new Duplex({
    read() {},
    write(chunk, _enc, done) {
      request += chunk.toString()
      done()
    },
    final(done) {
      stream.push(reply(request))
      stream.push(null)
      done()
    },
  })
  return stream
}

/** A node held in memory: outputs by command key, HTTP answers by port, no SSH anywhere. */
class FakeNode implements NodeAccess {
  readonly ran: string[] = []
  closed = false
  constructor(
    private readonly outputs: Partial<Record<NodeCommandKey, {code: number; stdout: string; stderr?: string}>>,
    /** Bodies by "port path"; a path not listed is a 404. */
    private readonly http: Record<string, string> = {},
  ) {}
  async run<K extends NodeCommandKey>(key: K, ..._args: ArgsOf<K>): Promise<RunResult> {
    this.ran.push(key)
    const o = this.outputs[key]
    return o
      ? {kind: 'ran', code: o.code, stdout: Buffer.from(o.stdout), stderr: o.stderr ?? ''}
      : {kind: 'ran', code: 127, stdout: Buffer.alloc(0), stderr: 'command not found'}
  }
  async openTcp(host: string, port: number): Promise<TcpOpen> {
    if (host !== '127.0.0.1' || !Object.keys(this.http).some((k) => k.startsWith(`${port} `)))
      return {kind: 'refused', outcome: 'refused', reason: `connect ${host}:${port}: Connection refused`}
    return {
      kind: 'open',
      stream: answeringStream((request) => {
        const body = this.http[`${port} ${request.split(' ')[1]}`]
        return Buffer.from(
          body === undefined
            ? 'HTTP/1.0 404 Not Found\r\n\r\n'
            : `HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n${body}`,
        )
      }),
    }
  }
  async readFile(): Promise<FileRead> {
    return {kind: 'missing', reason: 'no such file'}
  }
  describe() {
    return {transport: 'fake', address: 'memory', tcpVia: 'a fake stream'}
  }
  close() {
    this.closed = true
  }
}

test('collectNode reads a node through any NodeAccess, in memory: parsed dumps, kube-proxy status, DNS fallback, raw recording', async () => {
  const node = new FakeNode(
    {
      iptablesSave: {code: 0, stdout: IPTABLES_SAVE},
      nftRulesetJson: {code: 1, stdout: '', stderr: 'nft: command not found'},
      nftRuleset: {code: 1, stdout: ''},
      network: {
        code: 0,
        stdout: '## hairpin\n/sys/class/net/cbr0/brif/vweb-1/hairpin_mode 1\n## links\n## neigh\n## fdb\n',
      },
      // grep's exit 1: an empty cache folder (recorded: read, nothing in it).
      cniResults: {code: 1, stdout: ''},
      dnsLookup: {code: 0, stdout: `${WEB.clusterIP}\n`},
    },
    {'10249 /proxyMode': 'iptables'},
  )
  const {observation, recording} = await collectNode('node-a', async () => node, {
    timeoutMs: 2000,
    dns: {name: 'web.shop.svc.cluster.local', server: DNS.clusterIP},
  })
  assert.equal(observation.reachable, true, observation.error)
  assert.ok(observation.iptables?.hasChain('nat', 'KUBE-SERVICES'))
  assert.equal(observation.nft, undefined)
  assert.equal(observation.ipvs, undefined, 'ipvsadm did not answer: no IPVS reads')
  assert.equal(observation.kubeProxy?.proxyMode, 'iptables')
  assert.equal(observation.kubeProxy?.metricsError, 'HTTP 404')
  assert.match(observation.kubeProxy?.healthzError ?? '', /127\.0\.0\.1:10256: Connection refused/)
  assert.deepEqual(observation.dns?.answers, [{type: 'A', addresses: [WEB.clusterIP]}])
  assert.equal(observation.dns?.method, 'dig/nslookup on the node')
  assert.deepEqual(
    observation.network?.ports.map((p) => [p.port, p.hairpin]),
    [['vweb-1', true]],
  )
  // kube-proxy says iptables mode: only its own nft tables are asked for (`nft list sets` did not answer here, so both
  // families are listed); a node without nft (127) is not asked again in another form.
  assert.deepEqual(
    [...node.ran].sort(),
    [
      'iptablesSave',
      'ip6tablesSave',
      'nftSets',
      'nftKubeProxyTable',
      'nftKubeProxyTable',
      'nftRulesetJson',
      'nftRuleset',
      'iptablesLegacySave',
      'iptablesNftSave',
      'ip6tablesLegacySave',
      'ip6tablesNftSave',
      'ipvsadm',
      'network',
      'cniResults',
      'dnsLookup',
    ].sort(),
  )
  assert.equal(node.closed, true)
  assert.deepEqual([...recording.keys()].sort(), [
    'cni-results.txt',
    'dns.json',
    'iptables-backends-not-read.txt',
    'iptables-save.txt',
    'kube-proxy.json',
    'network.txt',
  ])
  assert.equal(recording.get('iptables-save.txt')?.toString(), IPTABLES_SAVE)
  // This node has no backend saves (127): each said as not read, never as a backend without rules.
  assert.equal(
    recording.get('iptables-backends-not-read.txt')?.toString(),
    ['iptables-legacy-save', 'iptables-nft-save', 'ip6tables-legacy-save', 'ip6tables-nft-save']
      .map((c) => `#kpd-not-read 127\t${c}\tcommand not found\n`)
      .join(''),
  )

  // The same bytes written as a bundle folder read back the same way, and the snapshot transport serves them by key.
  const dir = mkdtempSync(join(tmpdir(), 'kpd-access-'))
  try {
    writeNodeRecording(dir, recording)
    assert.deepEqual(readdirSync(dir).sort(), [
      'cni-results.txt',
      'dns.json',
      'iptables-backends-not-read.txt',
      'iptables-save.txt',
      'kube-proxy.json',
      'network.txt',
    ])
    const back = readNodeBundle(dir, 'node-a')
    assert.equal(back.reachable, true)
    assert.deepEqual(back.iptables?.chainNames('nat'), observation.iptables?.chainNames('nat'))
    assert.deepEqual(back.dns, observation.dns)
    assert.deepEqual(back.kubeProxy, observation.kubeProxy)
    const snap = SnapshotNodeAccess.fromFolder(dir)
    const save = await snap.run('iptablesSave')
    assert.equal(save.kind === 'ran' && save.stdout.toString(), readFileSync(join(dir, 'iptables-save.txt'), 'utf8'))
    assert.deepEqual(await snap.run('ipvsadm'), {kind: 'not-recorded', what: `ipvsadm is not recorded in ${dir}`})
    assert.equal((await snap.run('nftRulesetJson')).kind, 'not-recorded')
    assert.equal((await snap.openTcp('127.0.0.1', 10249)).kind, 'refused')
    assert.equal((await snap.readFile('/proc/sys/net/ipv4/ip_forward')).kind, 'not-recorded')
    await assert.rejects(snap.readFile('/etc/shadow'), /not an allow-listed file/)
    const again = await collectNode('node-a', async () => snap, {timeoutMs: 2000})
    assert.equal(again.observation.reachable, true)
    assert.equal(again.recording.get('iptables-save.txt')?.toString(), IPTABLES_SAVE)
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})

test("collectNode on an IPVS node without sysctl: IPVS's sysctls are recorded as not read (the shell's 127 and words), never as no sysctls", async () => {
  const ipvsNode = (sysctls: {code: number; stdout: string; stderr?: string}) =>
    new FakeNode(
      {
        iptablesSave: {code: 0, stdout: IPTABLES_SAVE},
        ipvsadm: {code: 0, stdout: `-A -t ${WEB.clusterIP}:80 -s rr\n`},
        sysctls,
      },
      {'10249 /proxyMode': 'ipvs'},
    )
  const missing = await collectNode(
    'node-a',
    async () => ipvsNode({code: 127, stdout: '', stderr: 'sh: 1: sysctl: not found\n'}),
    {timeoutMs: 2000},
  )
  assert.equal(missing.recording.get('sysctl.txt')?.toString(), '#kpd-not-read 127\tsysctl\tsh: 1: sysctl: not found\n')
  assert.deepEqual(missing.observation.ipvs?.sysctls, {})
  assert.equal(missing.observation.ipvs?.sysctlsNotRead, 'sysctl: not available on the node (sh: 1: sysctl: not found)')
  // sysctl exits 255 where a key is missing (ip_vs not loaded) and still prints the others: read, as before.
  const partial = await collectNode(
    'node-a',
    async () =>
      ipvsNode({
        code: 255,
        stdout: 'net.ipv4.ip_forward = 1\n',
        stderr: 'sysctl: cannot stat /proc/sys/net/ipv4/vs/conntrack: No such file or directory\n',
      }),
    {timeoutMs: 2000},
  )
  assert.equal(partial.recording.get('sysctl.txt')?.toString(), 'net.ipv4.ip_forward = 1\n')
  assert.deepEqual(partial.observation.ipvs?.sysctls, {'net.ipv4.ip_forward': '1'})
  assert.equal(partial.observation.ipvs?.sysctlsNotRead, undefined)
})

test("collectNode where kube-proxy runs nftables mode and the host has no nft (its image carries its own): the ruleset is recorded as not read, in the shell's words, never as no tables", async () => {
  const node = new FakeNode(
    {
      iptablesSave: {code: 0, stdout: IPTABLES_SAVE},
      nftRulesetJson: {code: 127, stdout: '', stderr: 'sh: 1: nft: not found\n'},
      nftRuleset: {code: 127, stdout: '', stderr: 'sh: 1: nft: not found\n'},
    },
    {'10249 /proxyMode': 'nftables'},
  )
  const {observation, recording} = await collectNode('node-a', async () => node, {timeoutMs: 2000})
  assert.equal(observation.reachable, true, observation.error)
  assert.equal(
    recording.get('nft-not-read.txt')?.toString(),
    '#kpd-not-read 127\tnft list ruleset\tsh: 1: nft: not found\n',
  )
  assert.equal(observation.nft, undefined)
  assert.equal(observation.nftNotRead, 'nft list ruleset: not available on the node (sh: 1: nft: not found)')
  // A bundle holds the same and reads back the same.
  const dir = mkdtempSync(join(tmpdir(), 'kpd-access-'))
  try {
    writeNodeRecording(dir, recording)
    assert.equal(readNodeBundle(dir, 'node-a').nftNotRead, observation.nftNotRead)
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})

test('collectNode: the backend iptables-save names in its header is not read a second time; the other backend still is', async () => {
  for (const [backend, header, reread] of [
    ['nft', '# Generated by iptables-save v1.8.9 (nf_tables) on Sat Nov 21 12:00:00 2026', 'iptablesLegacySave'],
    ['legacy', '# Generated by iptables-save v1.8.7 (legacy) on Sat Nov 21 12:00:00 2026', 'iptablesNftSave'],
    // Before 1.8 iptables had one backend, the legacy one.
    ['legacy', '# Generated by iptables-save v1.6.1 on Sat Nov 21 12:00:00 2026', 'iptablesNftSave'],
    // iptables-nft's warning names the other backend's save: only the "Generated by" line says which backend this is.
    [
      'nft',
      '# Warning: iptables-legacy tables present, use iptables-legacy-save to see them\n# Generated by iptables-save v1.8.9 (nf_tables) on Sat Nov 21 12:00:00 2026',
      'iptablesLegacySave',
    ],
    ['unnamed', '# a comment of someone else', 'both'],
  ] as const) {
    const dump = `${header}\n${IPTABLES_SAVE}`
    const other = '*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n'
    const node = new FakeNode({
      iptablesSave: {code: 0, stdout: dump},
      iptablesLegacySave: {code: 0, stdout: other},
      iptablesNftSave: {code: 0, stdout: other},
    })
    const {recording} = await collectNode('node-a', async () => node, {timeoutMs: 2000})
    const saves = node.ran.filter((k) => k === 'iptablesLegacySave' || k === 'iptablesNftSave')
    assert.deepEqual(saves, reread === 'both' ? ['iptablesLegacySave', 'iptablesNftSave'] : [reread], backend)
    if (backend === 'nft') assert.equal(recording.get('iptables-nft-save.txt')?.toString(), dump)
    if (backend === 'legacy') assert.equal(recording.get('iptables-legacy-save.txt')?.toString(), dump)
  }
})

test("collectNode where a backend save is not on the node: recorded as not read in its own file (the shell's words), never as an empty dump; one that ran and printed nothing is a backend without rules", async () => {
  const nftHeader = '# Generated by iptables-save v1.8.9 (nf_tables) on Sat Nov 21 12:00:00 2026\n'
  const node = new FakeNode({
    iptablesSave: {code: 0, stdout: nftHeader + IPTABLES_SAVE},
    iptablesLegacySave: {code: 127, stdout: '', stderr: 'sh: 1: iptables-legacy-save: not found\n'},
    ip6tablesSave: {code: 0, stdout: nftHeader + '*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n'},
    ip6tablesLegacySave: {code: 0, stdout: ''},
  })
  const {observation, recording} = await collectNode('node-a', async () => node, {timeoutMs: 2000})
  assert.equal(observation.reachable, true, observation.error)
  assert.equal(
    recording.get('iptables-backends-not-read.txt')?.toString(),
    '#kpd-not-read 127\tiptables-legacy-save\tsh: 1: iptables-legacy-save: not found\n',
  )
  assert.equal(recording.has('iptables-legacy-save.txt'), false)
  assert.equal(recording.has('ip6tables-legacy-save.txt'), false)
  const notRead = [
    {
      family: 4,
      backend: 'legacy',
      reason: 'iptables-legacy-save: not available on the node (sh: 1: iptables-legacy-save: not found)',
    },
  ]
  assert.deepEqual(observation.backendsNotRead, notRead)
  // A bundle holds the same and reads back the same.
  const dir = mkdtempSync(join(tmpdir(), 'kpd-access-'))
  try {
    writeNodeRecording(dir, recording)
    assert.deepEqual(readNodeBundle(dir, 'node-a').backendsNotRead, notRead)
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})

test('collect read again from a snapshot (its transport): the nft ruleset and a backend save recorded as not read fail again as they did, so the new bundle says the same and svc judges it alike (mode not known, exit 3)', async () => {
  const nftHeader = '# Generated by iptables-save v1.8.9 (nf_tables) on Sat Nov 21 12:00:00 2026\n'
  // Leftovers from before a switch to nftables mode, whose nft the host lacks; kube-proxy not answering.
  const stale = kubeProxyRules(NODES[1], [WEB, DNS], labPods(), {omitEndpoint: '10.244.2.11'})
  const node = new FakeNode({
    iptablesSave: {code: 0, stdout: nftHeader + stale},
    iptablesLegacySave: {code: 127, stdout: '', stderr: 'sh: 1: iptables-legacy-save: not found\n'},
    ip6tablesLegacySave: {code: 0, stdout: ''},
    ip6tablesNftSave: {code: 0, stdout: ''},
    nftRulesetJson: {code: 127, stdout: '', stderr: 'sh: 1: nft: not found\n'},
    nftRuleset: {code: 127, stdout: '', stderr: 'sh: 1: nft: not found\n'},
  })
  const first = await collectNode('node-b', async () => node, {timeoutMs: 2000})
  const notReadFiles = (rec: Map<string, Buffer>) =>
    ['nft-not-read.txt', 'iptables-backends-not-read.txt'].map((f) => [f, rec.get(f)?.toString()])
  assert.deepEqual(notReadFiles(first.recording), [
    ['nft-not-read.txt', '#kpd-not-read 127\tnft list ruleset\tsh: 1: nft: not found\n'],
    [
      'iptables-backends-not-read.txt',
      '#kpd-not-read 127\tiptables-legacy-save\tsh: 1: iptables-legacy-save: not found\n',
    ],
  ])
  const dir = mkdtempSync(join(tmpdir(), 'kpd-recollect-'))
  try {
    writeNodeRecording(dir, first.recording)
    const snapshot = () => SnapshotNodeAccess.fromFolder(dir)
    // Read again as svc --watch reads again (kube-proxy's answers kept): the same bundle, file for file.
    const again = await collectNode('node-b', async () => snapshot(), {timeoutMs: 2000, keep: loadNodeRecording(dir)})
    assert.deepEqual(
      [...again.recording].map(([f, b]) => [f, b.toString()]).sort(),
      [...first.recording].map(([f, b]) => [f, b.toString()]).sort(),
    )
    // Read again with nothing kept: the not-read lines are still the node's.
    const bare = await collectNode('node-b', async () => snapshot(), {timeoutMs: 2000})
    assert.deepEqual(notReadFiles(bare.recording), notReadFiles(first.recording))
    // svc over the first bundle and the one read again: the same report.
    const judged = (obs: NodeObservation) => {
      const {cluster, observations} = offlineCluster({
        editCluster: (c) => {
          c.proxyConfig = defaultKubeProxyConfig('no ConfigMap kube-system/kube-proxy')
        },
        editObservation: {'node-b': (o) => ({...obs, path: o.path, network: o.network, dns: o.dns})},
      })
      const r = buildReport(diagnose(cluster, observations, {probes: PROBES_OFF}), {
        meta: {toolVersion: 't', time: 't', context: null},
      })
      return {
        human: renderHuman(r, new Chalk({level: 0}), 120),
        exit: exitCode(r),
        rows: r.notChecked.map((n) => n.reason),
      }
    }
    const before = judged(first.observation)
    assert.equal(before.exit, 3)
    assert.ok(
      before.rows.some((row) => row.startsWith('IPv4 rules not judged: the proxy mode is not known')),
      before.human,
    )
    assert.deepEqual(judged(again.observation), before)
    writeNodeRecording(join(dir, 'again'), again.recording)
    assert.deepEqual(judged(readNodeBundle(join(dir, 'again'), 'node-b')), before)
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})

/** A node whose nft answers `list table FAMILY kube-proxy` from `tables` (JSON documents or text, by family); a family not there is nft's own error. */
class NftTablesNode extends FakeNode {
  readonly asked: string[] = []
  constructor(
    outputs: ConstructorParameters<typeof FakeNode>[0],
    private readonly tables: {json: boolean; ip?: string; ip6?: string},
    mode: string,
  ) {
    super(outputs, {'10249 /proxyMode': mode})
  }
  override async run<K extends NodeCommandKey>(key: K, ...args: ArgsOf<K>): Promise<RunResult> {
    if (key !== 'nftKubeProxyTable') return super.run(key, ...args)
    const {family, json} = args[0] as {family: 'ip' | 'ip6'; json: boolean}
    this.asked.push(`${family}${json ? ' -j' : ''}`)
    if (json && !this.tables.json)
      return {kind: 'ran', code: 1, stdout: Buffer.alloc(0), stderr: 'nft: unrecognized option -j'}
    const table = this.tables[family]
    if (table === undefined)
      return {
        kind: 'ran',
        code: 1,
        stdout: Buffer.alloc(0),
        stderr: `Error: No such file or directory\nlist table ${family} kube-proxy\n           ^^^^^^^^^^^^^\n`,
      }
    return {kind: 'ran', code: 0, stdout: Buffer.from(table), stderr: ''}
  }
}

const META = {metainfo: {version: '1.0.6', release_name: 'Lester Gooch #5', json_schema_version: 1}}
const ownTableJson = (family: 'ip' | 'ip6') =>
  JSON.stringify({
    nftables: [
      META,
      {table: {family, name: 'kube-proxy', handle: 1}},
      {chain: {family, table: 'kube-proxy', name: 'services', handle: 2}},
    ],
  })

test("collectNode: where kube-proxy reports iptables or IPVS mode only its own nft tables are listed (a large iptables-nft node's whole ruleset takes minutes); both families as one ruleset", async () => {
  const saves = {
    iptablesSave: {code: 0, stdout: IPTABLES_SAVE},
    nftRulesetJson: {code: 0, stdout: JSON.stringify({nftables: [META]})},
  }
  for (const mode of ['iptables', 'ipvs']) {
    // A leftover nftables-mode table in IPv4, none in IPv6: one document holding the IPv4 table, one metainfo.
    const node = new NftTablesNode(saves, {json: true, ip: ownTableJson('ip')}, mode)
    const {observation, recording} = await collectNode('node-a', async () => node, {timeoutMs: 2000})
    assert.deepEqual(node.asked, ['ip -j', 'ip6 -j'], mode)
    assert.ok(
      !node.ran.includes('nftRulesetJson') && !node.ran.includes('nftRuleset'),
      `${mode}: the whole ruleset is not listed`,
    )
    assert.equal(recording.has('nft-ruleset.txt'), false)
    const doc = JSON.parse(recording.get('nft-kube-proxy-tables.txt')!.toString()) as {nftables: unknown[]}
    assert.equal(doc.nftables.length, 3)
    assert.ok(observation.nft?.table('ip kube-proxy')?.chains.get('services'), mode)
    assert.equal(observation.nft?.table('ip6 kube-proxy'), undefined)
    assert.equal(observation.nftKubeProxyTablesOnly, true)
  }
  // Both tables there: one document, their objects in order.
  const both = new NftTablesNode(saves, {json: true, ip: ownTableJson('ip'), ip6: ownTableJson('ip6')}, 'iptables')
  const two = await collectNode('node-a', async () => both, {timeoutMs: 2000})
  assert.ok(two.observation.nft?.table('ip kube-proxy') && two.observation.nft?.table('ip6 kube-proxy'))
  assert.equal(
    (JSON.parse(two.recording.get('nft-kube-proxy-tables.txt')!.toString()) as {nftables: unknown[]}).nftables.filter(
      (o) => 'metainfo' in (o as object),
    ).length,
    1,
  )
  // No table in either family: an empty read, still a read (nothing of nftables mode left), written and read back so.
  const none = new NftTablesNode(saves, {json: true}, 'iptables')
  const empty = await collectNode('node-a', async () => none, {timeoutMs: 2000})
  assert.equal(empty.recording.get('nft-kube-proxy-tables.txt')?.length, 0)
  assert.equal(empty.observation.nft?.tables.length, 0)
  const dir = mkdtempSync(join(tmpdir(), 'kpd-own-tables-'))
  try {
    writeNodeRecording(dir, empty.recording)
    const back = readNodeBundle(dir, 'node-a')
    assert.equal(back.nft?.tables.length, 0)
    assert.equal(back.nftKubeProxyTablesOnly, true)
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
  // An nft without -j: the text form of each table, concatenated.
  const text = 'table ip kube-proxy {\n\tchain services {\n\t}\n}\n'
  const old = new NftTablesNode(saves, {json: false, ip: text}, 'iptables')
  const read = await collectNode('node-a', async () => old, {timeoutMs: 2000})
  assert.deepEqual(old.asked, ['ip -j', 'ip6 -j', 'ip', 'ip6'])
  assert.equal(read.recording.get('nft-kube-proxy-tables.txt')?.toString(), text)
  assert.ok(read.observation.nft?.table('ip kube-proxy')?.chains.get('services'))
  // kube-proxy not answering: no kube-proxy table anywhere rules nftables mode out (the whole ruleset is not listed);
  // a table there may be nftables mode at work, whose packets other tables drop too: the whole ruleset is read.
  const silent = new NftTablesNode(saves, {json: true}, 'iptables')
  const quiet = await collectNode(
    'node-a',
    async () =>
      Object.assign(silent, {
        openTcp: async () => ({kind: 'refused', outcome: 'refused', reason: 'refused'}) as TcpOpen,
      }),
    {timeoutMs: 2000},
  )
  assert.deepEqual(
    [silent.asked, silent.ran.includes('nftRulesetJson'), quiet.recording.has('nft-kube-proxy-tables.txt')],
    [['ip -j', 'ip6 -j'], false, true],
  )
  const unsure = new NftTablesNode(saves, {json: true, ip: ownTableJson('ip')}, 'iptables')
  const full = await collectNode(
    'node-a',
    async () =>
      Object.assign(unsure, {
        openTcp: async () => ({kind: 'refused', outcome: 'refused', reason: 'refused'}) as TcpOpen,
      }),
    {timeoutMs: 2000},
  )
  assert.deepEqual(
    [
      unsure.ran.includes('nftRulesetJson'),
      full.recording.has('nft-ruleset.txt'),
      full.recording.has('nft-kube-proxy-tables.txt'),
    ],
    [true, true, false],
  )
  // Replayed through the snapshot transport (no kube-proxy to ask, no whole ruleset recorded): the same tables again.
  const replayDir = mkdtempSync(join(tmpdir(), 'kpd-own-replay-'))
  try {
    const recorded = await collectNode(
      'node-a',
      async () => new NftTablesNode(saves, {json: true, ip: ownTableJson('ip'), ip6: ownTableJson('ip6')}, 'iptables'),
      {timeoutMs: 2000},
    )
    writeNodeRecording(replayDir, recorded.recording)
    const again = await collectNode('node-a', async () => SnapshotNodeAccess.fromFolder(replayDir), {timeoutMs: 2000})
    assert.equal(
      again.recording.get('nft-kube-proxy-tables.txt')?.toString(),
      recorded.recording.get('nft-kube-proxy-tables.txt')?.toString(),
    )
    assert.deepEqual(
      again.observation.nft?.tables.map((t) => t.id),
      ['ip kube-proxy', 'ip6 kube-proxy'],
    )
  } finally {
    rmSync(replayDir, {recursive: true, force: true})
  }
  // kube-proxy in nftables mode, or --proxy-mode nftables against its word: the whole ruleset (other tables drop packets too).
  for (const [mode, proxyMode] of [
    ['nftables', undefined],
    ['iptables', 'nftables'],
  ] as const) {
    const node = new NftTablesNode(saves, {json: true, ip: ownTableJson('ip')}, mode)
    const {recording} = await collectNode('node-a', async () => node, {timeoutMs: 2000, proxyMode})
    assert.deepEqual(node.asked, [], `${mode} ${proxyMode}`)
    assert.ok(node.ran.includes('nftRulesetJson') && recording.has('nft-ruleset.txt'), `${mode} ${proxyMode}`)
  }
})

test('collectNode: a sudo password prompt, a failing connect and a node that never answers are one error line each', async () => {
  const sudo = Object.assign(
    new FakeNode({iptablesSave: {code: 1, stdout: '', stderr: 'sudo: a password is required\n'}}),
    {usesSudo: async () => true},
  )
  const a = await collectNode('node-a', async () => sudo, {timeoutMs: 1000})
  assert.deepEqual(
    [a.observation.reachable, a.observation.error],
    [false, 'sudo on the node wants a password: allow "sudo -n iptables-save" for the SSH user, or log in as root'],
  )
  assert.deepEqual([...a.recording.keys()], ['error.txt'])
  // The unprivileged network read runs alongside; no other sudo command is tried once sudo wants a password.
  assert.deepEqual(sudo.ran, ['iptablesSave', 'network'])
  const refused = await collectNode(
    'node-b',
    () => Promise.reject(new Error('SSH to 10.0.0.2:22 failed: connect ECONNREFUSED\nsecond line')),
    {timeoutMs: 1000},
  )
  assert.equal(refused.observation.error, 'SSH to 10.0.0.2:22 failed: connect ECONNREFUSED')
  const hung = await collectNode('node-c', () => new Promise<NodeAccess>(() => undefined), {timeoutMs: 20})
  assert.equal(hung.observation.error, 'node did not answer within 0.12s')
  // Connected, but a dump never ends: the deadline says which read was still running.
  const stuck = new (class extends FakeNode {
    override run<K extends NodeCommandKey>(key: K, ...args: ArgsOf<K>): Promise<RunResult> {
      return key === 'iptablesSave' ? new Promise<RunResult>(() => undefined) : super.run(key, ...args)
    }
  })({network: {code: 0, stdout: '## hairpin\n'}})
  const slow = await collectNode('node-d', async () => stuck, {timeoutMs: 20})
  assert.match(
    slow.observation.error ?? '',
    /^node did not finish its reads within 0\.12s \(still running: iptables-save for 0s\)$/,
  )
})

/** An SSH session stand-in that records every command line it is asked to run. */
function recordingSession(uid: string): SshChannel & {lines: string[]} {
  const lines: string[] = []
  return {
    lines,
    host: {hostName: '10.0.0.7', port: 2222, user: 'ops'},
    async exec(command: CommandLine): Promise<ExecResult> {
      lines.push(command)
      return answerBatch(command, (line) => ({
        code: 0,
        stdout: Buffer.from(line === 'id -u' ? `${uid}\n` : 'out'),
        stderr: '',
      }))
    },
    forward: () => Promise.reject(new Error('(SSH) Channel open failure: administratively prohibited: open failed')),
    close() {},
  }
}

test('ssh transport: only allow-list keys reach exec (refused by the type checker and at run time); sudo -n when not root', async () => {
  const session = recordingSession('1000')
  const access = new SshNodeAccess(session)
  // @ts-expect-error a free command string is not a key of the allow-list
  await assert.rejects(access.run('rm -rf /'), /"rm -rf \/" is not an allow-listed node command/)
  // @ts-expect-error neither is a plain word outside it
  await assert.rejects(access.run('shutdown'), /not an allow-listed node command/)
  await assert.rejects(
    (access.run as (key: string) => Promise<RunResult>)('toString'),
    /not an allow-listed node command/,
  )
  assert.deepEqual(session.lines, [], 'nothing reached the SSH exec')
  await access.run('iptablesSave')
  await access.run('network')
  await assert.rejects(
    access.run('dnsLookup', {name: 'web; reboot', server: '10.96.0.10', type: 'A'}),
    /refusing to build a DNS command/,
  )
  await assert.rejects(access.readFile('/proc/sys/../../etc/shadow'), /not an allow-listed file/)
  await access.readFile('/proc/sys/net/ipv4/ip_forward')
  // Whether the login is root, asked with the versions the chain by chain read waits for: one exec.
  assert.deepEqual(session.lines.slice(0, 2).map(linesOfBatch), [FIRST_EXEC, ['sudo -n iptables-save']])
  assert.equal(session.lines.length, 4)
  assert.match(session.lines[2], /^echo '## hairpin'/)
  assert.equal(session.lines[3], "cat -- '/proc/sys/net/ipv4/ip_forward'")
  const open = await access.openTcp('10.96.0.10', 53, 1000)
  assert.deepEqual(open.kind === 'refused' && open.outcome, 'not-probed')
  assert.deepEqual(access.describe(), {transport: 'ssh', address: 'ops@10.0.0.7:2222', tcpVia: 'an SSH port forward'})
  const root = recordingSession('0')
  await new SshNodeAccess(root).run('ipvsadm')
  assert.deepEqual(root.lines.map(linesOfBatch), [FIRST_EXEC, ['ipvsadm -Sn']])
})

/**
 * A session that runs each line with the real shell and the real gzip of this machine, with the dump programs
 * replaced by scripts in a folder put first on PATH (they print a fixed dump and exit with a chosen status).
 */
function shellSession(bin: string): SshChannel & {lines: string[]} {
  const lines: string[] = []
  return {
    lines,
    host: {hostName: '10.0.0.7', port: 22, compression: true},
    exec(command: CommandLine): Promise<ExecResult> {
      lines.push(command)
      const r = spawnSync('sh', ['-c', command], {
        env: {...process.env, PATH: `${bin}:${process.env.PATH}`},
        maxBuffer: 1 << 28,
      })
      return Promise.resolve({code: r.status, stdout: r.stdout, stderr: r.stderr.toString()})
    },
    forward: () => Promise.reject(new Error('no forwarding here')),
    close() {},
  }
}

test("ssh transport with Compression yes: dumps come back through gzip where the node has it, byte for byte, with the command's own exit status", async () => {
  const bin = mkdtempSync(join(tmpdir(), 'kpd-gzip-'))
  try {
    // A 2 MB dump without a final newline, that ends in text that looks like the trailer; and a failing read.
    const dump = `*nat\n${'-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m tcp --dport 443 -j KUBE-SVC-NPX46M4PTMTKRN6Y\n'.repeat(24_000)}#kpd-exit 7`
    writeFileSync(join(bin, 'dump.txt'), dump)
    writeFileSync(join(bin, 'iptables-save'), `#!/bin/sh\ncat '${join(bin, 'dump.txt')}'\n`, {mode: 0o755})
    writeFileSync(
      join(bin, 'ipvsadm'),
      '#!/bin/sh\necho "Can\'t initialize ipvs: Protocol not available" >&2\nexit 2\n',
      {mode: 0o755},
    )
    const session = shellSession(bin)
    const access = new SshNodeAccess(session)
    const save = await access.run('iptablesSave')
    assert.ok(save.kind === 'ran')
    assert.equal(save.code, 0)
    assert.equal(save.stdout.toString(), dump, 'the dump, exact')
    const ipvs = await access.run('ipvsadm')
    assert.deepEqual(ipvs.kind === 'ran' && [ipvs.code, ipvs.stdout.length, ipvs.stderr.trim()], [
      2,
      0,
      "Can't initialize ipvs: Protocol not available",
    ])
    const net = await access.run('routeTable')
    assert.ok(net.kind === 'ran' && net.code !== null, 'a small read is not compressed')
    // Whether the login is root, whether the node has gzip and the iptables versions: one exec.
    assert.deepEqual(linesOfBatch(session.lines[0]), ['id -u', 'command -v gzip', 'iptables -V', 'ip6tables -V'])
    assert.deepEqual(
      session.lines[1],
      `{ ${process.getuid?.() === 0 ? '' : 'sudo -n '}iptables-save; printf '\\n#kpd-exit %d\\n' "$?"; } | gzip -1`,
    )
    assert.equal(session.lines[3], 'ip route show')
    // Compression yes on a node without gzip: asked once, then plain.
    const noGzip = {...shellSession(bin), host: {hostName: '10.0.0.7', port: 22, compression: true}}
    const exec = noGzip.exec
    noGzip.exec = (command: CommandLine) =>
      exec(command.replace('command -v gzip', 'command -v kpd-no-such-gzip') as CommandLine).then((r) => {
        noGzip.lines.splice(-1, 1, command)
        return r
      })
    const withoutGzip = new SshNodeAccess(noGzip)
    assert.equal(((await withoutGzip.run('iptablesSave')) as {stdout: Buffer}).stdout.toString(), dump)
    await withoutGzip.run('ipvsadm')
    assert.deepEqual(noGzip.lines.slice(-3).map(linesOfBatch), [
      ['id -u', 'command -v gzip', 'iptables -V', 'ip6tables -V'],
      [process.getuid?.() === 0 ? 'iptables-save' : 'sudo -n iptables-save'],
      ['ipvsadm -Sn'],
    ])
    // Without Compression yes (OpenSSH's default), the same dump comes plain and gzip is not even asked about.
    const plainSession = {...shellSession(bin), host: {hostName: '10.0.0.7', port: 22}}
    const plainSave = await new SshNodeAccess(plainSession).run('iptablesSave')
    assert.equal(plainSave.kind === 'ran' && plainSave.stdout.toString(), dump)
    assert.deepEqual(plainSession.lines.map(linesOfBatch), [
      FIRST_EXEC,
      [process.getuid?.() === 0 ? 'iptables-save' : 'sudo -n iptables-save'],
    ])
  } finally {
    rmSync(bin, {recursive: true, force: true})
  }
})

test('ssh transport: the reads asked for at once (a dump too) go as one exec; each gets its own stdout, stderr and exit status back, byte for byte', async () => {
  const bin = mkdtempSync(join(tmpdir(), 'kpd-batch-'))
  try {
    // Outputs without a final newline, one that prints a line like a batch mark, a failing read with stderr only.
    writeFileSync(join(bin, 'iptables'), "#!/bin/sh\nprintf 'iptables v1.8.9 (nf_tables)'\n", {mode: 0o755})
    writeFileSync(join(bin, 'ip6tables'), '#!/bin/sh\necho "#kpd-batch-0123456789abcdef 0"\necho oops >&2\nexit 3\n', {
      mode: 0o755,
    })
    writeFileSync(join(bin, 'ip'), "#!/bin/sh\nprintf 'default via 10.0.0.1 dev eth0\\n\\n'\nprintf 'warn' >&2\n", {
      mode: 0o755,
    })
    writeFileSync(join(bin, 'ipvsadm'), '#!/bin/sh\necho "-A -t 10.96.0.1:443 -s rr"\n', {mode: 0o755})
    const session = shellSession(bin)
    const access = new SshNodeAccess({...session, host: {hostName: '10.0.0.7', port: 22}})
    const [v4, v6, routes, ipvs] = await Promise.all([
      access.run('iptablesVersion'),
      access.run('ip6tablesVersion'),
      access.run('routeTable'),
      access.run('ipvsadm'),
    ])
    assert.deepEqual(
      [v4, v6, routes, ipvs].map((r) => r.kind === 'ran' && [r.code, r.stdout.toString(), r.stderr]),
      [
        [0, 'iptables v1.8.9 (nf_tables)', ''],
        [3, '#kpd-batch-0123456789abcdef 0\n', 'oops\n'],
        [0, 'default via 10.0.0.1 dev eth0\n\n', 'warn'],
        [0, '-A -t 10.96.0.1:443 -s rr\n', ''],
      ],
    )
    // The versions in the first exec with `id -u`, the other two reads in one exec: exactly their allow-listed lines.
    const sudo = process.getuid?.() !== 0
    assert.equal(session.lines.length, 2, session.lines.join('\n'))
    assert.deepEqual(session.lines.map(linesOfBatch), [
      ['id -u', buildCommandLine('iptablesVersion', !sudo), buildCommandLine('ip6tablesVersion', !sudo)],
      [buildCommandLine('routeTable', !sudo), buildCommandLine('ipvsadm', !sudo)],
    ])
    // One read alone goes as itself.
    session.lines.length = 0
    await access.run('routeTable')
    assert.deepEqual(session.lines, ['ip route show'])
  } finally {
    rmSync(bin, {recursive: true, force: true})
  }
})

test('loggedAccess: one line per command, stream and file read with the transport, outcome and duration; results unchanged', async () => {
  const dir = 'examples/broken-cluster/nodes/node-a'
  const plain = SnapshotNodeAccess.fromFolder(dir)
  const lines: string[] = []
  const logged = loggedAccess(SnapshotNodeAccess.fromFolder(dir), 'node-a', (l) => lines.push(l))
  const [a, b] = [await plain.run('iptablesSave'), await logged.run('iptablesSave')]
  assert.deepEqual(b, a)
  assert.equal(a.kind, 'ran')
  await logged.run('ipvsadm')
  await logged.readFile('/proc/sys/net/ipv4/ip_forward')
  await logged.openTcp('10.96.10.10', 80, 1000)
  const where = `node-a [snapshot ${plain.describe().address}]`
  const size = a.kind === 'ran' ? a.stdout.length : 0
  assert.deepEqual(
    lines.map((l) => l.replace(/ in \d+\.\d\ds$/, '')),
    [
      `${where} run iptablesSave → exit 0, ${size < 10_240 ? `${size} B` : `${Math.round(size / 1024)} KiB`}`,
      `${where} run ipvsadm → ${describeRun(await plain.run('ipvsadm'))}`,
      `${where} read /proc/sys/net/ipv4/ip_forward → ${describeFile(await plain.readFile('/proc/sys/net/ipv4/ip_forward'))}`,
      `${where} tcp 10.96.10.10:80 → ${describeTcp(await (plain as NodeAccess).openTcp('10.96.10.10', 80, 1000))}`,
    ],
  )
})

function describeRun(r: RunResult): string {
  return r.kind === 'ran' ? `exit ${r.code}, ${r.stdout.length} B` : `not recorded (${r.what})`
}

function describeFile(r: FileRead): string {
  return r.kind === 'read'
    ? `${r.content.length} B`
    : r.kind === 'missing'
      ? `missing: ${r.reason}`
      : `not recorded (${r.what})`
}

function describeTcp(r: TcpOpen): string {
  return r.kind === 'open' ? 'open' : `${r.outcome}: ${r.reason}`
}

test('dns.json: one answer per record type; an older one (A only, at the top level) reads as its A answer, a malformed one as not recorded', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpd-dns-'))
  const dnsOf = (json: unknown) => {
    writeFileSync(join(dir, 'iptables-save.txt'), IPTABLES_SAVE)
    writeFileSync(join(dir, 'dns.json'), JSON.stringify(json))
    return readNodeBundle(dir, 'node-a').dns
  }
  const base = {
    name: 'web.shop.svc.cluster.local',
    server: '10.96.0.10',
    method: 'DNS over TCP through an SSH port forward',
  }
  try {
    const answers = [
      {type: 'A', rcode: 'NOERROR', addresses: ['10.96.10.10']},
      {type: 'AAAA', addresses: [], error: 'no DNS answer within 3s'},
    ]
    assert.deepEqual(dnsOf({...base, answers}), {...base, answers})
    assert.deepEqual(dnsOf({...base, rcode: 'NOERROR', addresses: ['10.96.10.10']}), {
      ...base,
      answers: [{type: 'A', rcode: 'NOERROR', addresses: ['10.96.10.10']}],
    })
    assert.deepEqual(dnsOf({...base, addresses: [], error: 'connection refused'}), {
      ...base,
      answers: [{type: 'A', addresses: [], error: 'connection refused'}],
    })
    assert.deepEqual(dnsOf({...base, method: 'none', addresses: [], error: 'no way'}), {
      ...base,
      method: 'none',
      answers: [],
      error: 'no way',
    })
    for (const bad of [
      {...base, answers: [{type: 'MX', addresses: []}]},
      {...base, answers: [{type: 'A', addresses: [7]}]},
      {...base},
      {name: 'x', server: 1, method: 'm', addresses: []},
    ])
      assert.equal(dnsOf(bad), undefined, JSON.stringify(bad))
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})
