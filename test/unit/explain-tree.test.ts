import assert from 'node:assert/strict'
import {test} from 'node:test'
import {runCli} from '../helpers/run-cli.js'

const svc = (example: string, ...extra: string[]) => [
  'svc',
  'web',
  '-n',
  'shop',
  '--snapshot',
  `examples/${example}`,
  '--explain',
  ...extra,
]

/** The lines of one node's tree: from its heading to the next node's heading (or the end). */
function nodeTree(stdout: string, node: string, mode = 'iptables'): string[] {
  const lines = stdout.trimEnd().split('\n')
  const from = lines.indexOf(`${node} (${mode})`)
  assert.ok(from >= 0, `${node}'s tree is printed`)
  const to = lines.findIndex((l, i) => i > from && /^[^\s│├└]/.test(l))
  return lines.slice(from, to < 0 ? undefined : to)
}

/** One entry point's branch of a node's tree: its line and every line below it up to the next entry point. */
function entryBranch(tree: string[], entry: string): string[] {
  const from = tree.findIndex((l) => new RegExp(`^[├└]─ . ${entry} `).test(l))
  assert.ok(from >= 0, `${entry} is in the tree`)
  const to = tree.findIndex((l, i) => i > from && /^[├└]─ /.test(l))
  return tree.slice(from, to < 0 ? undefined : to)
}

test('--explain-format tree: the broken example, node-b pod→ClusterIP, the break marked ✗ with its reason and fix', async () => {
  const r = await runCli(svc('broken-cluster', '--explain-format', 'tree'))
  assert.equal(r.code, 1)
  assert.equal(r.stderr, '')
  const b = nodeTree(r.stdout, 'node-b')
  assert.deepEqual(entryBranch(b, 'pod→ClusterIP'), [
    '├─ ✗ pod→ClusterIP 10.96.10.10:80 (http): breaks at DNAT',
    '│  ├─ ✓ nat/PREROUTING:46 → KUBE-SERVICES',
    '│  ├─ ✓ nat/KUBE-SERVICES:66 -d 10.96.10.10/32 -p tcp --dport 80 → KUBE-SVC-67NZLRHBNDSAWJRO',
    '│  ├─ split into 3 outcomes',
    '│  │  ├─ ✓ 33.3% ⇒ DNAT 10.244.1.10:8080',
    '│  │  │  ├─ ✓ nat/KUBE-SVC-67NZLRHBNDSAWJRO:71 → KUBE-SEP-FZQ6KZLGXRSKN2AD',
    '│  │  │  └─ ✓ nat/KUBE-SEP-FZQ6KZLGXRSKN2AD:63 → DNAT 10.244.1.10:8080',
    '│  │  ├─ ✓ 33.3% ⇒ DNAT 10.244.2.10:8080',
    '│  │  │  ├─ ✓ nat/KUBE-SVC-67NZLRHBNDSAWJRO:72 → KUBE-SEP-F45V6TZZSXLO3WFM',
    '│  │  │  └─ ✓ nat/KUBE-SEP-F45V6TZZSXLO3WFM:61 → DNAT 10.244.2.10:8080',
    '│  │  └─ ✗ 33.3% ⇒ DNAT 10.244.2.7:8080',
    '│  │     ├─ ✓ nat/KUBE-SVC-67NZLRHBNDSAWJRO:73 → KUBE-SEP-DYSIX5QMVXZZP7LU',
    '│  │     └─ ✗ nat/KUBE-SEP-DYSIX5QMVXZZP7LU:59 → DNAT 10.244.2.7:8080',
    '│  │           reason: 33.3% of new connections DNAT to 10.244.2.7:8080 (via KUBE-SEP-DYSIX5QMVXZZP7LU), which is not a ready endpoint',
    '│  │           check: ssh -- node-b sudo iptables-save | grep -- KUBE-SEP-DYSIX5QMVXZZP7LU',
    '│  │           fix (changes the cluster): kubectl -n kube-system delete pod kube-proxy-bx7k2',
    '│  ├─ ✓ filter/FORWARD:15 → KUBE-PROXY-FIREWALL',
    '│  ├─ ✓ filter/FORWARD:16 → KUBE-FORWARD',
    '│  ├─ ✓ filter/FORWARD:17 → KUBE-SERVICES',
    '│  ├─ ✓ filter/FORWARD:18 → KUBE-EXTERNAL-SERVICES',
    '│  ├─ ✓ nat/POSTROUTING:48 → KUBE-POSTROUTING',
    '│  ├─ ✓ nat/KUBE-POSTROUTING:53 ! --mark 0x4000/0x4000 → RETURN',
    '│  └─ ✓ 33.3% to 10.244.1.10:8080 (web-a1) on node-a',
  ])
  // Every entry point of every node is in the tree, each with its verdict as the table shows it.
  assert.deepEqual(
    b.filter((l) => /^[├└]─ /.test(l)).map((l) => l.replace(/ \d+\.\d+\.\d+\.\d+:\d+ .*$/, '')),
    ['├─ ✗ pod→ClusterIP', '├─ ✗ node→ClusterIP', '├─ ✗ outside→NodePort', '└─ ✗ pod→itself'],
  )
  // A break the rules do not show (the bridge's hairpin): the reason and fix under the entry point itself.
  assert.deepEqual(entryBranch(nodeTree(r.stdout, 'node-a'), 'pod→itself').slice(0, 6), [
    '└─ ✗ pod→itself 10.96.10.10:80 (http): breaks at bridge/hairpin',
    '   │  reason: when web-a1 is chosen (33.3%), the reply must go back out vweb-a1 on cbr0, whose hairpin_mode is 0',
    '   │  check: ssh -- node-a cat /sys/class/net/cbr0/brif/vweb-a1/hairpin_mode',
    '   │  fix (changes node-a): ssh -- node-a sudo bridge link set dev vweb-a1 hairpin on',
    "   │  hint: It is reset when the pod is re-created: set the kubelet's --hairpin-mode=hairpin-veth (or the CNI's hairpinMode: true) on the node.",
    '   ├─ ✓ nat/PREROUTING:46 → KUBE-SERVICES',
  ])
})

