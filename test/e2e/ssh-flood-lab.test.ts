import assert from 'node:assert/strict'
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {after, before, describe, test} from 'node:test'
import {labGuard} from '../helpers/lab-guard.js'
import {withLab} from '../helpers/lab-suite.js'
import {runCli, type CliResult} from '../helpers/run-cli.js'
import {HostileSshd, rssHook} from '../lab/hostile-sshd.js'
import type {NetnsLab} from '../lab/netns-lab.js'
import {run} from '../lab/sh.js'
import {capText, DUMP_OUTPUT_CAP_BYTES} from '../../src/util/output-cap.js'
import {labAccess} from '../helpers/lab-cli.js'

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
  const rssFile = join(dir, 'rss')
  let sshd: HostileSshd
  let hook: string

  before(() => {
    // The member is 64 MiB of zeros; sixteen of them decompress to 1 GiB from about a megabyte.
    run('sh', ['-c', `head -c 64M /dev/zero | gzip -9 > ${dir}/member.gz`])
    const member = readFileSync(join(dir, 'member.gz'))
    writeFileSync(join(dir, 'bomb.gz'), Buffer.concat(Array.from({length: 16}, () => member)))
    hook = rssHook(dir, rssFile)
    sshd = new HostileSshd(lab, dir)
  })

  // Each test puts the lab's own sshd back; the lab itself is gone by now (its after hook ran first).
  after(() => {
    sshd?.stopAll()
    rmSync(dir, {recursive: true, force: true})
  })

  /** The doctor with every rule read (iptables-save), its peak RSS in MiB measured by a hook inside its process. */
  async function doctor(): Promise<{r: CliResult; rssMb: number}> {
    rmSync(rssFile, {force: true})
    const r = await runCli(
      ['svc', 'web', '-n', 'shop', ...labAccess(lab), '--all-rules', '--no-probe', '--timeout', '20', '-o', 'json'],
      {NODE_OPTIONS: `--import=${hook}`},
      120_000,
    )
    return {r, rssMb: Number(readFileSync(rssFile, 'utf8')) / 1024}
  }

  const node = (r: CliResult, name: string) => r.json.nodes.find((n: {name: string}) => n.name === name)

  test('a node whose iptables-save floods: that node fails naming the command and the cap; the other is judged', async () => {
    const flood = 'yes ":KUBE-FLOOD - [0:0]"'
    await sshd.start('node-b', {'iptables-save': flood, 'iptables-nft-save': flood, 'iptables-legacy-save': flood})
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
      await sshd.restore('node-b')
    }
  })

  test('a gzip bomb under Compression yes: the decompressed size is capped, the node fails naming it; the other is judged', async () => {
    await sshd.start('node-a', {gzip: `exec cat ${join(dir, 'bomb.gz')}`})
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
      await sshd.restore('node-a')
    }
  })
})
