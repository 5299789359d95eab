/**
 * The proxy mode registry (src/model/modes) and the transport registry (src/node/transport/transports.ts) are
 * complete: every row has what the rest of the program asks of it, and what is derived from them (flag options, the
 * catalogue's modes, the JSON schema's enums, the chooser's order) follows them. A row added without one of these
 * fails here, naming the row; each check is shown to fail on a row stripped of what it checks.
 */
import assert from 'node:assert/strict'
import {readFileSync} from 'node:fs'
import {test} from 'node:test'
import {CATALOGUE} from '../../src/checks/catalogue.js'
import Scan from '../../src/commands/scan.js'
import Svc from '../../src/commands/svc.js'
import Trace from '../../src/commands/trace.js'
import {DUMP_FILES, PROXY_MODE_NAMES, PROXY_MODES, modeOfFiles} from '../../src/model/modes/index.js'
import type {ProxyModeAdapter} from '../../src/model/modes/mode.js'
import {RULE_STEPS, STEPS} from '../../src/model/steps.js'
import {podAddress} from '../../src/node/transport/pod/pod-address.js'
import {TRANSPORT_NAMES} from '../../src/node/transport/transport-names.js'
import {autoOrder, TRANSPORTS, VIA, type Transport} from '../../src/node/transport/transports.js'

const schema = JSON.parse(readFileSync('schema/report.schema.json', 'utf8'))

/** What a mode row lacks, one line each (empty: complete). */
function modeProblems(mode: ProxyModeAdapter): string[] {
  const out: string[] = []
  const fn = (name: string, f: unknown) => typeof f === 'function' || out.push(`${mode.mode}: no ${name}`)
  for (const name of ['recognise', 'readable', 'notRead', 'dataplane', 'leftovers'] as const) fn(name, mode[name])
  const v = mode.vocabulary
  if (!v) out.push(`${mode.mode}: no vocabulary`)
  else {
    if (v.mode !== mode.mode) out.push(`${mode.mode}: its vocabulary is of mode ${v.mode}`)
    for (const step of RULE_STEPS)
      if (typeof v.steps?.[step] !== 'string' || v.steps[step].trim() === '')
        out.push(`${mode.mode}: no name for the step ${step}`)
  }
  const files = mode.fromFiles
  if (!files) return [...out, `${mode.mode}: no tracer from files (fromFiles)`]
  fn('fromFiles.build', files.build)
  const known = (f: string) => Object.keys(DUMP_FILES).includes(f)
  if (!known(files.picks)) out.push(`${mode.mode}: picks ${files.picks}, no dump file of trace`)
  for (const n of files.needs ?? []) {
    if (!known(n.file)) out.push(`${mode.mode}: needs ${n.file}, no dump file of trace`)
    if (!n.why) out.push(`${mode.mode}: needs ${n.file} without saying why`)
  }
  for (const f of files.takes ?? []) if (!known(f)) out.push(`${mode.mode}: takes ${f}, no dump file of trace`)
  return out
}

/** What a transport row lacks, one line each (empty: complete). */
function transportProblems(name: string, row: Transport, others: Transport[]): string[] {
  const out: string[] = []
  if (typeof row.connect !== 'function') out.push(`${name}: no connector`)
  const auto = row.auto as Transport['auto'] | undefined
  if (!auto) out.push(`${name}: no auto-order entry (a rank, or why auto never uses it)`)
  else if ('rank' in auto) {
    if (!Number.isFinite(auto.rank)) out.push(`${name}: auto rank ${auto.rank}`)
    if (others.some((o) => 'rank' in o.auto && o.auto.rank === auto.rank))
      out.push(`${name}: auto rank ${auto.rank} taken by another transport`)
    if (
      typeof auto.picked !== 'function' ||
      !auto.picked('node-a', {via: 'auto', insecureIgnoreHostKey: false, concurrency: 1})
    )
      out.push(`${name}: auto does not say why it picked it`)
    if (!auto.ahead) out.push(`${name}: auto does not say why the ways after it were not tried`)
  } else if (!auto.never) out.push(`${name}: auto never uses it, without saying why`)
  const reach = row.reach as Transport['reach'] | undefined
  if (!reach) out.push(`${name}: no reach rule (how a person reaches a node it read)`)
  else if (reach.by === 'exec') {
    const pod = {namespace: 'kube-system', name: 'kube-proxy-ax7k2'}
    if (JSON.stringify(reach.pod(podAddress(pod))) !== JSON.stringify(pod))
      out.push(`${name}: its reach rule does not find the Pod of the address it describes`)
    if (reach.programs.length === 0) out.push(`${name}: its reach rule names no program of its Pod`)
  } else if (reach.by !== 'ssh' && reach.by !== 'none') out.push(`${name}: reach by ${JSON.stringify(reach)}`)
  for (const k of ['via', 'probes', 'failureIsFinal'] as const)
    if (typeof row[k] !== 'boolean') out.push(`${name}: ${k} is not said`)
  return out
}

const transportRows = () => Object.entries(TRANSPORTS) as Array<[string, Transport]>

