/**
 * The registry of node reads (src/node/read/node-reads.ts) is complete: every row can be built, parsed, recorded,
 * served and allowed. A row added without one of these fails here, naming the row.
 */
import assert from 'node:assert/strict'
import {test} from 'node:test'
import {argvOf, buildCommandLine} from '../../src/node/node-commands.js'
import {CONNTRACK_PROTOCOLS, NFT_KUBE_PROXY_FAMILIES} from '../../src/node/read/command-arguments.js'
import {NODE_FILES} from '../../src/node/read/node-files.js'
import {
  BACKEND_SAVES,
  NODE_READS,
  readOf,
  takesArguments,
  type ArgsOf,
  type NodeCommandKey,
} from '../../src/node/read/node-reads.js'
import {PodExecNodeAccess} from '../../src/node/transport/pod/pod-exec-transport.js'
import {POD_TRANSPORTS, TRANSPORT_NAMES} from '../../src/node/transport/transport-names.js'
import {sudoAllows, sudoersSpecs} from '../helpers/sudoers-specs.js'

type Query = {[K in NodeCommandKey]: ArgsOf<K> extends [] ? never : K}[NodeCommandKey]

/** Arguments for every read that takes some: a row that takes arguments and has none here does not compile. */
const SAMPLES: {[K in Query]: Array<ArgsOf<K>[0]>} = {
  dnsLookup: [
    {name: 'web.shop.svc.cluster.local', server: '10.96.0.10', type: 'A'},
    {name: 'web.shop.svc.cluster.local', server: 'fd00:10:96::a', type: 'AAAA'},
  ],
  pathSysctls: [{interfaces: []}, {interfaces: ['eth0', 'vlan.100'], ipv6: true}],
  routeGet: [{address: '10.244.1.5'}, {address: 'fd00:244::5'}],
  conntrackList: CONNTRACK_PROTOCOLS.flatMap((protocol) =>
    ['10.96.0.10', 'fd00:10:96::a'].map((address) => ({protocol, address})),
  ),
  conntrackProbe: [
    {address: '10.96.0.10', port: 80},
    {address: 'fd00:10:96::a', port: 30080},
  ],
  ruleCounters: [
    {family: 4, table: 'nat', chain: 'KUBE-SVC-ABCDEFGHIJKLMNOP'},
    {family: 6, table: 'filter', chain: 'KUBE-SERVICES'},
  ],
  tableCounters: [
    {family: 4, table: 'nat'},
    {family: 6, table: 'filter'},
  ],
  nftKubeProxyTable: NFT_KUBE_PROXY_FAMILIES.flatMap((family) => [true, false].map((json) => ({family, json}))),
  iptablesChains: [
    {family: 4, reads: [{table: 'nat', chain: 'KUBE-SERVICES'}]},
    {family: 6, reads: [{table: 'filter', chain: 'INPUT'}]},
  ],
}

const KEYS = Object.keys(NODE_READS) as NodeCommandKey[]

/** Each read with the arguments to build it with (none for a fixed command). */
function builds(): Array<{key: NodeCommandKey; args: unknown[]}> {
  return KEYS.flatMap((key) =>
    takesArguments(readOf(key))
      ? ((SAMPLES as Record<string, unknown[] | undefined>)[key] ?? []).map((a) => ({key, args: [a]}))
      : [{key, args: []}],
  )
}

const line = (key: NodeCommandKey, isRoot: boolean, args: unknown[]): string =>
  (buildCommandLine as unknown as (k: NodeCommandKey, root: boolean, ...a: unknown[]) => string)(key, isRoot, ...args)

const argv = (key: NodeCommandKey, args: unknown[]): readonly string[] =>
  (argvOf as unknown as (k: NodeCommandKey, ...a: unknown[]) => readonly string[])(key, ...args)

test('every read builds its command line (a read that takes arguments has samples in this test)', () => {
  for (const key of KEYS) {
    const made = builds().filter((b) => b.key === key)
    assert.ok(made.length > 0, `${key}: no arguments to build it with (add samples to SAMPLES)`)
    for (const {args} of made) assert.notEqual(line(key, true, args).trim(), '', key)
  }
})

test('every read names the parser of its output', () => {
  for (const key of KEYS) assert.equal(typeof readOf(key).parse, 'function', `${key}: no parser`)
})

test("every read says where its output is kept in a node's recording, and every file of a recording has its reads", () => {
  const files: string[] = Object.values(NODE_FILES)
  const gathering: string[] = [NODE_FILES.pathReads, NODE_FILES.dns]
  const named = new Set<string>()
  for (const key of KEYS) {
    const r = readOf(key).recorded
    const kinds = ['file', 'entryOf', 'notRecorded'].filter((k) => k in r)
    assert.equal(kinds.length, 1, `${key}: recorded as ${JSON.stringify(r)}`)
    if ('file' in r) assert.ok(files.includes(r.file), `${key}: ${r.file} is not a file of a node's recording`)
    if ('entryOf' in r) assert.ok(gathering.includes(r.entryOf), `${key}: ${r.entryOf} does not gather reads`)
    if ('notRecorded' in r) assert.ok(r.notRecorded.trim().length > 10, `${key}: not recorded, but why?`)
    named.add('file' in r ? r.file : 'entryOf' in r ? r.entryOf : '')
  }
  // kube-proxy.json holds what kube-proxy's own endpoints answered over TCP; agent-not-read.txt why an implementer's
  // agent (Cilium's) was not read; error.txt why the node was not read; nft-not-read.txt why the nft ruleset was not;
  // iptables-backends-not-read.txt which backend saves could not run.
  assert.deepEqual(
    files.filter((f) => !named.has(f)),
    [
      NODE_FILES.nftNotRead,
      NODE_FILES.backendsNotRead,
      NODE_FILES.kubeProxy,
      NODE_FILES.agentNotRead,
      NODE_FILES.error,
    ],
  )
})