test('--explain-format tree: the healthy example, every step ✓ and no reason', async () => {
  const r = await runCli(svc('healthy-cluster', '--explain-format', 'tree'))
  assert.equal(r.code, 0)
  const b = nodeTree(r.stdout, 'node-b')
  assert.deepEqual(entryBranch(b, 'node→ClusterIP'), [
    '├─ ✓ node→ClusterIP 10.96.10.10:80 (http): reaches 3 endpoint(s): 10.244.1.10:8080, 10.244.2.10:8080, 10.244.2.11:8080',
    '│  ├─ ✓ nat/OUTPUT:47 → KUBE-SERVICES',
    '│  ├─ ✓ nat/KUBE-SERVICES:66 -d 10.96.10.10/32 -p tcp --dport 80 → KUBE-SVC-67NZLRHBNDSAWJRO',
    '│  ├─ ✓ nat/KUBE-SVC-67NZLRHBNDSAWJRO:70 ! -s 10.244.0.0/16 -d 10.96.10.10/32 -p tcp --dport 80 → KUBE-MARK-MASQ',
    '│  ├─ ✓ nat/KUBE-MARK-MASQ:51 → MARK --set-xmark 0x4000/0x4000',
    '│  ├─ split into 3 outcomes',
    '│  │  ├─ ✓ 33.3% ⇒ DNAT 10.244.1.10:8080 (masqueraded)',
    '│  │  │  ├─ ✓ nat/KUBE-SVC-67NZLRHBNDSAWJRO:71 → KUBE-SEP-FZQ6KZLGXRSKN2AD',
    '│  │  │  └─ ✓ nat/KUBE-SEP-FZQ6KZLGXRSKN2AD:63 → DNAT 10.244.1.10:8080',
    '│  │  ├─ ✓ 33.3% ⇒ DNAT 10.244.2.10:8080 (masqueraded)',
    '│  │  │  ├─ ✓ nat/KUBE-SVC-67NZLRHBNDSAWJRO:72 → KUBE-SEP-F45V6TZZSXLO3WFM',
    '│  │  │  └─ ✓ nat/KUBE-SEP-F45V6TZZSXLO3WFM:61 → DNAT 10.244.2.10:8080',
    '│  │  └─ ✓ 33.3% ⇒ DNAT 10.244.2.11:8080 (masqueraded)',
    '│  │     ├─ ✓ nat/KUBE-SVC-67NZLRHBNDSAWJRO:73 → KUBE-SEP-BTZNBNILETY57XCS',
    '│  │     └─ ✓ nat/KUBE-SEP-BTZNBNILETY57XCS:59 → DNAT 10.244.2.11:8080',
    '│  ├─ ✓ filter/OUTPUT:19 → KUBE-PROXY-FIREWALL',
    '│  ├─ ✓ filter/OUTPUT:20 → KUBE-SERVICES',
    '│  ├─ ✓ nat/POSTROUTING:48 → KUBE-POSTROUTING',
    '│  ├─ ✓ nat/KUBE-POSTROUTING:54 → MARK --set-xmark 0x4000/0x0',
    '│  ├─ ✓ nat/KUBE-POSTROUTING:55 → MASQUERADE --random-fully',
    '│  └─ ✓ 33.3% to 10.244.1.10:8080 (web-a1) on node-a',
  ])
  const walks = r.stdout.slice(r.stdout.indexOf('\nWalks'))
  assert.doesNotMatch(walks, /✗|reason:|fix/)
})

