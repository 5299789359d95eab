/**
 * Issue #32 item 2: a printed command never lets a name or address from the cluster become an option of the program it
 * runs. A kubelet writes its Node's addresses, anyone who can create Pods names them: `-oProxyCommand=…` as the ssh
 * host, or `-o…` as a Pod, would run a command on the operator's machine when pasted. Every printed command is parsed
 * by bash and pasted with each program recording its argv: no word from the cluster comes before a `--`.
 */
import assert from 'node:assert/strict'
import {existsSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {after, test} from 'node:test'
import type {NodeReadVia} from '../../src/diagnosis/choose-transport.js'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {nodeAddress} from '../../src/diagnosis/node-address.js'
import {kubectlOf, liveReach} from '../../src/diagnosis/reach.js'
import {DEFAULT_REACH, isSshHost, nodeCommand} from '../../src/model/reach.js'
import {labPods} from '../fixtures/lab-cluster.js'
import {assertPastes} from '../helpers/command-pastes.js'
import {offlineCluster} from '../helpers/offline-cluster.js'

const tmp = mkdtempSync(join(tmpdir(), 'kpd-paste-inject-'))
after(() => rmSync(tmp, {recursive: true, force: true}))

/** What a pasted option would do: create this file. */
const PWNED = join(tmp, 'pwned')
const HOSTILE_ADDRESS = `-oProxyCommand=touch ${PWNED}`
const HOSTILE_POD = '-oyaml'
const HOSTILE_KUBE_PROXY = '--kubeconfig=/tmp/x'

const via = (v: Partial<NodeReadVia>): NodeReadVia => ({
  transport: null,
  address: null,
  why: '',
  notUsed: [],
  notRead: [],
  ...v,
})

/** Every word of the cluster's in `argv` comes after its stage's `--`, where no program reads options. */
function assertNoClusterOption(argv: string[][], hostile: string[], what: string): void {
  for (const stage of argv) {
    const end = stage.indexOf('--')
    const options = end < 0 ? stage : stage.slice(0, end)
    for (const word of options)
      assert.ok(
        !hostile.some((h) => word.includes(h)),
        `${what}: ${JSON.stringify(word)} before -- in ${stage.join(' ')}`,
      )
    if (stage[0] === 'ssh') {
      assert.ok(end > 0, `${what}: ssh without -- before its host: ${stage.join(' ')}`)
      assert.ok(isSshHost(stage[end + 1]), `${what}: ssh host ${stage[end + 1]}`)
    }
  }
}

test('an ssh host is a parsed IP address or a plain host name, and comes after --', () => {
  for (const ok of ['node-a', '10.0.0.7', 'fd00::7', 'ip-10-0-0-7.eu-west-1.compute.internal'])
    assert.ok(isSshHost(ok), ok)
  for (const bad of [HOSTILE_ADDRESS, '-p2222', '', 'a b', 'node-a;id', '[fd00::7]', 'root@node-a', '-', 'a..b'])
    assert.ok(!isSshHost(bad), bad)
  assert.deepEqual(nodeCommand(DEFAULT_REACH, 'node-a', {argv: ['conntrack', '-S'], sudo: true}), [
    ['ssh', '--', 'node-a', 'sudo', 'conntrack', '-S'],
  ])
  const hostile = {kubectl: ['kubectl'], node: () => ({via: 'ssh' as const, ssh: ['ssh'], host: HOSTILE_ADDRESS})}
  assert.equal(nodeCommand(hostile, 'node-a', {argv: ['conntrack', '-S']}), undefined)
  const pod = (name: string, namespace = 'kube-system') => ({
    kubectl: ['kubectl'],
    node: () => ({via: 'kube-proxy' as const, namespace, pod: name}),
  })
  assert.equal(nodeCommand(pod(HOSTILE_KUBE_PROXY), 'node-b', {argv: ['iptables-save']}), undefined)
  assert.equal(nodeCommand(pod('kube-proxy-x', '-A'), 'node-b', {argv: ['iptables-save']}), undefined)
  // A snapshot's context comes from its manifest: one that looks like a flag stays --context's value.
  assert.deepEqual(kubectlOf({context: '-v9'}), ['kubectl', '--context=-v9'])
})

test("a Node's address that is not an IP address is no address: not connected to, not printed", () => {
  const node = {
    metadata: {name: 'node-a'},
    status: {
      addresses: [
        {type: 'InternalIP', address: HOSTILE_ADDRESS},
        {type: 'ExternalIP', address: '10.9.0.1'},
      ],
    },
  }
  assert.equal(nodeAddress(node), '10.9.0.1')
  assert.equal(nodeAddress({status: {addresses: [{type: 'InternalIP', address: HOSTILE_ADDRESS}]}}), undefined)
  assert.equal(
    nodeAddress({status: {addresses: [null as never, {type: 'InternalIP', address: 7 as never}]}}),
    undefined,
  )
})

test('hostile Node addresses, Pod names and kube-proxy Pod names: every printed command pastes with no option from the cluster', async () => {
  const sshConfig = join(tmp, 'ssh_config')
  writeFileSync(sshConfig, 'Host bastion\n  HostName 10.200.0.1\n')
  const {cluster, observations} = offlineCluster({
    pods: labPods().map((p) => (p.name === 'web-a1' ? {...p, name: HOSTILE_POD, ready: false} : p)),
    faults: {'node-a': {omitEndpoint: '10.244.2.11'}},
    editObservation: {'node-b': (o) => ({name: o.name, reachable: false, error: 'exec refused'})},
    editCluster: (c) => {
      for (const n of c.nodes) n.status = {...n.status, addresses: [{type: 'InternalIP', address: HOSTILE_ADDRESS}]}
    },
  })
  const readVia = new Map<string, NodeReadVia>([
    ['node-a', via({transport: 'ssh', address: '10.200.0.11:22'})],
    ['node-b', via({transport: 'kube-proxy', address: `pod kube-system/${HOSTILE_KUBE_PROXY}`})],
    ['node-c', via({transport: 'ssh', address: '10.200.0.13:22'})],
  ])
  const reach = await liveReach({sshConfig}, readVia, cluster.nodes)
  const findings = diagnose(cluster, observations, {reach}).findings
  // Every printed command: each finding's check and its fix.
  const commands = findings.flatMap((f) =>
    [f.check, f.fix?.command && f.fix.argv ? {command: f.fix.command, argv: f.fix.argv} : null]
      .filter((c) => c !== null)
      .map((c) => ({code: f.code, command: c.command, argv: c.argv})),
  )
  assert.ok(commands.length >= 1, `commands printed: ${commands.map((c) => c.command).join('; ')}`)
  const hostile = [HOSTILE_ADDRESS, HOSTILE_POD, HOSTILE_KUBE_PROXY, 'ProxyCommand']
  for (const c of commands) {
    assertPastes(c.command, c.argv, c.code)
    assertNoClusterOption(c.argv, hostile, c.code)
  }
  // The node the SSH config does not name is reached by its name, never by the hostile address; the Pods get prose.
  const sepMissing = findings.find((f) => f.code === 'KPD-SEP-MISSING' && f.node === 'node-a')!
  assert.deepEqual(sepMissing.check!.argv[0].slice(0, 5), ['ssh', '-F', sshConfig, '--', 'node-a'])
  const unreadable = findings.find((f) => f.code === 'KPD-NODE-UNREADABLE' && f.node === 'node-b')!
  assert.equal(unreadable.check?.command ?? null, null)
  assert.equal(unreadable.fix?.command ?? null, null)
  assert.ok(unreadable.text ?? unreadable.fix?.text)
  const notReady = findings.find((f) => f.code === 'KPD-ENDPOINT-NOT-READY')!
  assert.equal(notReady.check?.command ?? null, null)
  assert.equal(notReady.fix?.command ?? null, null)
  assert.equal(existsSync(PWNED), false)
})