test('every proxy mode has what is asked of it: recognition, reads, not-read reason, dataplane, step names, a tracer from files', () => {
  assert.deepEqual(PROXY_MODES.flatMap(modeProblems), [])
  assert.equal(new Set(PROXY_MODE_NAMES).size, PROXY_MODES.length, 'mode names are unique')
  // The checks fail on a row stripped of what they check.
  const [first] = PROXY_MODES
  const stripped = (patch: object) => ({...first, ...patch}) as unknown as ProxyModeAdapter
  assert.match(modeProblems(stripped({fromFiles: undefined})).join('\n'), /no tracer from files/)
  assert.match(
    modeProblems(stripped({vocabulary: {...first.vocabulary, steps: {...first.vocabulary.steps, service: ''}}})).join(),
    /no name for the step service/,
  )
  assert.match(modeProblems(stripped({notRead: undefined})).join(), /no notRead/)
  assert.match(
    modeProblems(stripped({fromFiles: {...first.fromFiles, picks: 'tcpdump'}})).join(),
    /picks tcpdump, no dump file/,
  )
})

test("each mode's not-read reason names the family and what was not read, for both families", () => {
  for (const m of PROXY_MODES)
    for (const [family, label] of [
      ['ip', 'IPv4'],
      ['ip6', 'IPv6'],
    ] as const) {
      const r = m.notRead({family}, 'the rules on the node', {name: 'node-a', reachable: true})
      assert.match(r.reason, new RegExp(`^${label} rules not read \\(.+\\)`), `${m.mode} ${family}`)
    }
})

test('trace picks each mode from its own files, and says what a mode lacks or what to give', () => {
  for (const m of PROXY_MODES) {
    const given = Object.fromEntries(
      [m.fromFiles.picks, ...(m.fromFiles.needs ?? []).map((n) => n.file)].map((f) => [f, 'x']),
    )
    const picked = modeOfFiles(given)
    assert.ok('mode' in picked && picked.mode.mode === m.mode, `${m.mode} from ${Object.keys(given).join(', ')}`)
    for (const n of m.fromFiles.needs ?? [])
      assert.deepEqual(modeOfFiles({[m.fromFiles.picks]: 'x'}), {
        error: `--${m.fromFiles.picks} needs --${n.file} too: ${n.why}`,
      })
  }
  assert.deepEqual(modeOfFiles({}), {error: 'give --iptables-save FILE, --nft FILE (or - for stdin) or --node NAME'})
  // Every dump file is a flag of trace, and some mode reads it.
  const flags = Trace.flags as Record<string, {description?: string}>
  for (const f of Object.keys(DUMP_FILES)) {
    assert.ok(flags[f]?.description, `trace --${f}`)
    assert.ok(
      PROXY_MODES.some((m) =>
        [m.fromFiles.picks, ...(m.fromFiles.needs ?? []).map((n) => n.file), ...(m.fromFiles.takes ?? [])].includes(
          f as never,
        ),
      ),
      `no mode reads --${f}`,
    )
  }
})

test('--proxy-mode, the catalogue and the report schema follow the registries', () => {
  for (const command of [Svc, Scan])
    assert.deepEqual((command.flags as Record<string, {options?: string[]}>)['proxy-mode'].options, PROXY_MODE_NAMES)
  for (const e of CATALOGUE)
    for (const m of e.modes) assert.ok(PROXY_MODE_NAMES.includes(m), `${e.code}: mode ${m} is not in the registry`)
  const paths = schema.$defs.serviceReport.properties.paths.items.properties
  assert.equal(paths.breaksAt.$ref, '#/$defs/step')
  assert.equal(paths.remote.items.properties.breaksAt.$ref, '#/$defs/step')
  assert.deepEqual(schema.$defs.step.enum, [...STEPS, 'unknown', null])
  const readVia = schema.$defs.serviceReport.properties.nodes.items.properties.readVia.properties
  assert.deepEqual(readVia.transport.enum, [...VIA.filter((v) => v !== 'auto' && v !== 'none'), null])
})

test('every transport has what is asked of it: a connector, an auto-order entry, a reach rule, what it can do', () => {
  assert.deepEqual(Object.keys(TRANSPORTS), [...TRANSPORT_NAMES])
  const problems = transportRows().flatMap(([name, row]) =>
    transportProblems(
      name,
      row,
      transportRows()
        .filter(([other]) => other !== name)
        .map(([, r]) => r),
    ),
  )
  assert.deepEqual(problems, [])
  // The checks fail on a row stripped of what they check.
  const [[name, row]] = transportRows()
  const check = (patch: object) => transportProblems(name, {...row, ...patch} as Transport, []).join('\n')
  assert.match(check({auto: undefined}), /no auto-order entry/)
  assert.match(check({auto: {never: ''}}), /without saying why/)
  assert.match(check({reach: undefined}), /no reach rule/)
  assert.match(check({reach: {by: 'exec', pod: () => undefined, programs: ['cat']}}), /does not find the Pod/)
  assert.match(transportProblems(name, row, [row]).join(), /taken by another transport/)
})

test('--via follows the registry: auto, the transports --via can name, none; auto tries its transports in rank order', () => {
  assert.deepEqual([...VIA], ['auto', ...transportRows().flatMap(([name, row]) => (row.via ? [name] : [])), 'none'])
  assert.deepEqual((Svc.flags as Record<string, {options?: string[]}>).via.options, [...VIA])
  assert.deepEqual((Trace.flags as Record<string, {options?: string[]}>).via.options, [...VIA])
  const ranked = transportRows()
    .flatMap(([name, row]) => ('rank' in row.auto ? [[row.auto.rank, name] as const] : []))
    .sort((a, b) => a[0] - b[0])
    .map(([, name]) => name)
  assert.deepEqual(autoOrder(), ranked)
})