test('every read names the transports that serve it, and each of them can', () => {
  const ownWays = Object.keys(PodExecNodeAccess.OWN_WAYS)
  for (const key of KEYS) {
    const read = readOf(key)
    const served = read.transports
    assert.ok(served.length > 0, `${key}: no transport serves it`)
    assert.equal(new Set(served).size, served.length, `${key}: a transport named twice`)
    for (const t of served) assert.ok((TRANSPORT_NAMES as readonly string[]).includes(t), `${key}: no transport ${t}`)
    // Every read has a shell form: the SSH transport runs them all.
    assert.ok(served.includes('ssh'), `${key}: not served over SSH`)
    // The Pod transports are one engine: both serve a read, or neither.
    const pods = POD_TRANSPORTS.filter((t) => served.includes(t))
    assert.ok(
      pods.length === 0 || pods.length === POD_TRANSPORTS.length,
      `${key}: served by ${pods.join(' and ')} only`,
    )
    if (pods.length > 0)
      assert.ok(
        read.argv !== undefined || ownWays.includes(key),
        `${key}: served by the Pod transports, which run argv (no shell), but it has no argv and no way of their own`,
      )
    else assert.ok(read.withoutShell?.trim(), `${key}: not served by the Pod transports: say what is given up`)
    // A snapshot answers with what was recorded: exactly the reads recorded as a file of their own.
    assert.equal(served.includes('snapshot'), 'file' in read.recorded, `${key}: snapshot vs recorded file`)
  }
  for (const key of ownWays)
    assert.ok(
      readOf(key as NodeCommandKey).transports.includes('kube-proxy'),
      `${key}: a Pod way for a read not served`,
    )
})

test('root: a root read runs as `sudo -n` where the login is not root and the sudoers file allows it; the others never', () => {
  const specs = sudoersSpecs()
  assert.ok(specs.length > 5, 'the sudoers file lists the reads')
  for (const {key, args} of builds()) {
    const root = readOf(key).root
    assert.doesNotMatch(line(key, true, args), /^sudo /, `${key}: sudo as root`)
    if (root === 'only') {
      assert.throws(() => line(key, false, args), /as root only/, `${key}: built without root`)
      continue
    }
    const asUser = line(key, false, args)
    if (root === 'no') assert.doesNotMatch(asUser, /^sudo /, `${key}: sudo for a read that needs no root`)
    else {
      assert.match(asUser, /^sudo -n /, key)
      assert.ok(
        specs.some((s) => sudoAllows(s, asUser.slice('sudo -n '.length).replace(/'/g, ''))),
        `${key}: "${asUser}" is not in deploy/sudoers`,
      )
    }
  }
})

test('argv and shell line run the same program with the same words', () => {
  for (const {key, args} of builds()) {
    const read = readOf(key)
    if (read.argv === undefined) continue
    assert.equal(line(key, true, args).replace(/'/g, ''), argv(key, args).join(' '), key)
  }
})

test('only a whole dump is compressed on the wire: one recorded as its own file, or the whole table the counters are read from', () => {
  for (const key of KEYS) {
    const read = readOf(key)
    if (read.compressible)
      assert.ok(read.argv !== undefined && ('file' in read.recorded || key === 'tableCounters'), key)
  }
})

test("a program's absence costs the same whichever read runs it", () => {
  const costs = new Map<string, Map<string, string[]>>()
  for (const {key, args} of builds()) {
    const read = readOf(key)
    const programs = new Set([
      ...(read.argv !== undefined ? [argv(key, args)[0]] : []),
      ...Object.keys(read.whenMissing ?? {}),
    ])
    for (const program of programs) {
      const cost = read.whenMissing?.[program] ?? ''
      const byCost = costs.get(program) ?? new Map<string, string[]>()
      byCost.set(cost, [...new Set([...(byCost.get(cost) ?? []), key])])
      costs.set(program, byCost)
    }
  }
  for (const [program, byCost] of costs)
    assert.equal(byCost.size, 1, `${program}: ${JSON.stringify(Object.fromEntries(byCost))}`)
  assert.ok(costs.get('ip')?.size === 1 && !costs.get('ip')?.has(''), 'ip costs more than one read')
})

test("the backend saves: each family's two backends, each recorded whole", () => {
  assert.deepEqual(BACKEND_SAVES.map((b) => `${b.family} ${b.backend}`).sort(), [
    '4 legacy',
    '4 nft',
    '6 legacy',
    '6 nft',
  ])
  for (const b of BACKEND_SAVES) assert.ok('file' in readOf(b.command).recorded, b.command)
})
