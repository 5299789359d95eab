import assert from 'node:assert/strict'
import {test} from 'node:test'
import {closeEarlyOpens, openEarly, readNodesThrough, type ChoiceContext} from '../../src/diagnosis/choose-transport.js'
import {collectNode} from '../../src/node/read/collect-node.js'
import {linesOfBatch, programOf, type CommandLine} from '../../src/node/node-commands.js'
import {OutputCapExceeded, type ExecResult} from '../../src/node/transport/ssh/ssh-session.js'
import {SshNodeAccess, type SshChannel} from '../../src/node/transport/ssh/ssh-transport.js'
import type {NodeTarget} from '../../src/node/transport/transports.js'
import {COMMAND_OUTPUT_CAP_BYTES} from '../../src/util/output-cap.js'
import {answerBatch, answerFirstExec, isFirstExec} from '../helpers/batch-answer.js'

/** A node's IPv4 rules: a filter table, nothing of kube-proxy's. */
const RULES = '*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n'

/** What happened to the stand-in nodes, in order: connected, each exec's reads, closed. */
type Log = string[]

/**
 * A node over SSH. `healthy`: a root login whose reads all answer (exit 0; its rules RULES, the rest empty); `flood`: its sshd floods every
 * command, which the session stops at the cap as SshSession does (its error names the line's first word, the way a
 * real session's does).
 */
function node(name: string, kind: 'healthy' | 'flood', log: Log): SshChannel {
  return {
    host: {hostName: `10.0.0.${name.length}`, port: 22},
    exec(command: CommandLine, _timeoutMs?: number, maxOutputBytes = COMMAND_OUTPUT_CAP_BYTES): Promise<ExecResult> {
      log.push(`${name} exec ${linesOfBatch(command)[0]}`)
      if (kind === 'flood') {
        const e = new OutputCapExceeded(programOf(command).replace(/;$/, ''), maxOutputBytes)
        Object.assign(e, {stdoutChunks: [Buffer.from('\x1b[2Jflood flood flood')], stderr: ''})
        return Promise.reject(e)
      }
      return Promise.resolve(
        isFirstExec(command)
          ? answerFirstExec(command)
          : answerBatch(command, (line) => ({
              code: 0,
              stdout: Buffer.from(line.startsWith('iptables-save') ? RULES : ''),
              stderr: '',
            })),
      )
    },
    forward: () => Promise.reject(new Error('no forwarding here')),
    close: () => log.push(`${name} closed`),
  }
}

/** `--via ssh` to the stand-in nodes: `down` refuses the connection; the others are `kinds`' nodes. */
function context(kinds: Record<string, 'healthy' | 'flood'>, log: Log): ChoiceContext {
  return {
    access: {via: 'ssh', insecureIgnoreHostKey: false, concurrency: 4},
    timeoutMs: 5000,
    kubectl: ['kubectl'],
    connectorOf: () =>
      Promise.resolve(async (target: NodeTarget) => {
        log.push(`${target.name} connect`)
        await new Promise((resolve) => setImmediate(resolve))
        const kind = kinds[target.name]
        if (!kind) throw new Error(`SSH to ${target.name}:22 failed: connect ECONNREFUSED`)
        return new SshNodeAccess(node(target.name, kind, log))
      }),
  }
}

const targets = (...names: string[]): NodeTarget[] => names.map((name) => ({name}))

/** Each node's read as the user sees it: read, or its error line. */
async function readWith(ctx: ChoiceContext, names: string[], early?: ReturnType<typeof openEarly>) {
  const reads = await readNodesThrough(
    targets(...names),
    ctx,
    (name, connect) => collectNode(name, connect, {timeoutMs: ctx.timeoutMs}),
    early,
  )
  return Object.fromEntries(
    names.map((name) => {
      const o = reads.collected.get(name)!.observation
      return [name, o.reachable ? 'read' : o.error]
    }),
  )
}

const afterTurns = async (n: number) => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve))
}

test('a node opened early is connected once, its first exec asked before its read, and closed once by the read', async () => {
  const log: Log = []
  const ctx = context({a: 'healthy'}, log)
  const early = openEarly(targets('a'), ctx)
  await afterTurns(5)
  assert.deepEqual(log, ['a connect', 'a exec id -u'])
  assert.deepEqual(await readWith(ctx, ['a'], early), {a: 'read'})
  assert.deepEqual(
    log.filter((l) => !l.startsWith('a exec') || l === 'a exec id -u'),
    ['a connect', 'a exec id -u', 'a closed'],
  )
})

test('a node opened early that no read takes is closed: when the run ends before the reads, and when the read skips it', async () => {
  const log: Log = []
  const ctx = context({a: 'healthy', b: 'healthy'}, log)
  await closeEarlyOpens(openEarly(targets('a', 'b'), ctx))
  assert.deepEqual(log.filter((l) => l.endsWith('closed')).sort(), ['a closed', 'b closed'])

  const again: Log = []
  const ctx2 = context({a: 'healthy', b: 'healthy'}, again)
  assert.deepEqual(await readWith(ctx2, ['a'], openEarly(targets('a', 'b'), ctx2)), {a: 'read'})
  assert.deepEqual(again.filter((l) => l.endsWith('closed')).sort(), ['a closed', 'b closed'])
  assert.equal(again.filter((l) => l.endsWith('connect')).length, 2)
})

test("a flooding node and a refusing one, opened early or not: each read says its own failure with today's message, the other node is read, every connection closed", async () => {
  const cap = `"id" printed more than 32 MiB: stopped there (the cap on one command's output)`
  const expected = {a: 'read', b: cap, c: 'SSH to c:22 failed: connect ECONNREFUSED'}
  for (const opened of [true, false]) {
    const log: Log = []
    const ctx = context({a: 'healthy', b: 'flood'}, log)
    const early = opened ? openEarly(targets('a', 'b', 'c'), ctx) : undefined
    assert.deepEqual(await readWith(ctx, ['a', 'b', 'c'], early), expected, `opened early: ${opened}`)
    // The flooding node's connection is closed (left open, it kept the run from ending); each node connected once.
    assert.deepEqual(
      log.filter((l) => l.endsWith('closed')).sort(),
      ['a closed', 'b closed'],
      `opened early: ${opened}`,
    )
    assert.deepEqual(
      log.filter((l) => l.endsWith('connect')).sort(),
      ['a connect', 'b connect', 'c connect'],
      `opened early: ${opened}`,
    )
    // The flooding node was asked one exec: its first, which failed the node.
    assert.deepEqual(
      log.filter((l) => l.startsWith('b exec')),
      ['b exec id -u'],
    )
  }
})
