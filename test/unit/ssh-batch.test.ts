import assert from 'node:assert/strict'
import {spawnSync} from 'node:child_process'
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'
import {test} from 'node:test'
import {buildCommandLine, linesOfBatch, NUL_DROPPED_NOTE, type CommandLine} from '../../src/node/node-commands.js'
import {CommandTimedOut, OutputCapExceeded, type ExecResult} from '../../src/node/transport/ssh/ssh-session.js'
import {SshNodeAccess, type SshChannel} from '../../src/node/transport/ssh/ssh-transport.js'
import {NODE_READS, readOf, takesArguments, type NodeCommandKey} from '../../src/node/read/node-reads.js'
import type {RunResult} from '../../src/node/transport/node-access.js'
import {answerBatch, answerFirstExec, isFirstExec} from '../helpers/batch-answer.js'

const asRoot = process.getuid?.() === 0

/** A session that runs each line with this machine's shell (and gzip), `bin` first on PATH; the lines it was given. */
function shellSession(bin: string, compression: boolean): SshChannel & {lines: string[]} {
  const lines: string[] = []
  return {
    lines,
    host: {hostName: '10.0.0.7', port: 22, compression},
    exec(command: CommandLine): Promise<ExecResult> {
      lines.push(command)
      const r = spawnSync('sh', ['-c', command], {env: {...process.env, PATH: `${bin}:${process.env.PATH}`}})
      return Promise.resolve({code: r.status, stdout: r.stdout, stderr: r.stderr.toString()})
    },
    forward: () => Promise.reject(new Error('no forwarding here')),
    close() {},
  }
}

function programs(files: Record<string, string>): string {
  const bin = mkdtempSync(join(tmpdir(), 'kpd-batch-'))
  for (const [name, script] of Object.entries(files)) writeFileSync(join(bin, name), script, {mode: 0o755})
  return bin
}

const outcome = (r: RunResult) => (r.kind === 'ran' ? [r.code, r.stdout.toString(), r.stderr] : r.what)

/** The batch's own end mark, as a program on the node can find it: on its parent shell's command line. */
const OWN_MARK = '$(tr "\\0" " " < /proc/$PPID/cmdline | grep -o "#kpd-batch-[0-9a-f]*" | head -n 1)'
/** A mark of another batch's: a rule comment a workload chose can hold any text, but not a later batch's nonce. */
const EARLIER = '#kpd-batch-0123456789abcdef'
const ROUTES = 'default via 10.0.0.1 dev eth0\n'
const TOLD = "a read printed the batch's own end mark: its 2 outputs cannot be told apart"

/** A hostile read's output printing a batch's marks (`mark`: a shell word), then what each read of the batch gets. */
const HOSTILE_MARKS: Array<{name: string; mark: string; outcomes: unknown[]}> = [
  {
    name: "a read's output holding another batch's marks is that read's output",
    mark: `'${EARLIER}'`,
    outcomes: [
      [0, `forged\n${EARLIER} 0\nafter\n`, `\n${EARLIER}\n`],
      [0, ROUTES, ''],
    ],
  },
  {
    name: "a read that prints this batch's own nonce fails the batch, never handing one read's output to another",
    mark: `"${OWN_MARK}"`,
    outcomes: [TOLD, TOLD],
  },
]

for (const row of HOSTILE_MARKS)
  test(`ssh batch: ${row.name}`, async () => {
    const bin = programs({
      ipvsadm: `#!/bin/sh\nn=${row.mark}\nprintf 'forged\\n%s 0\\nafter\\n' "$n"\nprintf '\\n%s\\n' "$n" >&2\n`,
      ip: `#!/bin/sh\nprintf '${ROUTES}'\n`,
    })
    try {
      const session = shellSession(bin, false)
      const access = new SshNodeAccess(session)
      await access.usesSudo()
      const both = [access.run('ipvsadm'), access.run('routeTable')].map((p) =>
        p.then(outcome, (e: Error) => e.message),
      )
      assert.deepEqual(await Promise.all(both), row.outcomes)
      assert.equal(session.lines.length, 2, 'id -u (with the iptables versions), then the two reads in one exec')
    } finally {
      rmSync(bin, {recursive: true, force: true})
    }
  })

