/**
 * Issue #32, keep it found: a hostile cluster and a hostile node, through the whole CLI. The lab's real HTTPS API server
 * serves Pod, Node, Service, EndpointSlice and label values holding terminal controls (clear screen, a window title, an
 * OSC 52 clipboard write, C1, a bidi override, U+2028, NEL), a line break before a forged verdict, a leading `-`
 * (`-oProxyCommand=…`), shell metacharacters and very long strings; node-b's sshd floods every command's output. Then
 * `svc`, `scan` and `collect svc` run live in every output format, and each output is checked exactly: no control
 * character but the format's own line breaks, no forged line, every printed command parsed by bash to exactly the argv
 * the report gives, with no word from the cluster before a `--` and nothing run when pasted; node-b fails with one line
 * naming it and the cap while node-a is judged; the doctor's peak RSS stays bounded.
 */
import assert from 'node:assert/strict'
import {randomBytes} from 'node:crypto'
import {existsSync, mkdtempSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {after, before, describe, test} from 'node:test'
import {capText, COMMAND_OUTPUT_CAP_BYTES} from '../../src/util/output-cap.js'
import {assertPastes} from '../helpers/command-pastes.js'
import {labGuard} from '../helpers/lab-guard.js'
import {withLab} from '../helpers/lab-suite.js'
import {runCli, type CliResult} from '../helpers/run-cli.js'
import {HostileSshd, rssHook} from '../lab/hostile-sshd.js'
import type {NetnsLab} from '../lab/netns-lab.js'

const why = labGuard()
/** What any pasted option or substitution would do: create this file. */
const PWNED = join(tmpdir(), `kpd-pwned-${randomBytes(6).toString('hex')}`)
/** Every hostile value holds this word, so a printed word taken from the cluster is recognised. */
const MARK = 'pwn'
/** The line a hostile name tries to start: a verdict of its own. */
const FORGED = '✓ shop/web: every traced path works'
const CONTROLS = '\x1b[2J\x1b[H\x1b]0;owned\x07\x1b]52;c;ZWNobyBwd24=\x07\x9b31m\u202e\u2028\u0085'
const SHELL = `$(touch ${PWNED});\`touch ${PWNED}\`|&<>'"`
/** A hostile value: the controls, shell metacharacters and a line break starting the forged line. */
const hostile = (base: string) => `${base}-${MARK}${CONTROLS}${SHELL}\r\n${FORGED}\t`
const OPTION = `-oProxyCommand=touch ${PWNED} ${MARK}`
const LONG = `${MARK}-`.repeat(3000)
/** The flood: every command node-b runs prints this forever (controls in it too). */
const FLOOD = `yes '${MARK}\x1b]52;c;ZWNobyBwd24=\x07'`
/** The doctor's peak RSS bound: its own footprint and one capped command's output, far from the gigabytes a flood took. */
const RSS_BOUND_MB = 400

/** What a terminal acts on (C0 and C1 controls, format characters such as bidi, line and paragraph separators). */
const CONTROL = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u

type Obj = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

/** Renames values (deep, whole strings only) as a hostile API server would serve them. */
function renamed<T>(value: T, names: Map<string, string>): T {
  return JSON.parse(JSON.stringify(value), (_, v) => (typeof v === 'string' ? (names.get(v) ?? v) : v)) as T
}

/** The lab's objects made hostile: names, addresses and labels of Pods, Nodes, a Service and its EndpointSlice. */
function makeHostile(lab: NetnsLab): void {
  const api = lab.api
  const get = (resource: string) => structuredClone(api.objects.get(resource as never) ?? []) as Obj[]
  const names = new Map<string, string>()
  for (const p of get('pods')) {
    const name = p.metadata.name as string
    if (name.startsWith('web-')) names.set(name, hostile(name))
    // kube-proxy's Pod on node-b gets a name that is an option of kubectl.
    if (p.metadata.namespace === 'kube-system' && p.spec.nodeName === 'node-b') names.set(name, `--kubeconfig=${PWNED}`)
  }
  const pods = renamed(get('pods'), names).map((p) => ({
    ...p,
    metadata: {...p.metadata, labels: {...p.metadata.labels, [`${MARK}.example/x`]: hostile('label')}},
  }))
  api.set('pods', pods)
  api.set('endpointslices', renamed(get('endpointslices'), names))

  const nodes = get('nodes').map((n) =>
    n.metadata.name === 'node-b'
      ? {
          ...n,
          metadata: {...n.metadata, labels: {...n.metadata.labels, evil: hostile('label'), long: LONG}},
          status: {...n.status, addresses: [...n.status.addresses, {type: 'ExternalIP', address: OPTION}]},
        }
      : n,
  )
  // A third Node no SSH config names, whose name and addresses are hostile: it is listed, never read, never an option.
  const nodeC = `${OPTION}${hostile('node-c')}${LONG}`
  nodes.push({
    metadata: {name: nodeC, labels: {'kubernetes.io/hostname': nodeC}},
    spec: {podCIDR: '10.244.3.0/24', podCIDRs: ['10.244.3.0/24']},
    status: {
      addresses: [
        {type: 'InternalIP', address: OPTION},
        {type: 'Hostname', address: hostile('host')},
      ],
      conditions: [{type: 'Ready', status: 'True', reason: 'KubeletReady'}],
    },
  })
  api.set('nodes', nodes)

  // A hostile Service beside web, selecting web's Pods, its port named with controls: kube-proxy never programmed it.
  const evil = hostile('evil')
  const web = get('services').find((s) => s.metadata.name === 'web')!
  const evilService = {
    ...web,
    metadata: {...web.metadata, name: evil, uid: `uid-${MARK}`, labels: {evil: hostile('label')}},
    spec: {
      ...web.spec,
      clusterIP: '10.96.10.99',
      clusterIPs: ['10.96.10.99'],
      ports: web.spec.ports.map((p: Obj) => ({...p, name: hostile('port'), nodePort: undefined})),
      type: 'ClusterIP',
    },
  }
  api.set('services', [...get('services'), evilService])
  const slice = get('endpointslices').find((s) => s.metadata.labels['kubernetes.io/service-name'] === 'web')!
  api.set('endpointslices', [
    ...get('endpointslices'),
    {
      ...slice,
      metadata: {...slice.metadata, name: hostile('slice'), labels: {'kubernetes.io/service-name': evil}},
      ports: slice.ports.map((p: Obj) => ({...p, name: hostile('port')})),
    },
  ])
}

/** Every `{command, argv}` a report holds (a finding's check and fix, the next steps, anywhere). */
function printedCommands(value: unknown, out: Array<{command: string; argv: string[][]}> = []) {
  if (Array.isArray(value)) for (const v of value) printedCommands(v, out)
  else if (value && typeof value === 'object') {
    const o = value as Obj
    if (typeof o.command === 'string' && Array.isArray(o.argv)) out.push({command: o.command, argv: o.argv})
    for (const v of Object.values(o)) printedCommands(v, out)
  }
  return out
}

describe('a hostile cluster and a flooding node through the whole CLI', {skip: why}, () => {
  let lab: NetnsLab
  withLab((l) => {
    lab = l
  })
  let dir: string
  let rssFile: string
  let sshd: HostileSshd
  let hook: string
  /** Every run, by its arguments, with its peak RSS in MiB. */
  const runs: Array<{args: string[]; r: CliResult; rssMb: number}> = []

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kpd-hostile-cluster-'))
    rssFile = join(dir, 'rss')
    hook = rssHook(dir, rssFile)
    makeHostile(lab)
    sshd = new HostileSshd(lab, dir)
    const flood = Object.fromEntries(
      [
        'id',
        'iptables',
        'iptables-save',
        'iptables-nft-save',
        'iptables-legacy-save',
        'nft',
        'sysctl',
        'ip',
        'cat',
      ].map((p) => [p, FLOOD]),
    )
    await sshd.start('node-b', flood)
  })

  after(async () => {
    await sshd?.restore('node-b').catch(() => undefined)
    sshd?.stopAll()
    if (dir) rmSync(dir, {recursive: true, force: true})
    rmSync(PWNED, {force: true})
  })

  async function doctor(args: string[]): Promise<CliResult> {
    rmSync(rssFile, {force: true})
    const full = [...args, '--kubeconfig', lab.kubeconfigPath, '--ssh-config', lab.sshConfigPath, '--timeout', '20']
    const r = await runCli(full, {NODE_OPTIONS: `--import=${hook}`}, 180_000)
    const rssMb = Number(readFileSync(rssFile, 'utf8')) / 1024
    runs.push({args, r, rssMb})
    return r
  }

  function assertPrintable(text: string, what: string): void {
    const bad = [...text].findIndex((ch) => ch !== '\n' && CONTROL.test(ch))
    assert.equal(
      bad,
      -1,
      `${what}: a control at ${bad}: ${JSON.stringify([...text].slice(Math.max(0, bad - 40), bad + 40).join(''))}`,
    )
    for (const line of text.split('\n'))
      assert.ok(!line.trimStart().startsWith(FORGED), `${what}: a hostile name starts a line: ${JSON.stringify(line)}`)
  }

  /** Each printed command pastes as its argv, runs nothing, and takes no word of the cluster's as an option. */
  function assertCommandsSafe(commands: Array<{command: string; argv: string[][]}>, what: string): void {
    for (const {command, argv} of commands) {
      assertPastes(command, argv, what)
      for (const stage of argv) {
        const end = stage.indexOf('--')
        for (const [i, word] of stage.entries()) {
          if (!word.includes(MARK)) continue
          assert.ok(end >= 0 && i > end, `${what}: ${JSON.stringify(word)} from the cluster before -- in ${command}`)
          assert.ok(
            !word.startsWith('-'),
            `${what}: ${JSON.stringify(word)} from the cluster is an option in ${command}`,
          )
        }
      }
    }
    assert.equal(existsSync(PWNED), false, `${what}: a pasted command ran something`)
  }

  const CAP_LINE = `printed more than ${capText(COMMAND_OUTPUT_CAP_BYTES)}: stopped there (the cap on one command's output)`

  for (const command of ['svc', 'scan'] as const) {
    test(`${command} in every output format: no control, no forged line, safe commands; node-b failed by its flood, node-a judged`, async () => {
      const base = command === 'svc' ? ['svc', 'web', '-n', 'shop', '--no-probe'] : ['scan', '-n', 'shop']
      const json = await doctor([...base, '-o', 'json'])
      assert.ok(json.json?.nodes, `${command} -o json: exit ${json.code}: ${json.stderr}`)
      const node = (name: string) => json.json.nodes.find((n: {name: string}) => n.name === name)
      assert.deepEqual([node('node-b')?.reachable, node('node-b')?.error], [false, `"id" ${CAP_LINE}`], json.stderr)
      assert.equal(node('node-a')?.reachable, true)
      // svc lists the hostile Node under its name, exactly, and never reads it.
      if (command === 'svc')
        assert.ok(
          json.json.nodes.some((n: {name: string; reachable: boolean}) => n.name.includes(OPTION) && !n.reachable),
          'node-c listed',
        )
      const commands = printedCommands(json.json)
      assert.ok(commands.length > 0, `${command}: some commands printed`)
      assertCommandsSafe(commands, `${command} -o json`)
      const known = new Set(commands.map((c) => c.command))

      // Every format the command has (scan draws no mermaid flowchart).
      const formats = ['table', 'json', 'yaml', 'junit', 'html', ...(command === 'svc' ? ['mermaid'] : [])]
      for (const format of formats) {
        const r = format === 'json' ? json : await doctor([...base, '-o', format])
        const what = `${command} -o ${format}`
        assert.equal(r.code, json.code, `${what}: the same exit code as -o json`)
        assert.ok([1, 3].includes(r.code), `${what}: exit ${r.code}: ${r.stderr}`)
        assertPrintable(r.stdout, `${what} stdout`)
        assertPrintable(r.stderr, `${what} stderr`)
        if (format === 'table') {
          // The flood: node-b is failed by one finding naming it and the cap; every line that says the cap names node-b.
          const lines = `${r.stdout}\n${r.stderr}`.split('\n').filter((l) => l.includes(CAP_LINE))
          assert.ok(lines.length > 0 && lines.every((l) => l.includes('node-b')), `${what}: ${lines.join(' | ')}`)
          assert.equal(
            lines.filter((l) => l.includes(`KPD-NODE-UNREADABLE [node-b] node-b could not be read: "id" ${CAP_LINE}`))
              .length,
            // svc: one; scan: one per Service (the findings are grouped by Service).
            command === 'svc' ? 1 : json.json.services.length,
            `${what}: ${lines.join(' | ')}`,
          )
          // Every command the table prints is one of the report's, which paste safely.
          const printed = r.stdout
            .split('\n')
            .map((l) => /^\s*(?:check|fix(?: \([^)]*\))?): (.*)$/.exec(l)?.[1])
            .filter((c): c is string => c !== undefined)
          for (const c of printed)
            assert.ok(known.has(c), `${what}: printed ${JSON.stringify(c)} is none of the report's`)
        }
      }
    })
  }

  test('collect svc in every output format: printable, node-b failed naming the cap; the bundle replays with no control', async () => {
    for (const format of ['table', 'json', 'yaml']) {
      const out = join(dir, `bundle-${format}`)
      const r = await doctor(['collect', 'svc', 'web', '-n', 'shop', '--out', out, '-o', format])
      assert.ok([0, 3].includes(r.code), `collect -o ${format}: exit ${r.code}: ${r.stderr}`)
      assertPrintable(r.stdout, `collect -o ${format} stdout`)
      assertPrintable(r.stderr, `collect -o ${format} stderr`)
      // The table says which node was not read; the documents say why.
      if (format === 'table') assert.match(r.stdout, /1 node\(s\) read, 1 not \(node-b\)/)
      else
        assert.deepEqual(
          r.json?.nodes,
          [
            {name: 'node-a', read: true, error: null},
            {name: 'node-b', read: false, error: `"id" ${CAP_LINE}`},
          ],
          `collect -o ${format}: ${r.stdout}`,
        )
      // The hostile Node: one warning line, no folder.
      assert.equal(r.stderr.split('\n').filter((l) => l.includes('has no folder in the bundle')).length, 1, r.stderr)
    }
    const replay = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', join(dir, 'bundle-table')])
    assertPrintable(replay.stdout, 'svc --snapshot stdout')
    assertPrintable(replay.stderr, 'svc --snapshot stderr')
  })

  test("the doctor's memory stays bounded in every run", (t) => {
    // svc in 6 formats, scan in 5, collect in 3.
    assert.equal(runs.length, 14, `${runs.length} runs measured`)
    const peak = Math.max(...runs.map((x) => x.rssMb))
    t.diagnostic(`peak RSS ${peak.toFixed(0)} MiB over ${runs.length} runs`)
    assert.ok(peak < RSS_BOUND_MB, `peak RSS ${peak.toFixed(0)} MiB`)
  })
})
