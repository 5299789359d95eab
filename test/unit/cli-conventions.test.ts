import assert from 'node:assert/strict'
import {execFile} from 'node:child_process'
import {existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {after, test} from 'node:test'
import {runCli} from '../helpers/run-cli.js'
import {BROKEN_EXAMPLE_TRACE} from '../helpers/example-args.js'

const tmp = mkdtempSync(join(tmpdir(), 'kpd-conventions-'))
after(() => rmSync(tmp, {recursive: true, force: true}))
const version = JSON.parse(readFileSync('package.json', 'utf8')).version

/** The flags listed in one command's help, by long name. */
function helpFlags(help: string): string[] {
  const sectionsWithFlags = help.slice(help.search(/^[A-Z ]*FLAGS$/m)).split(/^(?:EXAMPLES|DESCRIPTION)$/m)[0]
  return [...sectionsWithFlags.matchAll(/^\s+(?:-\w, )?--([a-z-]+)/gm)].map((m) => m[1]).sort()
}

test('help, help svc and --help everywhere', async () => {
  const root = await runCli(['help'])
  assert.equal(root.code, 0)
  for (const c of ['svc', 'trace', 'collect', 'version', 'completion', 'help'])
    assert.match(root.stdout, new RegExp(`^  ${c}\\s`, 'm'))
  const viaCommand = await runCli(['help', 'svc'])
  const viaFlag = await runCli(['svc', '--help'])
  assert.equal(viaCommand.code, 0)
  assert.equal(viaCommand.stdout, viaFlag.stdout)
  assert.match(viaFlag.stdout, /^USAGE\n {2}\$ kproxy-doctor svc NAME/m)
  for (const args of [
    ['trace', '--help'],
    ['collect', 'svc', '--help'],
    ['version', '--help'],
    ['completion', '--help'],
    ['--help'],
  ]) {
    const r = await runCli(args)
    assert.equal(r.code, 0, args.join(' '))
    assert.match(r.stdout, /USAGE/, args.join(' '))
  }
})

test('svc help groups its flags and lists exactly the flags svc honours', async () => {
  const help = (await runCli(['svc', '--help'])).stdout
  const groups = [...help.matchAll(/^([A-Z]+) FLAGS$/gm)].map((m) => m[1])
  assert.deepEqual(groups, ['CLUSTER', 'OUTPUT', 'NODES', 'DIAGNOSIS'])
  assert.deepEqual(helpFlags(help), [
    'all-nodes',
    'all-rules',
    'concurrency',
    'config',
    'context',
    'debug-image',
    'debug-namespace',
    'dry-run',
    'explain',
    'explain-format',
    'fail-on',
    'from',
    'from-namespace',
    'ignore',
    'insecure-ignore-host-key',
    'kernel-trace',
    'kube-proxy-namespace',
    'kube-proxy-selector',
    'kubeconfig',
    'namespace',
    'nodes',
    'output',
    'proxy-mode',
    'quiet',
    'snapshot',
    'ssh-config',
    'timeout',
    'verbose',
    'via',
    'watch',
    'watch-interval',
  ])
})

test('-v/--verbose: the mode decision, each ignored finding and each check not run on stderr; stdout is the same report', async () => {
  const base = [
    'svc',
    'web',
    '-n',
    'shop',
    '--snapshot',
    'examples/broken-cluster',
    '-o',
    'json',
    '--ignore',
    'KPD-HAIRPIN-OFF',
  ]
  const quiet = await runCli(base)
  const verbose = await runCli([...base, '-v'])
  assert.equal(verbose.code, quiet.code)
  const withoutTime = (out: string) => out.replace(/"time": "[^"]*"/, '')
  assert.equal(withoutTime(verbose.stdout), withoutTime(quiet.stdout))
  assert.equal(quiet.stderr, '')
  const lines = verbose.stderr
    .trimEnd()
    .split('\n')
    .map((l) => l.replace(/^kproxy-doctor: \+\d+\.\d\ds /, ''))
  const nodes = JSON.parse(quiet.stdout).nodes as Array<{name: string; modeSource: string}>
  const unsilenced = JSON.parse((await runCli(base.slice(0, -2))).stdout).findings as Array<{
    code: string
    message: string
  }>
  const hairpin = unsilenced.find((f) => f.code === 'KPD-HAIRPIN-OFF')!
  assert.deepEqual(lines, [
    ...nodes.map((n) => `${n.name}: proxy mode iptables (${n.modeSource})`),
    `ignored KPD-HAIRPIN-OFF [node-a] (--ignore): ${hairpin.message}`,
    ...(
      JSON.parse(quiet.stdout).notChecked as Array<{
        node: string | null
        check: string
        reason: string
        required: boolean
      }>
    ).map(
      (n) =>
        `not checked${n.required ? '' : ' (not required)'}: ${n.check}${n.node ? ` on ${n.node}` : ''}: ${n.reason}`,
    ),
  ])
})

test('version, --version: the same line; -v is not taken by the version', async () => {
  const a = await runCli(['version'])
  const b = await runCli(['--version'])
  assert.equal(a.code, 0)
  assert.equal(a.stdout, b.stdout)
  assert.match(a.stdout, new RegExp(`^kproxy-doctor/${version.replace(/\./g, '\\.')} \\S+ node-v\\d+`))
  const v = await runCli(['-v'])
  assert.doesNotMatch(v.stdout, /kproxy-doctor\/\d/)
})

test('a mistyped command gets one line with the closest command and exit 2', async () => {
  const r = await runCli(['svcc', 'web', '-n', 'shop'])
  assert.equal(r.code, 2)
  assert.equal(
    r.stderr,
    'kproxy-doctor: "svcc" is not a kproxy-doctor command. Did you mean "svc"? Run "kproxy-doctor help" for the list.\n',
  )
  const nested = await runCli(['collect', 'sv', 'web'])
  assert.match(
    nested.stderr,
    /^kproxy-doctor: "collect sv" is not a kproxy-doctor command\. Did you mean "collect svc"\?/,
  )
  const far = await runCli(['frobnicate'])
  assert.equal(far.code, 2)
  assert.doesNotMatch(far.stderr, /Did you mean/)
})

test('a flag that --snapshot would ignore is an error, as are other conflicting flags', async () => {
  const snap = ['svc', 'web', '-n', 'shop', '--snapshot', 'examples/healthy-cluster']
  for (const extra of [
    ['--context', 'prod'],
    ['--kubeconfig', '/k'],
    ['--ssh-config', '/s'],
    ['--timeout', '3'],
    ['--all-nodes'],
    ['--concurrency', '2'],
    ['--insecure-ignore-host-key'],
    ['--debug-image', 'busybox'],
  ]) {
    const r = await runCli([...snap, ...extra])
    assert.equal(r.code, 2, extra.join(' '))
    assert.equal(
      r.stderr,
      `kproxy-doctor: ${extra[0]}${extra[1] ? `=${extra[1]}` : '=true'} cannot also be provided when using --snapshot\n`,
    )
  }
  const nodes = await runCli([...snap, '--nodes', 'node-a'])
  assert.equal(nodes.code, 0, '--nodes is honoured with a snapshot')
  assert.equal((await runCli(['svc', 'web', '--nodes', 'a', '--all-nodes'])).code, 2)
  assert.equal((await runCli([...snap, '-q', '--explain'])).code, 2)
  assert.equal((await runCli([...snap, '--explain-format', 'tree'])).code, 2, '--explain-format needs --explain')
  const interval = await runCli([...snap, '--watch-interval', '5'])
  assert.equal(interval.code, 2, '--watch-interval needs --watch')
  assert.equal(
    interval.stderr,
    'kproxy-doctor: --watch-interval says how often --watch reads the nodes again: add --watch\n',
  )
  const quietJson = await runCli([...snap, '-q', '-o', 'json'])
  assert.equal(quietJson.code, 2)
  assert.match(quietJson.stderr, /--quiet prints only the headline of the table: it cannot be combined with -o json/)
})

function bashComplete(script: string, words: string[]): Promise<string[]> {
  const file = join(tmp, 'completion.bash')
  writeFileSync(file, script)
  const program = `source ${file}; COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _kproxy_doctor_complete; printf '%s\\n' "\${COMPREPLY[@]}"`
  return new Promise((done, fail) =>
    execFile('/bin/bash', ['--norc', '-c', program], {encoding: 'utf8'}, (err, stdout) =>
      err ? fail(err) : done(stdout.split('\n').filter(Boolean)),
    ),
  )
}

test('bash completion: commands, topics, flags of the command typed, flag values and files', async () => {
  const r = await runCli(['completion', 'bash'])
  assert.equal(r.code, 0)
  assert.deepEqual((await bashComplete(r.stdout, ['kproxy-doctor', ''])).sort(), [
    'cleanup',
    'collect',
    'completion',
    'help',
    'scan',
    'svc',
    'trace',
    'version',
  ])
  assert.deepEqual(await bashComplete(r.stdout, ['kproxy-doctor', 'sv']), ['svc'])
  assert.deepEqual(await bashComplete(r.stdout, ['kproxy-doctor', 'collect', '']), ['svc'])
  assert.deepEqual(await bashComplete(r.stdout, ['kproxy-doctor', 'svc', 'web', '--sn']), ['--snapshot'])
  assert.deepEqual(await bashComplete(r.stdout, ['kproxy-doctor', 'svc', 'web', '-o', '']), [
    'table',
    'json',
    'yaml',
    'junit',
    'mermaid',
    'html',
  ])
  assert.deepEqual(await bashComplete(r.stdout, ['kproxy-doctor', 'svc', 'web', '--explain-format', '']), [
    'text',
    'tree',
  ])
  assert.deepEqual(await bashComplete(r.stdout, ['kproxy-doctor', 'svc', 'web', '--explain-f']), ['--explain-format'])
  assert.deepEqual(await bashComplete(r.stdout, ['kproxy-doctor', 'collect', 'svc', 'web', '--o']), [
    '--out',
    '--output',
  ])
  assert.deepEqual(await bashComplete(r.stdout, ['kproxy-doctor', 'trace', '--pro']), ['--proto'])
  assert.deepEqual(await bashComplete(r.stdout, ['kproxy-doctor', 'svc', 'web', '--snapshot', 'examples/broken-c']), [
    'examples/broken-cluster',
  ])
})

test('zsh completion: a compdef script that loads the same completion through bashcompinit', async () => {
  const zsh = await runCli(['completion', 'zsh'])
  const bash = await runCli(['completion', 'bash'])
  assert.equal(zsh.code, 0)
  assert.match(zsh.stdout, /^#compdef kproxy-doctor\n/)
  assert.match(zsh.stdout, /bashcompinit && bashcompinit\n/)
  assert.ok(zsh.stdout.endsWith(bash.stdout))
  assert.equal((await runCli(['completion', 'fish'])).code, 2)
})

test('trace lists only the flags it honours; the live-read flags without --node are an error', async () => {
  const help = (await runCli(['trace', '--help'])).stdout
  assert.deepEqual(helpFlags(help), [
    'context',
    'debug-image',
    'debug-namespace',
    'dport',
    'dst',
    'in-iface',
    'insecure-ignore-host-key',
    'ipset-save',
    'iptables-save',
    'ipvsadm',
    'kube-proxy-namespace',
    'kube-proxy-selector',
    'kubeconfig',
    'nft',
    'node',
    'node-ip',
    'out-iface',
    'output',
    'proto',
    'sport',
    'src',
    'ssh-config',
    'timeout',
    'via',
  ])
  const walk = [...BROKEN_EXAMPLE_TRACE]
  assert.equal((await runCli(walk)).code, 0)
  for (const extra of [
    ['--context', 'prod'],
    ['--kubeconfig', '/k'],
    ['--ssh-config', '/s'],
    ['--timeout', '3'],
    ['--insecure-ignore-host-key'],
    ['--via', 'ssh'],
    ['--kube-proxy-namespace', 'kp'],
    ['--kube-proxy-selector', 'app=kp'],
    ['--debug-image', 'busybox'],
    ['--debug-namespace', 'dbg'],
    ['-n', 'shop'],
    ['--nodes', 'a'],
  ]) {
    const r = await runCli([...walk, ...extra])
    assert.equal(r.code, 2, extra.join(' '))
  }
  assert.equal(
    (
      await runCli([
        'trace',
        '--node',
        'node-b',
        '--ipset-save',
        '/f',
        '--src',
        '1.1.1.1',
        '--dst',
        '2.2.2.2',
        '--dport',
        '1',
      ])
    ).code,
    2,
  )
})

function zshComplete(script: string, words: string[]): Promise<string[]> {
  const file = join(tmp, 'completion.zsh')
  writeFileSync(file, script)
  // COMP_WORDS/COMP_CWORD as zsh's bashcompinit sets them (COMP_CWORD counts from 0); outside a completion widget its
  // compgen does not filter by the typed prefix (the widget does), so this checks which words are offered.
  const program = `source ${file}; print -r -- "\${_comps[kproxy-doctor]}"; COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _kproxy_doctor_complete; print -l -- "\${COMPREPLY[@]}"`
  return new Promise((done, fail) =>
    execFile('zsh', ['-f', '-c', program], {encoding: 'utf8', env: {...process.env, HOME: tmp}}, (err, stdout) =>
      err ? fail(err) : done(stdout.split('\n').filter(Boolean)),
    ),
  )
}

test(
  'zsh completion runs in a real zsh: registered for kproxy-doctor, the words of the command typed',
  {skip: !existsSync('/usr/bin/zsh') && !existsSync('/bin/zsh') && 'zsh is not installed'},
  async () => {
    const script = (await runCli(['completion', 'zsh'])).stdout
    const values = await zshComplete(script, ['kproxy-doctor', 'svc', 'web', '-o', ''])
    assert.deepEqual(values, [
      '_bash_complete -o default -F _kproxy_doctor_complete',
      'table',
      'json',
      'yaml',
      'junit',
      'mermaid',
      'html',
    ])
    assert.deepEqual((await zshComplete(script, ['kproxy-doctor', 'collect', ''])).slice(1), ['svc'])
    const svcFlags = (await zshComplete(script, ['kproxy-doctor', 'svc', 'web', '--'])).slice(1)
    assert.ok(
      svcFlags.includes('--snapshot') && svcFlags.includes('--quiet') && !svcFlags.includes('--out'),
      svcFlags.join(' '),
    )
  },
)