test('ssh batch: a failing read fails alone, with its own exit status and stderr; the reads after it run', async () => {
  const bin = programs({
    iptables: '#!/bin/sh\necho "iptables v1.8.9 (nf_tables)"\n',
    ip6tables: '#!/bin/sh\necho "ip6tables: Permission denied (you must be root)" >&2\nexit 4\n',
    ip: "#!/bin/sh\nprintf 'default via 10.0.0.1 dev eth0\\n'\n",
  })
  try {
    const session = shellSession(bin, false)
    const access = new SshNodeAccess(session)
    await access.usesSudo()
    const answers = await Promise.all([
      access.run('iptablesVersion'),
      access.run('ip6tablesVersion'),
      access.run('routeTable'),
    ])
    assert.deepEqual(answers.map(outcome), [
      [0, 'iptables v1.8.9 (nf_tables)\n', ''],
      [4, '', 'ip6tables: Permission denied (you must be root)\n'],
      [0, 'default via 10.0.0.1 dev eth0\n', ''],
    ])
    // The versions answered by the first exec (with `id -u`), the route table alone in the next.
    assert.deepEqual(session.lines.map(linesOfBatch), [['id -u', 'iptables -V', 'ip6tables -V'], ['ip route show']])
  } finally {
    rmSync(bin, {recursive: true, force: true})
  }
})

/**
 * A root session whose batches are stopped (`stopped`) after `keep` bytes of the batch's stdout: what the real session
 * does at a command's timeout or cap, with what the command printed until then.
 */
function stoppingSession(
  answer: (line: string) => ExecResult,
  keep: (full: ExecResult) => number,
  stopped: (program: string) => CommandTimedOut | OutputCapExceeded,
): SshChannel & {lines: string[]} {
  const lines: string[] = []
  return {
    lines,
    host: {hostName: '10.0.0.7', port: 22},
    exec(command: CommandLine): Promise<ExecResult> {
      lines.push(command)
      if (isFirstExec(command)) return Promise.resolve(answerFirstExec(command))
      const full = answerBatch(command, answer)
      const e = stopped(command.split(' ')[1])
      // As the session gives it: in chunks (small ones here, so that a mark is split between two).
      const printed = full.stdout.subarray(0, keep(full))
      for (let at = 0; at < printed.length; at += 7) e.stdoutChunks.push(printed.subarray(at, at + 7))
      e.stderr = full.stderr
      return Promise.reject(e)
    },
    forward: () => Promise.reject(new Error('no forwarding here')),
    close() {},
  }
}

const answers = (line: string): ExecResult =>
  line === buildCommandLine('routeTable', true)
    ? {code: 0, stdout: Buffer.from('default via 10.0.0.1 dev eth0\n'), stderr: ''}
    : {code: 0, stdout: Buffer.from('-P INPUT ACCEPT\n'.repeat(100)), stderr: ''}

test('ssh batch: a read that times out fails as it would alone; the reads before it keep their output, the ones after it fail as not run', async () => {
  // Cut in the middle of the second read's output: the first ended, the second was under way, the third never ran.
  const session = stoppingSession(
    answers,
    (full) => full.stdout.indexOf('-P INPUT') + 200,
    (program) => new CommandTimedOut(program, 20_000),
  )
  const access = new SshNodeAccess(session)
  const reads = [access.run('routeTable'), access.run('iptablesSave'), access.run('ipvsadm')].map((p) =>
    p.then(outcome, (e: Error) => e.message),
  )
  assert.deepEqual(await Promise.all(reads), [
    [0, 'default via 10.0.0.1 dev eth0\n', ''],
    '"iptables-save" did not finish within 20s',
    '"ipvsadm" not run: "iptables-save" did not finish within 20s, before it in the same SSH command',
  ])
  assert.deepEqual(session.lines.slice(1).map(linesOfBatch), [['ip route show', 'iptables-save', 'ipvsadm -Sn']])
})

