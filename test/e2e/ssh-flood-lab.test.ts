import assert from 'node:assert/strict'
import type {ChildProcess} from 'node:child_process'
import {copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {after, before, describe, test} from 'node:test'
import {labGuard} from '../helpers/lab-guard.js'
import {withLab} from '../helpers/lab-suite.js'
import {runCli, type CliResult} from '../helpers/run-cli.js'
import {startSshdInNs, writeSshdConfig} from '../lab/lab-sshd.js'
import type {NetnsLab} from '../lab/netns-lab.js'
import {run, sleep, tryRun} from '../lab/sh.js'
import {NODES} from '../fixtures/lab-cluster.js'
import {capText, DUMP_OUTPUT_CAP_BYTES} from '../../src/util/output-cap.js'

/**
 * Hostile nodes over SSH: one whose iptables-save never stops printing, one whose gzip (the dumps come back through it
 * under `Compression yes`, node-a's setting in the lab) answers with a gzip bomb. Each is failed with the cap named,
 * the other node is still judged, and the doctor's memory stays bounded (its peak RSS, measured inside its process).
 */

const why = labGuard()
/** The dumps get the dump cap over SSH as through a Pod (a 12,000-Service node's iptables-save is past the command cap). */
const CAP_LINE = (program: string, decompressed: boolean) =>
  `"${program}" printed more than ${capText(DUMP_OUTPUT_CAP_BYTES)}${decompressed ? ' once decompressed (Compression yes)' : ''}: stopped there (the cap on one command's output)`
/** The doctor's peak RSS bound: its own footprint and one capped dump, far from the gigabytes a flood reached. */
const RSS_BOUND_MB = DUMP_OUTPUT_CAP_BYTES / (1024 * 1024) + 256

describe('svc against a flooding node and a gzip bomb over SSH', {skip: why}, () => {
  let lab: NetnsLab
  withLab((l) => {
    lab = l
  })
  const dir = mkdtempSync(join(tmpdir(), 'kpd-flood-'))
  const procs: ChildProcess[] = []
  const logs: string[] = []
  const rssFile = join(dir, 'rss')
  const rssHook = join(dir, 'rss-hook.mjs')

  before(() => {
    // The member is 64 MiB of zeros; sixteen of them decompress to 1 GiB from about a megabyte.
    run('sh', ['-c', `head -c 64M /dev/zero | gzip -9 > ${dir}/member.gz`])
    const member = readFileSync(join(dir, 'member.gz'))
    writeFileSync(join(dir, 'bomb.gz'), Buffer.concat(Array.from({length: 16}, () => member)))
    writeFileSync(
      rssHook,
      `import {writeFileSync} from 'node:fs'\nprocess.on('exit', () => writeFileSync(${JSON.stringify(rssFile)}, String(process.resourceUsage().maxRSS)))\n`,
    )
    copyFileSync(join(lab.dir, 'authorized_keys'), join(dir, 'authorized_keys'))
  })

  // Each test puts the lab's own sshd back; the lab itself is gone by now (its after hook ran first).
  after(() => {
    for (const p of procs) p.kill('SIGKILL')
    rmSync(dir, {recursive: true, force: true})
  })

  /** Stops the lab's sshd of `node` (by its pid file) and starts one whose commands find `fakes` first on PATH. */
  async function hostileSshd(nodeName: string, fakes: Record<string, string>): Promise<void> {
    const node = NODES.find((n) => n.name === nodeName)!
    const bin = join(dir, `bin-${node.key}`)
    mkdirSync(bin, {recursive: true})
    for (const [name, body] of Object.entries(fakes))
      writeFileSync(join(bin, name), `#!/bin/sh\n${body}\n`, {mode: 0o755})
    const wrapper = join(dir, `command-${node.key}.sh`)
    writeFileSync(wrapper, `#!/bin/sh\nPATH=${bin}:$PATH\nexport PATH\nexec /bin/sh -c "$SSH_ORIGINAL_COMMAND"\n`, {
      mode: 0o755,
    })
    const labPid = join(lab.dir, `sshd-${node.key}.pid`)
    if (existsSync(labPid)) {
      tryRun('kill', [readFileSync(labPid, 'utf8').trim()])
      for (let i = 0; i < 50 && existsSync(labPid); i++) await sleep(100)
    }
    for (const f of [`hostkey-${node.key}`, `hostkey-${node.key}.pub`]) copyFileSync(join(lab.dir, f), join(dir, f))
    const cfg = writeSshdConfig(dir, node.key, {forwarding: true, forceCommand: wrapper})
    procs.push(startSshdInNs(lab.nodeNs(node), cfg, logs))
    for (let i = 0; ; i++) {
      const ok = tryRun(
        'ssh',
        ['-F', lab.sshConfigPath, '-o', 'BatchMode=yes', '-o', 'ConnectTimeout=2', node.name, 'true'],
        undefined,
        5000,
      )
      if (ok.code === 0) return
      if (i >= 50) throw new Error(`the hostile sshd on ${node.name} did not start: ${logs.slice(-3).join(' | ')}`)
      await sleep(100)
    }
  }

  async function restoreSshd(nodeName: string): Promise<void> {
    const node = NODES.find((n) => n.name === nodeName)!
    const mine = join(dir, `sshd-${node.key}.pid`)
    if (existsSync(mine)) tryRun('kill', [readFileSync(mine, 'utf8').trim()])
    for (let i = 0; i < 50 && existsSync(mine); i++) await sleep(100)
    await lab.restartSshd(nodeName, true)
  }

  /** The doctor with every rule read (iptables-save), its peak RSS in MiB measured by a hook inside its process. */
  async function doctor(): Promise<{r: CliResult; rssMb: number}> {
    rmSync(rssFile, {force: true})
    const r = await runCli(
      [
        'svc',
        'web',
        '-n',
        'shop',
        '--kubeconfig',
        lab.kubeconfigPath,
        '--ssh-config',
        lab.sshConfigPath,
        '--all-rules',
        '--no-probe',
        '--timeout',
        '20',
        '-o',
        'json',
      ],
      {NODE_OPTIONS: `--import=${rssHook}`},
      120_000,
    )
    return {r, rssMb: Number(readFileSync(rssFile, 'utf8')) / 1024}
  }

  const node = (r: CliResult, name: string) => r.json.nodes.find((n: {name: string}) => n.name === name)

  test('a node whose iptables-save floods: that node fails naming the command and the cap; the other is judged', async () => {
    const flood = 'yes ":KUBE-FLOOD - [0:0]"'
    await hostileSshd('node-b', {'iptables-save': flood, 'iptables-nft-save': flood, 'iptables-legacy-save': flood})
    try {
      const {r, rssMb} = await doctor()
      assert.deepEqual(
        [node(r, 'node-b').reachable, node(r, 'node-b').error],
        [false, CAP_LINE('iptables-save', false)],
        r.stderr,
      )
      assert.equal(node(r, 'node-a').reachable, true)
      assert.ok(
        r.json.paths.some((p: {node: string; ok: boolean}) => p.node === 'node-a' && p.ok === true),
        'node-a is still judged',
      )
      assert.ok(rssMb < RSS_BOUND_MB, `peak RSS ${rssMb.toFixed(0)} MiB`)
    } finally {
      await restoreSshd('node-b')
    }
  })

  test('a gzip bomb under Compression yes: the decompressed size is capped, the node fails naming it; the other is judged', async () => {
    await hostileSshd('node-a', {gzip: `exec cat ${join(dir, 'bomb.gz')}`})
    try {
      const {r, rssMb} = await doctor()
      assert.deepEqual(
        [node(r, 'node-a').reachable, node(r, 'node-a').error],
        [false, CAP_LINE('iptables-save', true)],
        r.stderr,
      )
      assert.equal(node(r, 'node-b').reachable, true)
      assert.ok(r.json.paths.some((p: {node: string; ok: boolean}) => p.node === 'node-b' && p.ok === true))
      assert.ok(rssMb < RSS_BOUND_MB, `peak RSS ${rssMb.toFixed(0)} MiB`)
    } finally {
      await restoreSshd('node-a')
    }
  })
})
