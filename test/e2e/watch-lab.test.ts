/**
 * svc --watch against the lab: the real test API server's watches and the nodes' real rules. A change to the
 * Service's EndpointSlice (web-b2 no longer ready, kube-proxy's rules not yet following) and a change to node-b's
 * rules each print exactly their change lines (and, with -o json, one document a line); Ctrl-C ends the process and
 * everything it started, with the last diagnosis' exit code.
 */
import assert from 'node:assert/strict'
import {spawn, type ChildProcess} from 'node:child_process'
import {existsSync, readdirSync, readFileSync} from 'node:fs'
import {dirname, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'
import {describe, test} from 'node:test'
import {labGuard} from '../helpers/lab-guard.js'
import {withLab} from '../helpers/lab-suite.js'
import {schemaErrors} from '../helpers/report-schema.js'
import type {NetnsLab} from '../lab/netns-lab.js'
import {labAccess} from '../helpers/lab-cli.js'
import {tryRun} from '../lab/sh.js'
import {buildCommandLine, linesOfBatch} from '../../src/node/node-commands.js'
import {uncompressed} from '../helpers/command-lines.js'

const why = labGuard()
const BIN = resolve(dirname(fileURLToPath(import.meta.url)), '../../../bin/run.js')
/** What the doctor watches in the lab: the Service, its slices, its Pods, kube-proxy's and 8 agents' Pods. */
const WATCHES = 12
const CLOCK = /^\d\d:\d\d:\d\d /

const WEB_B2_DNAT =
  '33.3% of new connections DNAT to 10.244.2.11:8080 (via KUBE-SEP-BTZNBNILETY57XCS), which is not a ready endpoint'
const ENTRIES = ['pod→ClusterIP', 'node→ClusterIP', 'outside→NodePort', 'pod→itself']
/** web-b2 no longer ready in its EndpointSlice while both nodes' rules still send to it. */
const WEB_B2_NOT_READY = [
  `shop/web: verdict ok → failing (✗ shop/web: pod→ClusterIP (http) breaks at DNAT on node-a: ${WEB_B2_DNAT})`,
  ...ENTRIES.map((e) => `node-a: ${e} ✓ → ✗ DNAT (${WEB_B2_DNAT})`),
  `node-a: + KPD-PATH-BROKEN: pod→ClusterIP (http) breaks at DNAT: ${WEB_B2_DNAT}`,
  ...ENTRIES.map((e) => `node-b: ${e} ✓ → ✗ DNAT (${WEB_B2_DNAT})`),
  'node-b: + KPD-ENDPOINT-NOT-READY: endpoint 10.244.2.11:8080 (pod web-b2) is not ready: not ready',
  `node-b: + KPD-PATH-BROKEN: pod→ClusterIP (http) breaks at DNAT: ${WEB_B2_DNAT}`,
]
const WEB_B2_READY_AGAIN = [
  'shop/web: verdict failing → ok (✓ shop/web: every traced path works on 2 node(s))',
  ...ENTRIES.map((e) => `node-a: ${e} ✗ DNAT → ✓`),
  'node-a: - KPD-PATH-BROKEN',
  ...ENTRIES.map((e) => `node-b: ${e} ✗ DNAT → ✓`),
  'node-b: - KPD-ENDPOINT-NOT-READY',
  'node-b: - KPD-PATH-BROKEN',
]
const NO_DNAT =
  'KUBE-SEP-FZQ6KZLGXRSKN2AD (endpoint 10.244.1.10:8080, web-a1) has no DNAT rule: the jump falls through and the endpoint never gets traffic'
/** node-b's rules lose the DNAT of web-a1's endpoint chain. */
const NODE_B_NO_DNAT = [
  `shop/web: verdict ok → failing (✗ shop/web: pod→ClusterIP (http) breaks at endpoint on node-b: ${NO_DNAT})`,
  ...ENTRIES.map((e) => `node-b: ${e} ✓ → ✗ endpoint (${NO_DNAT})`),
  'node-b: + KPD-SEP-MISSING: KUBE-SEP-FZQ6KZLGXRSKN2AD (endpoint 10.244.1.10:8080 (pod web-a1 on node-a)) has no DNAT rule: the jump falls through, the endpoint gets no traffic from this node',
  'node-b: + KPD-NODE-DIVERGES: node-b sends shop/web:http to {10.244.2.10:8080, 10.244.2.11:8080, ?} while 1 other node(s) (node-a) send it to {10.244.1.10:8080, 10.244.2.10:8080, 10.244.2.11:8080}',
]
const NODE_B_FIXED = [
  'shop/web: verdict failing → ok (✓ shop/web: every traced path works on 2 node(s))',
  ...ENTRIES.map((e) => `node-b: ${e} ✗ endpoint → ✓`),
  'node-b: - KPD-SEP-MISSING',
  'node-b: - KPD-NODE-DIVERGES',
]

const CLUSTER_IP = '10.96.10.10'
const DNS_IP = '10.96.0.10'
/** A chain by chain read of the rules (`iptables --modprobe=/bin/false -w 5 -t TABLE -S 'CHAIN'; …`). */
const isChainRead = (line: string) => /^ip6?tables --modprobe=\/bin\/false -w 5 -t \w+ -S /.test(line)

/**
 * What a round that reads only a node's rules sends to a lab node (logged in as root): the session's own questions,
 * the rules of every backend (iptables chain by chain, the other iptables backend, nft's tables, IPVS) and conntrack
 * for the Service's and the DNS Service's addresses; not kube-proxy's answers, the network, the routes, the sysctls.
 */
function rulesRoundCommands(lab: NetnsLab, node: string): string[] {
  const line = buildCommandLine
  const nftBackend = (tool: string) =>
    /\(nf_tables\)/.test(tryRun('ip', ['netns', 'exec', lab.nodeNs(node), tool, '-V']).stdout)
  return [
    line('uid', true),
    ...(node === 'node-a' ? [line('hasGzip', true)] : []),
    line('iptablesVersion', true),
    line('ip6tablesVersion', true),
    line('nftSets', true),
    line(nftBackend('iptables') ? 'iptablesLegacySave' : 'iptablesNftSave', true),
    line(nftBackend('ip6tables') ? 'ip6tablesLegacySave' : 'ip6tablesNftSave', true),
    line('ipvsadm', true),
    line('conntrackList', true, {protocol: 'tcp', address: CLUSTER_IP}),
    line('conntrackList', true, {protocol: 'udp', address: DNS_IP}),
  ].sort()
}

/** The lines without their time of day, each checked to start with one. */
function untimed(lines: string[]): string[] {
  for (const l of lines) assert.match(l, CLOCK)
  return lines.map((l) => l.replace(CLOCK, ''))
}

/** A running `svc --watch`: its output as it comes, and every process it started (to check none outlives it). */
class WatchRun {
  readonly child: ChildProcess
  stdout = ''
  stderr = ''
  readonly descendants = new Set<number>()
  private readonly sampler: NodeJS.Timeout

  constructor(args: string[]) {
    this.child = spawn(process.execPath, [BIN, ...args], {env: {...process.env, NO_COLOR: '1', COLUMNS: ''}})
    this.child.stdout!.on('data', (d: Buffer) => (this.stdout += d.toString('utf8')))
    this.child.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString('utf8')))
    this.sampler = setInterval(() => this.sample(this.child.pid!), 100)
  }

  /** Records the process tree under `pid` (Linux: /proc/PID/task/TID/children). */
  private sample(pid: number): void {
    const dir = `/proc/${pid}/task`
    if (!existsSync(dir)) return
    try {
      for (const tid of readdirSync(dir))
        for (const c of readFileSync(`${dir}/${tid}/children`, 'utf8').split(' ').filter(Boolean).map(Number)) {
          this.descendants.add(c)
          this.sample(c)
        }
    } catch {
      // it ended while being read
    }
  }

  lines(): string[] {
    return this.stdout.split('\n').filter(Boolean)
  }

  /** Waits (polling, at most `ms`) until `ready` holds. */
  async until(ready: () => boolean, what: string, ms = 90_000): Promise<void> {
    for (let waited = 0; !ready(); waited += 100) {
      if (waited > ms || this.child.exitCode !== null)
        throw new Error(`${what}: not within ${ms / 1000}s\nstdout:\n${this.stdout}\nstderr:\n${this.stderr}`)
      await new Promise((r) => setTimeout(r, 100))
    }
  }

  /** The lines printed after the first `from`, once they stopped coming (no new line for `quietMs`). */
  async settledAfter(from: number, what: string, quietMs = 7000): Promise<string[]> {
    await this.until(() => this.lines().length > from, what)
    let seen = -1
    while (seen !== this.lines().length) {
      seen = this.lines().length
      await new Promise((r) => setTimeout(r, quietMs))
    }
    return this.lines().slice(from)
  }

  async interrupt(): Promise<number | null> {
    const ended = new Promise<number | null>((r) => this.child.once('exit', (code) => r(code)))
    this.child.kill('SIGINT')
    const code = await ended
    clearInterval(this.sampler)
    return code
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** The Service's EndpointSlices with web-b2's endpoint as ready or not (the API only: kube-proxy's rules stay). */
function setWebB2Ready(lab: NetnsLab, ready: boolean): void {
  type Slice = {endpoints?: Array<{targetRef?: {name?: string}; conditions?: Record<string, boolean>}>}
  const slices = structuredClone(lab.api.objects.get('endpointslices') ?? []) as Slice[]
  for (const s of slices)
    for (const e of s.endpoints ?? [])
      if (e.targetRef?.name === 'web-b2') e.conditions = {...e.conditions, ready, serving: ready}
  lab.api.set('endpointslices', slices as never)
}

describe('svc --watch: change lines as the cluster and the nodes change, Ctrl-C ends it cleanly', {skip: why}, () => {
  let lab: NetnsLab
  withLab((l) => {
    lab = l
    lab.keepConntrack = true
  })
  const args = (...extra: string[]) => [
    'svc',
    'web',
    '-n',
    'shop',
    ...labAccess(lab),
    '--no-probe',
    '--watch',
    ...(extra.includes('--watch-interval') ? [] : ['--watch-interval', '3']),
    ...extra,
  ]

  test('table: the first diagnosis in full, then an EndpointSlice change, node-b losing a DNAT rule, each undone', async () => {
    const run = new WatchRun(args())
    try {
      await run.until(() => lab.api.openWatches >= WATCHES, 'the watches are open')
      assert.match(run.lines()[0], /^✓ shop\/web: /)
      const first = run.lines().length

      setWebB2Ready(lab, false)
      const notReady = await run.settledAfter(first, 'web-b2 not ready')
      assert.deepEqual(untimed(notReady), WEB_B2_NOT_READY)
      setWebB2Ready(lab, true)
      const readyAgain = await run.settledAfter(first + notReady.length, 'web-b2 ready again')
      assert.deepEqual(untimed(readyAgain), WEB_B2_READY_AGAIN)

      lab.applyRules('node-b', {dropDnatFor: '10.244.1.10'})
      const n = run.lines().length
      const broken = await run.settledAfter(n, 'node-b without the DNAT to web-a1')
      assert.deepEqual(untimed(broken), NODE_B_NO_DNAT)
      lab.clearFaults()
      const fixed = await run.settledAfter(n + broken.length, 'node-b fixed')
      assert.deepEqual(untimed(fixed), NODE_B_FIXED)
    } finally {
      // Ended before the lab is put back: a round under way while the rules are loaded again would judge a node caught
      // between two loads, and its verdict would be the command's exit code.
      const code = await run.interrupt()
      lab.clearFaults()
      setWebB2Ready(lab, true)
      assert.equal(code, 0, run.stderr)
    }
    assert.equal(alive(run.child.pid!), false)
    for (const pid of run.descendants) assert.equal(alive(pid), false, `process ${pid} outlived the watch`)
    assert.equal(lab.api.openWatches, 0)
  })

  test("an EndpointSlice change reads no API list and only the nodes' rules, twice: the round and its re-check after the settle", async () => {
    // A long interval: no interval round falls in the change's rounds.
    const run = new WatchRun(args('--verbose', '--watch-interval', '60'))
    try {
      await run.until(() => lab.api.openWatches >= WATCHES, 'the watches are open')
      await run.until(
        () => /round 1: API listed \(first diagnosis\); nodes: all of node-a, node-b$/m.test(run.stderr),
        'round 1 said',
      )
      lab.clearCommandLogs()
      const requestsBefore = lab.api.requests.length
      const first = run.lines().length
      setWebB2Ready(lab, false)
      const notReady = await run.settledAfter(first, 'web-b2 not ready')
      assert.deepEqual(untimed(notReady), WEB_B2_NOT_READY)
      assert.deepEqual(lab.api.requests.slice(requestsBefore), [], 'no API request: the watched objects from the store')
      for (const node of ['node-a', 'node-b']) {
        // A dump alone in its exec comes compressed on node-a (Compression yes); in a batch, the batch's output is.
        const log = lab.commandLog(node).flatMap(linesOfBatch).map(uncompressed)
        assert.deepEqual([...new Set(log.filter((c) => !isChainRead(c)))].sort(), rulesRoundCommands(lab, node), node)
        // Two rounds: the change's, and the re-check of its break after the settle.
        assert.equal(log.filter((c) => c === buildCommandLine('iptablesVersion', true)).length, 2, node)
        assert.ok(log.some(isChainRead), `rules read chain by chain on ${node}`)
      }
      const rounds = run.stderr
        .split('\n')
        .filter((l) => /round \d+: /.test(l))
        .map((l) => l.replace(/^.*?round \d+: /, ''))
      assert.deepEqual(rounds, [
        'API listed (first diagnosis); nodes: all of node-a, node-b',
        "API from the watch's store, the rest kept (EndpointSlice web-abc12 changed); nodes: rules of node-a, node-b; other reads kept",
        'a break right after the change: the nodes are read again in 2s (kube-proxy may not have synced yet)',
        "API from the watch's store, the rest kept (re-check after the settle); nodes: rules of node-a, node-b; other reads kept",
      ])
    } finally {
      setWebB2Ready(lab, true)
      await run.interrupt()
    }
  })

  test('-o json: one document a line, the first with no changes, then the EndpointSlice change as `changes`', async () => {
    const run = new WatchRun(args('-o', 'json'))
    try {
      await run.until(() => lab.api.openWatches >= WATCHES, 'the watches are open')
      setWebB2Ready(lab, false)
      const docs = (await run.settledAfter(1, 'web-b2 not ready')).map((l) => JSON.parse(l))
      const all = [JSON.parse(run.lines()[0]), ...docs]
      for (const d of all) assert.equal(schemaErrors(d, 'svc'), null)
      assert.deepEqual(all[0].changes, [])
      assert.equal(docs.length, 1, run.stdout)
      assert.equal(docs[0].ok, false)
      // The same changes as the table's lines, in the document's fields.
      type Change = {
        kind: string
        node: string | null
        entry: string | null
        code: string | null
        from: string
        to: string
      }
      const said = (docs[0].changes as Change[]).map(
        (c) =>
          `${c.node ?? 'shop/web'}: ${c.kind === 'finding' ? `${c.to === 'present' ? '+' : '-'} ${c.code}` : `${c.entry ?? c.kind} ${c.from} → ${c.to}`}`,
      )
      const expected = WEB_B2_NOT_READY.map((l) => l.replace(/ \(.*$/, '').replace(/(KPD-[A-Z-]+):.*$/, '$1'))
      assert.deepEqual(said, expected)
    } finally {
      setWebB2Ready(lab, true)
      await run.interrupt()
    }
  })
})