test('ssh batch: past the output cap, the read under way fails naming itself and the cap; the reads before it keep their output', async () => {
  const session = stoppingSession(
    answers,
    (full) => full.stdout.indexOf('-P INPUT') + 1,
    (program) => new OutputCapExceeded(program, 1024),
  )
  const access = new SshNodeAccess(session)
  const reads = [access.run('routeTable'), access.run('iptablesSave')].map((p) =>
    p.then(outcome, (e: Error) => e.message),
  )
  assert.deepEqual(await Promise.all(reads), [
    [0, 'default via 10.0.0.1 dev eth0\n', ''],
    `"iptables-save" printed more than 1024 bytes: stopped there (the cap on one command's output)`,
  ])
})

test("ssh batch: the connection's first exec is a batch like the others: stopped, its errors name the read under way (`id`, as alone), the reads that ended keep their output", async () => {
  const firstAnswers = (line: string): ExecResult => ({
    code: 0,
    stdout: Buffer.from(line === 'id -u' ? '0\n' : `${line.split(' ')[0]} v1.8.9 (nf_tables)\n`),
    stderr: '',
  })
  /** A node that stops every exec (`stopped`) after `keep` bytes of its stdout, the first exec too. */
  const stopsEvery = (
    keep: (full: ExecResult) => number,
    stopped: (program: string) => CommandTimedOut | OutputCapExceeded,
  ) => {
    const lines: string[] = []
    const session: SshChannel = {
      host: {hostName: '10.0.0.7', port: 22},
      exec(command: CommandLine): Promise<ExecResult> {
        lines.push(command)
        const full = answerBatch(command, isFirstExec(command) ? firstAnswers : answers)
        const e = stopped(command.split(' ')[0])
        e.stdoutChunks.push(full.stdout.subarray(0, keep(full)))
        e.stderr = full.stderr
        return Promise.reject(e)
      },
      forward: () => Promise.reject(new Error('no forwarding here')),
      close() {},
    }
    return {session, lines}
  }
  // A flood or a hang from the first byte: every read fails with what `id -u` alone failed with.
  for (const [stopped, message] of [
    [(p: string) => new CommandTimedOut(p, 20_000), '"id" did not finish within 20s'],
    [
      (p: string) => new OutputCapExceeded(p, 32 * 1024 * 1024),
      `"id" printed more than 32 MiB: stopped there (the cap on one command's output)`,
    ],
  ] as const) {
    const {session, lines} = stopsEvery(() => 0, stopped)
    const access = new SshNodeAccess(session)
    await assert.rejects(access.usesSudo(), {message})
    await assert.rejects(access.run('iptablesVersion'), {message})
    await assert.rejects(access.run('routeTable'), {message})
    assert.deepEqual(lines.map(linesOfBatch), [['id -u', 'iptables -V', 'ip6tables -V']])
  }
  // Stopped after `id -u` ended: the login is known; `iptables -V` was under way and fails as it would alone.
  const {session} = stopsEvery(
    (full) => full.stdout.indexOf('iptables v'),
    (p) => new CommandTimedOut(p, 20_000),
  )
  const access = new SshNodeAccess(session)
  assert.equal(await access.usesSudo(), false)
  const reads = [access.run('iptablesVersion'), access.run('ip6tablesVersion')].map((p) =>
    p.then(outcome, (e: Error) => e.message),
  )
  assert.deepEqual(await Promise.all(reads), [
    '"iptables" did not finish within 20s',
    '"ip6tables" not run: "iptables" did not finish within 20s, before it in the same SSH command',
  ])
})