test('--explain alone (and --explain-format text, --explain=text) prints the flat walks as before; the tree (--explain=tree too) replaces only them', async () => {
  const text = await runCli(svc('broken-cluster'))
  const explicit = await runCli(svc('broken-cluster', '--explain-format', 'text'))
  const tree = await runCli(svc('broken-cluster', '--explain-format', 'tree'))
  assert.equal(explicit.stdout, text.stdout)
  assert.match(text.stdout, /^✗ 2c +33\.3% :73 → KUBE-SEP-DYSIX5QMVXZZP7LU:59 → DNAT 10\.244\.2\.7:8080 ✗/m)
  const before = (out: string) => out.slice(0, out.indexOf('\nWalks'))
  assert.equal(before(tree.stdout), before(text.stdout))
  assert.equal(tree.code, text.code)
  // The spelling users reach for: --explain=tree is --explain --explain-format tree.
  const snap = ['svc', 'web', '-n', 'shop', '--snapshot', 'examples/broken-cluster']
  const spelt = await runCli([...snap, '--explain=tree'])
  assert.equal(spelt.code, tree.code)
  assert.equal(spelt.stdout, tree.stdout)
  assert.equal((await runCli([...snap, '--explain=text'])).stdout, text.stdout)
  const bad = await runCli([...snap, '--explain=bush'])
  assert.equal(bad.code, 2)
  assert.equal(bad.stderr, 'kproxy-doctor: Expected --explain-format=bush to be one of: text, tree\n')
})

test('--explain-format without --explain, or with another format than the table: one line, exit 2', async () => {
  const snap = ['svc', 'web', '-n', 'shop', '--snapshot', 'examples/broken-cluster']
  const alone = await runCli([...snap, '--explain-format', 'tree'])
  assert.equal(alone.code, 2)
  assert.equal(alone.stderr, 'kproxy-doctor: --explain-format says how to show the --explain walks: add --explain\n')
  const json = await runCli([...snap, '--explain', '--explain-format', 'tree', '-o', 'json'])
  assert.equal(json.code, 2)
  assert.match(json.stderr, /^kproxy-doctor: --explain-format shapes the table's walks: -o json has its own form/)
  const bad = await runCli([...snap, '--explain', '--explain-format', 'bush'])
  assert.equal(bad.code, 2)
  assert.equal(bad.stderr, 'kproxy-doctor: Expected --explain-format=bush to be one of: text, tree\n')
})

test('--explain-format tree: IPVS, a break with no rule of its own (an endpoint missing) explained at its entry point', async () => {
  const r = await runCli(svc('ipvs-cluster', '--explain-format', 'tree'))
  assert.equal(r.code, 1)
  assert.deepEqual(entryBranch(nodeTree(r.stdout, 'node-b', 'ipvs'), 'pod→ClusterIP'), [
    '├─ ✗ pod→ClusterIP 10.96.10.10:80 (http): breaks at service',
    '│  │  reason: endpoint 10.244.2.11:8080 (web-b2) is never chosen: missing from VS TCP 10.96.10.10:80',
    '│  │  check: ssh -- node-b sudo ipvsadm -Ln | grep -A4 -- 10.96.10.10:80',
    '│  │  fix (changes the cluster): kubectl -n kube-system delete pod kube-proxy-bx7k2',
    '│  ├─ ✓ nat/PREROUTING:27 → KUBE-SERVICES',
    '│  ├─ ✓ nat/KUBE-SERVICES:37 --dst-type LOCAL → KUBE-NODE-PORT',
    '│  ├─ ✓ nat/KUBE-SERVICES:38 --match-set KUBE-CLUSTER-IP dst,dst → ACCEPT',
    '│  ├─ ✓ filter/INPUT:9 → KUBE-IPVS-FILTER',
    '│  ├─ ✓ filter/KUBE-IPVS-FILTER:14 --match-set KUBE-CLUSTER-IP dst,dst → RETURN',
    '│  ├─ ✓ filter/INPUT:10 → KUBE-NODE-PORT',
    '│  ├─ ✓ ipvs/VS TCP 10.96.10.10:80 line 4 TCP 10.96.10.10:80 rr',
    '│  ├─ split into 2 outcomes',
    '│  │  ├─ ✓ 50% ⇒ DNAT 10.244.1.10:8080',
    '│  │  │  └─ ✓ ipvs/RS 10.244.1.10:8080 line 5 -> 10.244.1.10:8080 Masq 1 0 0',
    '│  │  └─ ✓ 50% ⇒ DNAT 10.244.2.10:8080',
    '│  │     └─ ✓ ipvs/RS 10.244.2.10:8080 line 6 -> 10.244.2.10:8080 Masq 1 0 0',
    '│  └─ ✓ 50% to 10.244.1.10:8080 (web-a1) on node-a',
  ])
})
