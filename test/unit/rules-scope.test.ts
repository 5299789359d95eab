import assert from 'node:assert/strict'
import {readdirSync, readFileSync} from 'node:fs'
import {join} from 'node:path'
import {test} from 'node:test'
import {serviceChainNames, USERSPACE_MODE_CHAINS} from '../../src/model/chain-names.js'
import {CHAINS_LOOKED_UP, rulesScopeOf} from '../../src/model/rules-scope.js'

/** Every `rules('TABLE', 'CHAIN')` and `hasChain('TABLE', 'CHAIN')` of the model and the checks, as "table chain". */
function lookupsInCode(): Set<string> {
  const found = new Set<string>()
  const walk = (dir: string): string[] =>
    readdirSync(dir, {withFileTypes: true}).flatMap((e) =>
      e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
    )
  for (const file of [...walk('src/model'), ...walk('src/checks')])
    for (const m of readFileSync(file, 'utf8').matchAll(/\.(?:rules|hasChain)\('(\w+)', '([A-Z][A-Z0-9-]+)'\)/g))
      found.add(`${m[1]} ${m[2]}`)
  return found
}

test('a chain by chain read takes in every chain the model and the checks look up by name, and no other', () => {
  const listed = new Set(CHAINS_LOOKED_UP.map((c) => `${c.table} ${c.chain}`))
  const inCode = lookupsInCode()
  // Looked up through a list rather than a literal (checks/rules/proxy-mode.ts).
  for (const chain of USERSPACE_MODE_CHAINS) inCode.add(`nat ${chain}`)
  assert.ok(inCode.size >= 6, `the lookups are found: ${[...inCode].join(', ')}`)
  assert.deepEqual(
    [...inCode].filter((k) => !listed.has(k)),
    [],
    'looked up but not read by name',
  )
  assert.deepEqual(
    [...listed].filter((k) => !inCode.has(k)),
    [],
    'read by name but looked up nowhere',
  )
})

/** Where the model and the checks list a table's chains: each needs chains no rule of the Service's path jumps to. */
const WHOLE_TABLE_LISTINGS: Record<string, string> = {
  // KUBE-SVC chains left from iptables mode on an IPVS node: an IPVS node's rules are always read whole.
  'src/model/modes/iptables.ts': 'chainNames',
  // Docker's chains: FORWARD jumps to them, and every chain of another owner is read.
  'src/checks/rules/filter-drop.ts': 'tableChains',
  // The Service implementers' own chains (CILIUM_, cali-, KUBE-ROUTER-, ANTREA-, OVN-KUBE-): their feeder rules in the
  // built-in chains jump to them, and a chain by chain read follows every jump of the built-in chains.
  'src/model/implementers/implementer.ts': 'chainNamesStartingWith',
}

test("every place that lists all of a table's chains is one a chain by chain read was checked against", () => {
  const walk = (dir: string): string[] =>
    readdirSync(dir, {withFileTypes: true}).flatMap((e) =>
      e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
    )
  const found: Record<string, string> = {}
  for (const file of [...walk('src/model'), ...walk('src/checks')])
    for (const m of readFileSync(file, 'utf8').matchAll(/\b(chainNames(?:StartingWith)?|tableChains|chainOrder)\(/g))
      if (!/^\s*(export )?function/.test(m.input.slice(m.input.lastIndexOf('\n', m.index) + 1, m.index)))
        found[file] = m[1]
  assert.deepEqual(found, WHOLE_TABLE_LISTINGS)
})

test("a Service's scope: every address it is sent to, its ports and node ports, its own chains by name", () => {
  const scope = rulesScopeOf({
    metadata: {namespace: 'shop', name: 'web'},
    spec: {
      type: 'LoadBalancer',
      clusterIP: '10.96.0.5',
      clusterIPs: ['10.96.0.5', 'fd00::5'],
      externalIPs: ['192.0.2.7'],
      ports: [
        {name: 'http', port: 80, nodePort: 30080, protocol: 'TCP'},
        {name: 'dns', port: 53, protocol: 'UDP'},
      ],
    },
    status: {loadBalancer: {ingress: [{ip: '198.51.100.9'}, {hostname: 'lb.example'}]}},
  })
  assert.deepEqual(scope.addresses, ['10.96.0.5', 'fd00::5', '192.0.2.7', '198.51.100.9'])
  assert.deepEqual(scope.ports, [80, 30080, 53])
  const own = [serviceChainNames('shop/web:http', 'tcp'), serviceChainNames('shop/web:dns', 'udp')].flatMap((n) => [
    n.svc,
    n.svl,
    n.ext,
    n.fw,
  ])
  assert.deepEqual(scope.chains, [...CHAINS_LOOKED_UP, ...own.map((chain) => ({table: 'nat', chain}))])
})

test('a headless Service has no address in its scope', () => {
  const scope = rulesScopeOf({
    metadata: {namespace: 'shop', name: 'db'},
    spec: {clusterIP: 'None', clusterIPs: ['None'], ports: [{port: 5432}]},
  })
  assert.deepEqual(scope.addresses, [])
  assert.deepEqual(scope.ports, [5432])
})