test('ssh batch under Compression yes: a dump and the small reads beside it go as one exec, its stdout through gzip; each output comes back byte for byte', async () => {
  const dump = `*nat\n${'-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m tcp --dport 443 -j KUBE-SVC-NPX46M4PTMTKRN6Y\n'.repeat(20_000)}`
  const bin = programs({
    'iptables-save': `#!/bin/sh\nprintf '%s' '${dump}'\n`,
    ip: "#!/bin/sh\nprintf 'default via 10.0.0.1 dev eth0\\n'\nprintf 'warn' >&2\n",
  })
  try {
    const session = shellSession(bin, true)
    const access = new SshNodeAccess(session)
    const [save, routes] = await Promise.all([access.run('iptablesSave'), access.run('routeTable')])
    assert.deepEqual(outcome(save), [0, dump, ''])
    assert.deepEqual(outcome(routes), [0, 'default via 10.0.0.1 dev eth0\n', 'warn'])
    // id -u with command -v gzip; then the two reads, compressed together.
    assert.equal(session.lines.length, 2)
    assert.match(session.lines[1], / \| gzip -1$/)
    assert.deepEqual(linesOfBatch(session.lines[1]), [
      buildCommandLine('iptablesSave', asRoot),
      buildCommandLine('routeTable', asRoot),
    ])
  } finally {
    rmSync(bin, {recursive: true, force: true})
  }
})

test("ssh batch: a small read past the command cap fails alone, naming itself and the cap, though a dump's larger cap bounds the whole command", async () => {
  const caps: Array<number | undefined> = []
  const session: SshChannel = {
    host: {hostName: '10.0.0.7', port: 22},
    maxOutputBytes: 1024,
    exec(command: CommandLine, _timeoutMs?: number, maxOutputBytes?: number): Promise<ExecResult> {
      caps.push(maxOutputBytes)
      if (isFirstExec(command)) return Promise.resolve(answerFirstExec(command))
      return Promise.resolve(
        answerBatch(command, (line) => ({
          code: 0,
          stdout: Buffer.from(line === 'ip route show' ? 'x'.repeat(2000) : '*nat\nCOMMIT\n'),
          stderr: '',
        })),
      )
    },
    forward: () => Promise.reject(new Error('no forwarding here')),
    close() {},
  }
  const access = new SshNodeAccess(session)
  const reads = [access.run('iptablesSave'), access.run('routeTable')].map((p) =>
    p.then(outcome, (e: Error) => e.message),
  )
  assert.deepEqual(await Promise.all(reads), [
    [0, '*nat\nCOMMIT\n', ''],
    `"ip" printed more than 1024 bytes: stopped there (the cap on one command's output)`,
  ])
  assert.deepEqual(caps, [undefined, 1024])
})

test("ssh batch: the reads run side by side in the one exec, each with its own stdout, stderr and exit status; a lane's reads (iptables' lock) one after another", async () => {
  // Each program notes its start and end in one log, and waits (at most 5 s) until three programs have started: side
  // by side, the three lanes' first reads start before any read ends; one after another, each would end first.
  const log = join(mkdtempSync(join(tmpdir(), 'kpd-batch-log-')), 'log')
  const waitForThree = `i=0; while [ "$(grep -c start ${log})" -lt 3 ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done`
  const program = (name: string, body: string) =>
    `#!/bin/sh\necho "start ${name}" >> ${log}\n${waitForThree}\n${body}\necho "end ${name}" >> ${log}\n`
  const bin = programs({
    ip: program('ip', "printf 'default via 10.0.0.1 dev eth0\\n'; printf 'ip warns\\n\\n' >&2"),
    conntrack: `${program('conntrack', "printf 'conntrack v1.4.7: 0 flow entries\\n' >&2")}exit 1\n`,
    // `iptables -V` (the connection's first exec, with `id -u`) answers at once, outside the log.
    iptables: `#!/bin/sh\n[ "$1" = -V ] && { echo 'iptables v1.8.9 (nf_tables)'; exit 0; }\n${program('$(for a; do c=$a; done; echo $c)', 'for a; do c=$a; done; printf -- "-N %s\\n" "$c"').replace('#!/bin/sh\n', '')}`,
  })
  try {
    const session = shellSession(bin, false)
    const access = new SshNodeAccess(session)
    await access.usesSudo()
    const answers = await Promise.all([
      access.run('ruleCounters', {family: 4, table: 'nat', chain: 'KUBE-SERVICES'}),
      access.run('routeTable'),
      access.run('conntrackList', {protocol: 'tcp', address: '10.96.0.1'}),
      access.run('ruleCounters', {family: 4, table: 'nat', chain: 'KUBE-NODEPORTS'}),
    ])
    assert.deepEqual(answers.map(outcome), [
      [0, '-N KUBE-SERVICES\n', ''],
      [0, 'default via 10.0.0.1 dev eth0\n', 'ip warns\n\n'],
      [1, '', 'conntrack v1.4.7: 0 flow entries\n'],
      [0, '-N KUBE-NODEPORTS\n', ''],
    ])
    assert.equal(session.lines.length, 2, 'id -u, then the four reads in one exec')
    // The two iptables reads (one lane) next to each other in the batch.
    assert.deepEqual(linesOfBatch(session.lines[1]), [
      buildCommandLine('ruleCounters', asRoot, {family: 4, table: 'nat', chain: 'KUBE-SERVICES'}),
      buildCommandLine('ruleCounters', asRoot, {family: 4, table: 'nat', chain: 'KUBE-NODEPORTS'}),
      buildCommandLine('routeTable', asRoot),
      buildCommandLine('conntrackList', asRoot, {protocol: 'tcp', address: '10.96.0.1'}),
    ])
    const events = readFileSync(log, 'utf8').trim().split('\n')
    assert.deepEqual(
      events.slice(0, 3).sort(),
      ['start KUBE-SERVICES', 'start conntrack', 'start ip'],
      `three lanes side by side: ${events.join(', ')}`,
    )
    assert.ok(
      events.indexOf('end KUBE-SERVICES') < events.indexOf('start KUBE-NODEPORTS'),
      `one lane's reads one after another: ${events.join(', ')}`,
    )
  } finally {
    rmSync(bin, {recursive: true, force: true})
    rmSync(dirname(log), {recursive: true, force: true})
  }
})

