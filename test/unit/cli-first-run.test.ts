/**
 * Issue #26 items 3 and 4, as a new user meets them: -h everywhere, "did you mean" for flags, one-line messages for a
 * missing argument, a missing required flag and a --snapshot folder that is not there, help examples that name no
 * folder an install lacks, exit codes listed in every command's help, colours as chalk detects them, and exit 3 when a
 * required check could not run (JUnit: an error testcase), unless --fail-on leaves `incomplete` out.
 */
import assert from 'node:assert/strict'
import {execFileSync, spawnSync} from 'node:child_process'
import {cpSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join, resolve} from 'node:path'
import {after, describe, test} from 'node:test'
import {XMLParser} from 'fast-xml-parser'
import {runCli} from '../helpers/run-cli.js'

const tmp = mkdtempSync(join(tmpdir(), 'kpd-first-run-'))
after(() => rmSync(tmp, {recursive: true, force: true}))

const COMMANDS = [['svc'], ['scan'], ['trace'], ['collect', 'svc'], ['cleanup'], ['version'], ['completion']]

describe('conventions', () => {
  test('-h is --help on every command, and every command lists its exit codes', async () => {
    for (const words of COMMANDS) {
      const short = await runCli([...words, '-h'])
      const long = await runCli([...words, '--help'])
      assert.equal(short.code, 0, `${words.join(' ')} -h: ${short.stderr}`)
      assert.equal(short.stdout, long.stdout, words.join(' '))
      const codes = short.stdout.slice(short.stdout.indexOf('Exit codes'))
      assert.match(codes, /^ {2}0 {2}\S/m, `${words.join(' ')} lists exit 0`)
      assert.match(codes, /^ {2}2 {2}\S/m, `${words.join(' ')} lists exit 2`)
      if (words[0] === 'svc' || words[0] === 'scan') {
        assert.match(codes, /^ {2}1 {2}a finding at or above --fail-on/m)
        assert.match(codes, /^ {2}3 {2}incomplete: a required check could not run/m)
        assert.match(short.stdout, /--fail-on=<value>\s+\[default: error,incomplete\]/)
      }
    }
    const root = await runCli(['-h'])
    assert.equal(root.code, 0)
    assert.equal(root.stdout, (await runCli(['--help'])).stdout)
  })

  test('a mistyped flag gets the closest flags of that command; a flag like none is named once with where to look', async () => {
    const cases: Array<[string[], string]> = [
      [['svc', 'web', '--ouput', 'json'], '--ouput: no such flag; did you mean --output?'],
      [['svc', 'web', '--ouput=json'], '--ouput: no such flag; did you mean --output?'],
      [['scan', '--fail-onn', 'warning'], '--fail-onn: no such flag; did you mean --fail-on?'],
      [['collect', 'svc', 'web', '--outt', 'x'], '--outt: no such flag; did you mean --out?'],
      [['svc', 'web', '--zzzzzz'], '--zzzzzz: no such flag (kproxy-doctor svc --help lists them)'],
    ]
    for (const [args, line] of cases) {
      const r = await runCli(args)
      assert.equal(r.code, 2, args.join(' '))
      assert.equal(r.stderr, `kproxy-doctor: ${line}\n`, args.join(' '))
      assert.equal(r.stdout, '')
    }
  })

  test('a missing argument or required flag: one line naming it, what it is, and an example that gives it', async () => {
    const cases: Array<[string[], string]> = [
      [['svc'], 'svc needs NAME: Service name; e.g. kproxy-doctor svc web -n shop; see kproxy-doctor svc --help'],
      [
        ['collect', 'svc', 'web'],
        'collect svc needs --out: new folder to write the bundle to (built beside it, then renamed into place); e.g. kproxy-doctor collect svc web -n shop --out ./web-bundle; see kproxy-doctor collect svc --help',
      ],
      [
        ['trace', '--dport', '80', '--iptables-save', '-'],
        'trace needs --src (source address of the packet) and --dst (destination address); e.g. kproxy-doctor trace --iptables-save node-b.txt --src 10.0.3.7 --dst 10.200.0.12 --dport 30080 --node-ip 10.200.0.12; see kproxy-doctor trace --help',
      ],
    ]
    for (const [args, line] of cases) {
      const r = await runCli(args)
      assert.equal(r.code, 2, args.join(' '))
      assert.equal(r.stderr, `kproxy-doctor: ${line}\n`, args.join(' '))
    }
    // As a kubectl plugin, the command and the example are in kubectl's words.
    const plugin = spawnSync(process.execPath, [resolve('bin/kubectl-kproxy_doctor'), 'collect', 'svc', 'web'], {
      encoding: 'utf8',
      env: {...process.env, NO_COLOR: '1'},
    })
    assert.equal(plugin.status, 2)
    assert.match(
      plugin.stderr,
      /needs --out: .*; e\.g\. kubectl kproxy-doctor collect svc web -n shop --out \.\/web-bundle; see kubectl kproxy-doctor collect svc --help\n$/,
    )
  })

  test('--snapshot: a folder that is not there, or a file, says so; a folder without services.json is no bundle', async () => {
    const missing = join(tmp, 'nonexistent')
    const file = join(tmp, 'a-file')
    writeFileSync(file, 'x')
    for (const [dir, what] of [
      [missing, 'no such folder'],
      [file, 'not a folder'],
    ]) {
      for (const args of [
        ['svc', 'web', '-n', 'shop', '--snapshot', dir],
        ['scan', '-n', 'shop', '--snapshot', dir],
      ]) {
        const r = await runCli(args)
        assert.equal(r.code, 2)
        assert.equal(
          r.stderr,
          `kproxy-doctor: --snapshot ${dir}: ${what} (a bundle is the folder \`collect svc --out\` writes)\n`,
        )
      }
    }
    const empty = mkdtempSync(join(tmp, 'empty-'))
    const r = await runCli(['svc', 'web', '--snapshot', empty])
    assert.equal(r.stderr, `kproxy-doctor: ${empty} is not a snapshot bundle: services.json is missing\n`)
  })

  test("help examples name no folder an install lacks: every --snapshot is a bundle another example's collect writes", async () => {
    const lines: string[] = []
    for (const words of COMMANDS) {
      const help = (await runCli([...words, '--help'])).stdout
      lines.push(
        ...help
          .slice(help.indexOf('EXAMPLES'))
          .split('\n')
          .filter((l) => l.trim().startsWith('$ ')),
      )
    }
    assert.ok(lines.length > 10)
    const outs = new Set(lines.flatMap((l) => [...l.matchAll(/--out (\S+)/g)].map((m) => m[1])))
    const snapshots = lines.flatMap((l) => [...l.matchAll(/--snapshot (\S+)/g)].map((m) => m[1]))
    assert.ok(snapshots.length >= 2)
    for (const s of snapshots) assert.ok(outs.has(s), `--snapshot ${s} is not written by any example's collect`)
    for (const l of lines) assert.doesNotMatch(l, /examples\//, l)
  })

  const hasScript = (() => {
    try {
      execFileSync('script', ['--version'], {stdio: 'ignore'})
      return true
    } catch {
      return false
    }
  })()
  const withoutCi = (env: NodeJS.ProcessEnv) => Object.fromEntries(Object.entries(env).filter(([k]) => k !== 'CI'))
  /** The svc headline's bytes as a terminal gets them (script(1) gives the program a pseudo-terminal). */
  function inTerminal(env: string): string {
    const bin = resolve('bin/run.js')
    return execFileSync(
      'script',
      [
        '-qc',
        `env ${env} ${process.execPath} ${bin} svc web -n shop --snapshot examples/broken-cluster -q`,
        '/dev/null',
      ],
      // Without CI: chalk turns colour off in a CI job (CI=true), which is its detection too, not the terminal's.
      {encoding: 'utf8', env: {...withoutCi(process.env), NO_COLOR: '', FORCE_COLOR: '', TERM: 'xterm'}},
    )
  }

  test(
    'colours follow chalk: on in a terminal, off under TERM=dumb and NO_COLOR, FORCE_COLOR wins',
    {skip: !hasScript},
    () => {
      const SGR = '\x1b[31m'
      assert.ok(inTerminal('-u NO_COLOR -u FORCE_COLOR TERM=xterm').includes(SGR), 'a terminal: colours')
      assert.ok(!inTerminal('-u NO_COLOR -u FORCE_COLOR TERM=dumb').includes('\x1b['), 'TERM=dumb: none')
      assert.ok(!inTerminal('-u FORCE_COLOR NO_COLOR=1 TERM=xterm').includes('\x1b['), 'NO_COLOR: none')
      assert.ok(inTerminal('-u NO_COLOR FORCE_COLOR=1 TERM=dumb').includes(SGR), 'FORCE_COLOR wins over TERM=dumb')
    },
  )
})

describe('exit codes CI can trust', () => {
  /** The healthy example with these nodes' rules unreadable (a garbage dump: the node is not read). */
  function snapshotWithout(name: string, nodes: string[]): string {
    const dir = join(tmp, name)
    cpSync('examples/healthy-cluster', dir, {recursive: true})
    for (const n of nodes) writeFileSync(join(dir, 'nodes', n, 'iptables-save.txt'), '<html>oops</html>\n')
    return dir
  }

  test('svc: one node not read exits 3 (incomplete), 0 with --fail-on error; all read and clean exits 0', async () => {
    const one = snapshotWithout('one-unread', ['node-b'])
    const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', one])
    assert.equal(r.code, 3, r.stderr)
    assert.match(r.stdout, /^\? shop\/web: no fault found in what was checked, but \d+ check\(s\) could not run/)
    assert.equal((await runCli(['svc', 'web', '-n', 'shop', '--snapshot', one, '--fail-on', 'error'])).code, 0)
    assert.equal((await runCli(['svc', 'web', '-n', 'shop', '--snapshot', one, '--fail-on', 'none'])).code, 0)
    const clean = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', 'examples/healthy-cluster'])
    assert.equal(clean.code, 0)
    assert.match(clean.stdout, /^✓ /)
  })

  test('svc: no node read prints ? and exits 3, the whole run listed as not checked; an error finding still exits 1', async () => {
    const none = snapshotWithout('none-read', ['node-a', 'node-b'])
    const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', none, '-o', 'json'])
    assert.equal(r.code, 3, r.stderr)
    assert.equal(r.json.summary, '? shop/web: no node could be read, the packet path is unchecked')
    assert.deepEqual(
      r.json.notChecked.filter((n: {node: string | null}) => n.node === null).map((n: {check: string}) => n.check),
      ['node-read', 'live-probes'],
    )
    const broken = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', 'examples/broken-cluster'])
    assert.equal(broken.code, 1)
    const ignored = await runCli([
      'svc',
      'web',
      '-n',
      'shop',
      '--snapshot',
      'examples/broken-cluster',
      '--fail-on',
      'none',
    ])
    assert.equal(ignored.code, 0)
  })

  test('scan: no node read never says ✓ and exits 3; JUnit has an error testcase for it, never a pass', async () => {
    const none = snapshotWithout('scan-none-read', ['node-a', 'node-b'])
    const r = await runCli(['scan', '-n', 'shop', '--snapshot', none])
    assert.equal(r.code, 3, r.stderr)
    const headline = r.stdout.split('\n')[0]
    assert.match(headline, /^\? namespace shop: no fault found in what was checked, but 1 of 1 diagnosed Services/)
    assert.match(headline, /\(0 skipped; 0 of 2 nodes read\)$/)
    const junit = await runCli(['scan', '-n', 'shop', '--snapshot', none, '-o', 'junit'])
    assert.equal(junit.code, 3)
    const xml = new XMLParser({ignoreAttributes: false, attributeNamePrefix: ''}).parse(junit.stdout)
    assert.equal(xml.testsuites.errors, '1')
    const suite = xml.testsuites.testsuite
    const notChecked = [suite.testcase].flat().find((c: {name: string}) => c.name === 'not checked')
    assert.equal(notChecked.error.type, 'incomplete')
    assert.match(notChecked.error['#text'], /all nodes: node-read: no node was read/)
    const lenient = await runCli(['scan', '-n', 'shop', '--snapshot', none, '-o', 'junit', '--fail-on', 'error'])
    assert.equal(lenient.code, 0)
    assert.match(lenient.stdout, /<testcase classname="shop\/web" name="not checked"><skipped /)
    const healthy = await runCli(['scan', '-n', 'shop', '--snapshot', 'examples/healthy-cluster'])
    assert.equal(healthy.code, 0)
    assert.match(healthy.stdout, /^✓ namespace shop: all 1 diagnosed Services work/)
  })
})
