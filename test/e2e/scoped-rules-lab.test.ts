import assert from 'node:assert/strict'
import {spawnSync} from 'node:child_process'
import {randomBytes} from 'node:crypto'
import {mkdtempSync, rmSync, symlinkSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {after, describe, test} from 'node:test'
import type {V1Service} from '@kubernetes/client-node'
import {labGuard} from '../helpers/lab-guard.js'
import {DNS, labEndpoints, labPods, NODES, WEB, type LabService} from '../fixtures/lab-cluster.js'
import {foreignFilterRules} from '../fixtures/foreign-rules.js'
import {kubeProxyRules} from '../fixtures/kube-proxy-rules.js'
import {tryRun} from '../lab/sh.js'
import {endpointChainName, serviceChainNames, servicePortName} from '../../src/model/chain-names.js'
import {rulesScopeOf} from '../../src/model/rules-scope.js'
import type {NodeAccess, RunResult} from '../../src/node/transport/node-access.js'
import {buildCommandLine} from '../../src/node/node-commands.js'
import type {ArgsOf, NodeCommandKey} from '../../src/node/read/node-reads.js'
import {readScopedRules} from '../../src/node/read/scoped-rules.js'
import {withRuleCounters, type CounterChain} from '../../src/node/probe/rule-counters-read.js'
import {BufferSource} from '../../src/parse/dump-source.js'
import {IptablesSave} from '../../src/parse/iptables-save.js'
import {parseCountedChain} from '../../src/parse/rule-counters.js'

const why = labGuard()

/** A third Service beside the lab's two: its chains are another Service's, behind its own ClusterIP and NodePort. */
const API: LabService = {
  ...WEB,
  name: 'api',
  clusterIP: '10.96.20.20',
  ports: [{...WEB.ports[0], port: 8081, nodePort: 30081}],
}
const SERVICES = [WEB, DNS, API]

/** A node as the doctor reaches it, but local: each allow-listed line runs through a real shell in the namespace. */
class NetnsAccess implements NodeAccess {
  readonly sent: string[] = []
  constructor(
    private readonly ns: string,
    private readonly path?: string,
  ) {}

  async run<K extends NodeCommandKey>(key: K, ...args: ArgsOf<K>): Promise<RunResult> {
    const line = buildCommandLine(key, true, ...args)
    this.sent.push(line)
    const env = this.path ? {...process.env, PATH: `${this.path}:${process.env.PATH}`} : process.env
    const r = spawnSync('ip', ['netns', 'exec', this.ns, 'sh', '-c', line], {env, maxBuffer: 1 << 28, timeout: 60_000})
    return {kind: 'ran', code: r.status, stdout: r.stdout, stderr: r.stderr.toString()}
  }
  async openTcp(): Promise<never> {
    throw new Error('not used')
  }
  async readFile(): Promise<never> {
    throw new Error('not used')
  }
  describe() {
    return {transport: 'netns', address: this.ns, tcpVia: 'nothing'}
  }
  close(): void {}
}

function asV1Service(s: LabService): V1Service {
  return {
    metadata: {namespace: s.namespace, name: s.name},
    spec: {
      clusterIP: s.clusterIP,
      clusterIPs: [s.clusterIP],
      type: s.type,
      ports: s.ports.map((p) => ({name: p.name, port: p.port, nodePort: p.nodePort, protocol: p.protocol})),
    },
  }
}

/** The per-Service chains kube-proxy gives a Service on a node: its port chains and one SEP per endpoint. */
function ownChains(svc: LabService): string[] {
  return svc.ports.flatMap((sp) => {
    const spn = servicePortName(svc.namespace, svc.name, sp.name)
    const eps = labEndpoints(svc, sp, labPods())
    return [
      ...Object.values(serviceChainNames(spn, sp.protocol)),
      ...eps.map((e) => endpointChainName(spn, sp.protocol, `${e.ip}:${e.port}`)),
    ]
  })
}

/** Every chain of a dump: "table chain" → its policy and its rule lines. */
function chainsOf(dump: string): Map<string, {policy: string; rules: string[]}> {
  const out = new Map<string, {policy: string; rules: string[]}>()
  let table = ''
  for (const line of dump.split('\n')) {
    if (line.startsWith('*')) table = line.slice(1)
    else if (line.startsWith(':')) {
      const [name, policy] = line.slice(1).split(' ')
      out.set(`${table} ${name}`, {policy, rules: []})
    } else if (line.startsWith('-A ')) out.get(`${table} ${line.split(' ')[1]}`)!.rules.push(line)
  }
  return out
}

const PER_SERVICE = /^KUBE-(SVC|SVL|EXT|FW|SEP)-/

/** Whether this machine's `iptables` is iptables-nft 1.8.7 or later (the chain by chain read's condition). */
function nftIptables(): boolean {
  const m = /v1\.8\.(\d+) \(nf_tables\)|v1\.(9|\d\d)\.\d+ \(nf_tables\)/.exec(tryRun('iptables', ['-V']).stdout)
  return !!m && (m[1] === undefined || Number(m[1]) >= 7)
}

describe(
  'chain by chain reads of real iptables rules (iptables-nft)',
  {skip: why ?? (nftIptables() ? undefined : 'iptables here is not iptables-nft 1.8.7 or later')},
  () => {
    const ns = `kpdsr${randomBytes(3).toString('hex')}`
    const restore = 'iptables-restore'
    const save = 'iptables-save'
    const node = NODES[0]
    const load = (rules: string, noflush = false) => {
      const r = tryRun('ip', ['netns', 'exec', ns, restore, ...(noflush ? ['--noflush'] : [])], rules)
      assert.equal(r.code, 0, r.stderr)
    }
    const whole = () => tryRun('ip', ['netns', 'exec', ns, save]).stdout
    // What the kernel holds: a read must leave it as it was (no table made, as iptables-nft before 1.8.7 made them).
    const ruleset = () => tryRun('ip', ['netns', 'exec', ns, 'nft', 'list', 'ruleset']).stdout

    after(() => {
      tryRun('ip', ['netns', 'del', ns])
    })

    test("web reads its own chains, every chain that is nobody else's, and no other Service's; each chain as iptables-save has it", async () => {
      assert.equal(tryRun('ip', ['netns', 'add', ns]).code, 0)
      load(kubeProxyRules(node, SERVICES, labPods()))
      load(foreignFilterRules({docker: true, policyChain: {name: 'POLICY-FWD', dropTo: ['10.244.2.10']}}), true)
      const access = new NetnsAccess(ns)
      const before = ruleset()
      const r = await readScopedRules(access, 4, rulesScopeOf(asV1Service(WEB)))
      assert.equal(r.kind, 'read', r.kind === 'whole' ? r.why : '')
      assert.equal(ruleset(), before, 'the read changed the ruleset')
      assert.equal(access.sent[0], 'iptables -V')
      const scoped = r.kind === 'read' ? r.dump.toString('latin1') : ''
      const real = chainsOf(whole())
      // A table of empty accepting built-in chains changes no packet: the chain by chain dump leaves it out.
      for (const table of ['raw', 'mangle', 'nat', 'filter']) {
        const chains = [...real].filter(([k]) => k.startsWith(`${table} `))
        if (chains.every(([, c]) => c.policy === 'ACCEPT' && c.rules.length === 0))
          for (const [k] of chains) real.delete(k)
      }
      const read = chainsOf(scoped)
      const webChains = ownChains(WEB)
      const othersChains = [...ownChains(DNS), ...ownChains(API)]
      // Read: web's chains that the node has, and every chain not owned by a Service that a rule jumps to (kube-proxy's
      // canaries are jumped to by none).
      const jumpedTo = new Set(
        [...real].flatMap(([key, c]) => c.rules.map((l) => `${key.split(' ')[0]} ${/ -[jg] (\S+)/.exec(l)?.[1]}`)),
      )
      const builtin = (k: string) => /^[A-Z]+$/.test(k.split(' ')[1]) && real.get(k)!.policy !== '-'
      const expected = [...real.keys()]
        .filter((k) =>
          PER_SERVICE.test(k.split(' ')[1])
            ? webChains.includes(k.split(' ')[1])
            : builtin(k) ||
              jumpedTo.has(k) ||
              [
                'filter KUBE-SERVICES',
                'filter KUBE-EXTERNAL-SERVICES',
                'nat KUBE-SERVICES',
                'nat KUBE-NODEPORTS',
                'nat KUBE-MARK-MASQ',
                'nat KUBE-POSTROUTING',
              ].includes(k),
        )
        .sort()
      assert.deepEqual([...read.keys()].sort(), expected)
      assert.ok(
        othersChains.every((c) => !read.has(`nat ${c}`)),
        'no chain of kube-dns or api is read',
      )
      assert.ok(
        webChains.some((c) => read.has(`nat ${c}`) && c.startsWith('KUBE-SEP-')) &&
          read.has('filter POLICY-FWD') &&
          read.has('filter DOCKER-USER'),
      )
      // The jumps to the chains not read are still there, as rules of the chains read.
      assert.ok(read.get('nat KUBE-SERVICES')!.rules.some((l) => l.includes(`-d ${API.clusterIP}/32`)))
      for (const [key, chain] of read) assert.deepEqual(chain, real.get(key), key)
      // The dump parses as iptables-save's, and names its backend.
      assert.equal(IptablesSave.parse(new BufferSource(r.kind === 'read' ? r.dump : Buffer.alloc(0))).backend, 'nft')
      assert.match(scoped.split('\n')[0], /^# Generated by kproxy-doctor from ip6?tables v\d/)
    })

    test("a Service address or node port in the scope takes in that Service's chains too", async () => {
      const scope = rulesScopeOf(asV1Service(WEB))
      const r = await readScopedRules(new NetnsAccess(ns), 4, {
        ...scope,
        addresses: [...scope.addresses, API.clusterIP],
        ports: [...scope.ports, 8081],
      })
      assert.equal(r.kind, 'read')
      const read = chainsOf(r.kind === 'read' ? r.dump.toString('latin1') : '')
      const api = serviceChainNames(servicePortName('shop', 'api', 'http'), 'tcp')
      assert.ok(read.has(`nat ${api.svc}`), 'api by its ClusterIP')
      assert.ok(!read.has(`nat ${api.ext}`), 'not its NodePort chain: its node port is not in the scope')
      const byPort = await readScopedRules(new NetnsAccess(ns), 4, {...scope, ports: [...scope.ports, 30081]})
      const readByPort = chainsOf(byPort.kind === 'read' ? byPort.dump.toString('latin1') : '')
      assert.ok(
        readByPort.has(`nat ${api.ext}`) && readByPort.has(`nat ${api.svc}`),
        'api by its node port: its EXT chain and what that jumps to',
      )
    })

    test('a chain whose name the doctor will not pass to a shell: the whole dump is read instead, and the name is never sent', async () => {
      load('*filter\n:kpd;id$(id) - [0:0]\n-A FORWARD -j kpd;id$(id)\nCOMMIT\n', true)
      const access = new NetnsAccess(ns)
      const r = await readScopedRules(access, 4, rulesScopeOf(asV1Service(WEB)))
      assert.deepEqual(r, {kind: 'whole', why: '"kpd;id$(id)" is not a chain name the doctor passes on'})
      assert.ok(access.sent.every((line) => !line.includes('kpd;')))
    })
  },
)

describe(
  'iptables-legacy is read whole: its -S makes the kernel create a missing table and copies the whole table per chain',
  {
    skip:
      why ??
      (tryRun('sh', ['-c', 'command -v iptables-legacy && command -v iptables-legacy-restore']).code !== 0
        ? 'iptables-legacy is not installed'
        : undefined),
  },
  () => {
    const ns = `kpdsl${randomBytes(3).toString('hex')}`
    const bin = mkdtempSync(join(tmpdir(), 'kpd-scoped-'))
    after(() => {
      tryRun('ip', ['netns', 'del', ns])
      rmSync(bin, {recursive: true, force: true})
    })

    test('only the version is asked, and the tables are as they were', async () => {
      // A legacy node's `iptables` is iptables-legacy: the node's PATH says so here (the multi-call binary goes by its name).
      for (const tool of ['iptables', 'ip6tables'])
        symlinkSync(tryRun('sh', ['-c', `command -v ${tool}-legacy`]).stdout.trim(), join(bin, tool))
      assert.equal(tryRun('ip', ['netns', 'add', ns]).code, 0)
      assert.equal(
        tryRun('ip', ['netns', 'exec', ns, 'iptables-legacy-restore'], kubeProxyRules(NODES[0], SERVICES, labPods()))
          .code,
        0,
      )
      const tables = () =>
        tryRun('ip', ['netns', 'exec', ns, 'cat', '/proc/net/ip_tables_names']).stdout.split('\n').sort().join(' ')
      const before = tables()
      const access = new NetnsAccess(ns, bin)
      const r = await readScopedRules(access, 4, rulesScopeOf(asV1Service(WEB)))
      assert.equal(r.kind, 'whole')
      assert.match(r.kind === 'whole' ? r.why : '', /^iptables v\d+\.\d+\.\d+ \(legacy\): not iptables-nft$/)
      assert.deepEqual(access.sent, ['iptables -V'])
      assert.equal(tables(), before)
    })

    test('the rule counters: one iptables-save -c of nat before and after the probes, each chain as iptables -v -S lists it', async () => {
      // The rules restored with counters (seeded: rule n of the dump has n packets), so each rule's are its own.
      let n = 0
      const counted = kubeProxyRules(NODES[0], SERVICES, labPods())
        .split('\n')
        .map((l) => (l.startsWith('-A ') ? `[${++n}:${n * 60}] ${l}` : l))
        .join('\n')
      assert.equal(tryRun('ip', ['netns', 'exec', ns, 'iptables-legacy-restore', '-c'], counted).code, 0)
      const before = tryRun('ip', ['netns', 'exec', ns, 'cat', '/proc/net/ip_tables_names']).stdout
      // On a legacy node iptables-save is legacy's too (one alternative switches both).
      for (const tool of ['iptables-save', 'ip6tables-save'])
        symlinkSync(
          tryRun('sh', ['-c', `command -v ${tool.replace('-save', '-legacy-save')}`]).stdout.trim(),
          join(bin, tool),
        )
      const chains: CounterChain[] = ['KUBE-SERVICES', 'KUBE-NODEPORTS', ...ownChains(WEB)].map((chain) => ({
        family: 4,
        table: 'nat',
        chain,
      }))
      const access = new NetnsAccess(ns, bin)
      let probed = false
      const {counters} = await withRuleCounters(access, chains, () => Promise.resolve((probed = true)))
      assert.ok(probed)
      assert.deepEqual(access.sent, [
        'iptables -V',
        'iptables-save --modprobe=/bin/false -c -t nat',
        'iptables-save --modprobe=/bin/false -c -t nat',
      ])
      // The same chains, rules and counters as the chain by chain read (iptables -v -S CHAIN, one whole-table copy each).
      const chainByChain = new NetnsAccess(ns, bin)
      const expected = []
      for (const c of chains) {
        const r = await chainByChain.run('ruleCounters', c)
        if (r.kind !== 'ran' || r.code !== 0) continue
        const rules = parseCountedChain(r.stdout.toString().split('\n'))
        expected.push({
          ...c,
          rules: rules.map((x) => ({rule: x.rule, packets: String(x.packets), bytes: String(x.bytes)})),
        })
      }
      assert.ok(counters.read, JSON.stringify(counters))
      assert.ok(expected.length > 3 && expected.some((c) => c.rules.some((r) => r.packets !== '0')))
      assert.deepEqual(counters.before, expected)
      assert.deepEqual(counters.after, expected)
      assert.equal(tryRun('ip', ['netns', 'exec', ns, 'cat', '/proc/net/ip_tables_names']).stdout, before)
    })
  },
)