test("ssh batch: NUL bytes a read prints on stderr, which the node's shell cannot hold, are said to be dropped in that read's stderr (bash); its stdout and the other reads are untouched", async () => {
  const bin = programs({
    ipvsadm: "#!/bin/sh\nprintf 'no ipvs\\000 here\\n' >&2\nprintf -- '-A -t 10.96.0.1:443 -s rr'\nexit 2\n",
    ip: "#!/bin/sh\nprintf 'default via 10.0.0.1 dev eth0\\n'\nprintf 'warn\\n' >&2\n",
  })
  const lines: string[] = []
  // As sshd runs it under a bash login shell (dash drops the bytes without a word: nothing to say there).
  const session: SshChannel = {
    host: {hostName: '10.0.0.7', port: 22},
    exec(command: CommandLine): Promise<ExecResult> {
      lines.push(command)
      const r = spawnSync('bash', ['-c', command], {env: {...process.env, PATH: `${bin}:${process.env.PATH}`}})
      return Promise.resolve({code: r.status, stdout: r.stdout, stderr: r.stderr.toString()})
    },
    forward: () => Promise.reject(new Error('no forwarding here')),
    close() {},
  }
  try {
    const access = new SshNodeAccess(session)
    await access.usesSudo()
    const answers = await Promise.all([access.run('ipvsadm'), access.run('routeTable')])
    assert.deepEqual(answers.map(outcome), [
      [2, '-A -t 10.96.0.1:443 -s rr', `no ipvs here\n${NUL_DROPPED_NOTE}\n`],
      [0, 'default via 10.0.0.1 dev eth0\n', 'warn\n'],
    ])
    assert.equal(lines.length, 2, 'id -u (with the iptables versions), then the two reads in one exec')
  } finally {
    rmSync(bin, {recursive: true, force: true})
  }
})

test("the reads asked in a connection's first exec (askedFirst) take no sudo and no arguments: they run before the login is known", () => {
  const first = (Object.keys(NODE_READS) as NodeCommandKey[]).filter((key) => readOf(key).askedFirst)
  assert.deepEqual(first, ['iptablesVersion', 'ip6tablesVersion'])
  for (const key of first) assert.deepEqual([readOf(key).root, takesArguments(readOf(key))], ['no', false], key)
})
