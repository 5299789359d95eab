/**
 * Fix lines that paste: every `fix:`/`next:` is a command that runs exactly as printed, in the user's terms (their
 * --kubeconfig, --context, -n, `ssh -F FILE` and the address SSH connected to, the kube-proxy Pod a node was read
 * through), or prose; never a mix, never a placeholder.
 */
import assert from 'node:assert/strict'
import {cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {after, test} from 'node:test'
import {CATALOGUE} from '../../src/checks/catalogue.js'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {liveReach, snapshotReach} from '../../src/diagnosis/reach.js'
import type {NodeReadVia} from '../../src/diagnosis/choose-transport.js'
import {DEFAULT_REACH, kubectlCommand, nodeCommand} from '../../src/model/reach.js'
import {renderCommand} from '../../src/model/shell.js'
import {offlineCluster} from '../helpers/offline-cluster.js'
import {assertPastes} from '../helpers/command-pastes.js'
import {runCli} from '../helpers/run-cli.js'
import {labPods} from '../fixtures/lab-cluster.js'

const tmp = mkdtempSync(join(tmpdir(), 'kpd-fix-'))
after(() => rmSync(tmp, {recursive: true, force: true}))

interface Steps {
  check: {command: string; argv: string[][]} | null
  fix: {
    command: string | null
    argv: string[][] | null
    text: string | null
    changes: string
    node: string | null
  } | null
  text: string | null
}

for (const example of ['broken-cluster', 'healthy-cluster', 'ipvs-cluster']) {
  test(`examples/${example}: every check, fix and the next step paste as printed (bash -n, no placeholder, argv round trip)`, async () => {
    const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', `examples/${example}`, '-o', 'json'])
    const steps: Steps[] = [...r.json.findings, ...(r.json.next ? [r.json.next] : [])]
    for (const f of steps) {
      assert.ok(f.check !== null || f.fix !== null || f.text !== null)
      if (f.check) assertPastes(f.check.command, f.check.argv, example)
      if (f.fix?.command) assertPastes(f.fix.command, f.fix.argv!, example)
    }
    if (example === 'broken-cluster') {
      assert.deepEqual(r.json.next, {
        check: {
          command: 'ssh -- node-b sudo iptables-save | grep -- KUBE-SEP-DYSIX5QMVXZZP7LU',
          argv: [
            ['ssh', '--', 'node-b', 'sudo', 'iptables-save'],
            ['grep', '--', 'KUBE-SEP-DYSIX5QMVXZZP7LU'],
          ],
        },
        fix: {
          command: 'kubectl -n kube-system delete pod kube-proxy-bx7k2',
          argv: [['kubectl', '-n', 'kube-system', 'delete', 'pod', 'kube-proxy-bx7k2']],
          text: null,
          changes: 'cluster',
          node: null,
        },
        text: null,
      })
      const human = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', `examples/${example}`])
      assert.match(
        human.stdout,
        /^ {2}check: ssh -- node-b sudo iptables-save \| grep -- KUBE-SEP-DYSIX5QMVXZZP7LU\n {2}fix \(changes the cluster\): kubectl -n kube-system delete pod kube-proxy-bx7k2$/m,
      )
      assert.match(
        human.stdout,
        /^ {4}check: ssh -- node-a cat \/sys\/class\/net\/cbr0\/brif\/vweb-a1\/hairpin_mode\n {4}fix \(changes node-a\): ssh -- node-a sudo bridge link set dev vweb-a1 hairpin on\n {4}hint: It is reset when the pod is re-created/m,
      )
      assert.doesNotMatch(human.stdout, /^\s*(next|fix):/m, 'one vocabulary: check:, fix (changes …):, hint:')
    }
  })
}

test("a snapshot's commands name the context it was recorded from", async () => {
  const dir = join(tmp, 'with-context')
  cpSync('examples/broken-cluster', dir, {recursive: true})
  const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'))
  writeFileSync(join(dir, 'manifest.json'), JSON.stringify({...manifest, context: 'prod east'}))
  const reach = snapshotReach('prod east')
  assert.deepEqual(kubectlCommand(reach, 'shop', ['get', 'pods']), [
    ['kubectl', '--context', 'prod east', '-n', 'shop', 'get', 'pods'],
  ])
  const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', dir, '-o', 'json'])
  assert.equal(r.code, 1)
  assert.equal(r.json.next.check.command, 'ssh -- node-b sudo iptables-save | grep -- KUBE-SEP-DYSIX5QMVXZZP7LU')
  assert.equal(r.json.next.fix.command, "kubectl --context 'prod east' -n kube-system delete pod kube-proxy-bx7k2")
})

test("the user's --kubeconfig, --context, -n, ssh -F FILE, the SSH address and the kube-proxy Pod are in the commands", async () => {
  const sshConfig = join(tmp, 'ssh config')
  writeFileSync(sshConfig, 'Host node-a\n  HostName 10.200.0.11\n  User admin\n')
  const via = (v: Partial<NodeReadVia>): NodeReadVia => ({
    transport: null,
    address: null,
    why: '',
    notUsed: [],
    notRead: [],
    ...v,
  })
  const readVia = new Map<string, NodeReadVia>([
    ['node-a', via({transport: 'ssh', address: 'admin@10.200.0.11:22'})],
    ['node-b', via({transport: 'kube-proxy', address: 'pod kube-system/kube-proxy-bx7k2'})],
  ])
  const {cluster, observations} = offlineCluster({
    pods: labPods().map((p) => (p.name === 'web-a1' ? {...p, ready: false} : p)),
    faults: {'node-a': {omitEndpoint: '10.244.2.11'}},
    editObservation: {'node-b': (o) => ({name: o.name, reachable: false, error: 'exec refused'})},
  })
  const reach = await liveReach(
    {kubeconfig: '/home/me/.kube/prod config', context: 'prod', sshConfig},
    readVia,
    cluster.nodes,
  )
  const fixes = Object.fromEntries(
    diagnose(cluster, observations, {reach}).findings.map((f) => [`${f.code} ${f.node}`, f]),
  )
  const k = ['kubectl', '--kubeconfig', '/home/me/.kube/prod config', '--context', 'prod']
  assert.deepEqual(fixes['KPD-ENDPOINT-NOT-READY node-a'].check?.argv, [
    [...k, '-n', 'shop', 'describe', 'pod', 'web-a1'],
  ])
  assert.equal(
    fixes['KPD-ENDPOINT-NOT-READY node-a'].check?.command,
    "kubectl --kubeconfig '/home/me/.kube/prod config' --context prod -n shop describe pod web-a1",
  )
  assert.deepEqual(fixes['KPD-SEP-MISSING node-a'].check?.argv, [
    ['ssh', '-F', sshConfig, '--', 'node-a', 'sudo', 'iptables-save'],
    ['grep', '--', 'KUBE-SVC-67NZLRHBNDSAWJRO'],
  ])
  assert.deepEqual(fixes['KPD-NODE-UNREADABLE node-b'].check?.argv, [
    [...k, '-n', 'kube-system', 'exec', 'kube-proxy-bx7k2', '--', 'iptables-save'],
    ['head'],
  ])
  for (const f of Object.values(fixes)) {
    if (f.check) assertPastes(f.check.command, f.check.argv, f.code)
    if (f.fix?.command) assertPastes(f.fix.command, f.fix.argv!, f.code)
  }

  // A node the config does not name is reached at the address SSH connected to; a node not read gets prose.
  const unnamed = await liveReach(
    {sshConfig},
    new Map([['node-b', via({transport: 'ssh', address: '10.200.0.12:22'})]]),
    cluster.nodes,
  )
  assert.deepEqual(nodeCommand(unnamed, 'node-b', {argv: ['conntrack', '-S'], sudo: true}), [
    ['ssh', '-F', sshConfig, '--', '10.200.0.12', 'sudo', 'conntrack', '-S'],
  ])
  assert.equal(nodeCommand(unnamed, 'node-c', {argv: ['conntrack', '-S']}), undefined)
  const apiOnly = await liveReach({}, new Map([['node-b', via({})]]), cluster.nodes)
  const unread = diagnose(cluster, observations, {reach: apiOnly}).findings.find(
    (f) => f.code === 'KPD-NODE-UNREADABLE',
  )!
  assert.equal(unread.check, null)
  assert.ok(unread.text && unread.text.length > 0)
})

test('a name outside the characters Kubernetes and the kernel allow: no command (prose instead)', () => {
  assert.equal(kubectlCommand(DEFAULT_REACH, 'shop', ['describe', 'pod', 'web;reboot'], ['web;reboot']), undefined)
  assert.equal(kubectlCommand(DEFAULT_REACH, '$(id)', ['get', 'pods']), undefined)
  assert.equal(nodeCommand(DEFAULT_REACH, 'node a', {argv: ['iptables-save']}), undefined)
  assert.equal(
    nodeCommand(DEFAULT_REACH, 'node-a', {argv: ['iptables-save'], filter: ['grep', '--', "KUBE'X"]}, ["KUBE'X"]),
    undefined,
  )
  // What is not a name (a jsonpath, a grep pattern) is quoted: the pasted command gives the program that exact word.
  const c = kubectlCommand(
    DEFAULT_REACH,
    'shop',
    ['get', 'pod', 'web-a1', '-o', 'jsonpath={.spec.containers[*].ports}'],
    ['web-a1'],
  )!
  assert.equal(renderCommand(c), "kubectl -n shop get pod web-a1 -o 'jsonpath={.spec.containers[*].ports}'")
  assertPastes(renderCommand(c), c, 'jsonpath')
  const s = nodeCommand(DEFAULT_REACH, 'node-a', {argv: ['cat', '/sys/class/net/cbr0/brif/veth 1/hairpin_mode']})!
  assertPastes(renderCommand(s), s, 'remote word with a space')
})

test("each catalogue entry's generic text is prose: a sentence, not a command line", () => {
  for (const e of CATALOGUE) {
    assert.ok(
      !/^(kubectl|ssh|sudo|iptables|ip6?tables-save|nft|ip|ipvsadm|ipset|conntrack|sysctl|curl|dig)\s/.test(e.hint),
      `${e.code}: ${e.hint}`,
    )
    assert.ok(!/<[A-Za-z]|\bPOD\b|;\s*(kubectl|ssh)\b/.test(e.hint), `${e.code}: ${e.hint}`)
  }
})

test("through kube-proxy's Pod, only what its image ships: iptables-save yes, ip route no (prose instead)", () => {
  const reach = {
    kubectl: ['kubectl'],
    node: () => ({via: 'kube-proxy' as const, namespace: 'kube-system', pod: 'kube-proxy-bx7k2'}),
  }
  assert.deepEqual(
    nodeCommand(reach, 'node-b', {argv: ['iptables-save'], sudo: true, filter: ['grep', '--', 'KUBE-SVC-X']}),
    [
      ['kubectl', '-n', 'kube-system', 'exec', 'kube-proxy-bx7k2', '--', 'iptables-save'],
      ['grep', '--', 'KUBE-SVC-X'],
    ],
  )
  assert.equal(nodeCommand(reach, 'node-b', {argv: ['ip', 'route', 'get', '10.244.2.10']}), undefined)
})
