import assert from 'node:assert/strict'
import type {NodeObservation} from '../../src/node/observation.js'
import {parseNftDump} from '../../src/parse/nft-dump.js'
import {BufferSource} from '../../src/parse/dump-source.js'
import {IptablesSave} from '../../src/parse/iptables-save.js'
import {kubeProxyNftRules} from '../fixtures/kube-proxy-nft.js'
import type {OfflineOptions} from '../helpers/offline-cluster.js'
import {checkFamily, checkTester} from '../helpers/check-tester.js'
import {DNS, NODES, WEB, labPods} from '../fixtures/lab-cluster.js'

const insertBefore = (anchor: string, line: string) => (text: string) => {
  assert.ok(text.includes(anchor), `the dump has ${anchor}`)
  return text.replace(anchor, `${line}\n${anchor}`)
}
/** Adds filter chains and rules to a dump: declarations after the built-in chains, FORWARD rules ahead of kube-proxy's. */
const withFilter =
  (opts: {forwardPolicy?: 'DROP'; chains?: string[]; forward?: string[]; rules?: string[]}) =>
  (text: string): string => {
    let out = text
    if (opts.forwardPolicy) out = out.replace(':FORWARD ACCEPT [0:0]', `:FORWARD ${opts.forwardPolicy} [0:0]`)
    out = out.replace(
      ':OUTPUT ACCEPT [0:0]\n',
      `:OUTPUT ACCEPT [0:0]\n${(opts.chains ?? []).map((c) => `:${c} - [0:0]\n`).join('')}`,
    )
    if (opts.forward?.length) out = insertBefore(FIRST_FORWARD_RULE, opts.forward.join('\n'))(out)
    if (opts.rules?.length) out = out.replace('\nCOMMIT\n*nat', `\n${opts.rules.join('\n')}\nCOMMIT\n*nat`)
    return out
  }
/** Docker's daemon on a node: FORWARD policy DROP, its chains, accepts for its own docker0 only (as in test/fixtures/foreign-rules.ts). */
const DOCKER = {
  forwardPolicy: 'DROP' as const,
  chains: ['DOCKER', 'DOCKER-USER'],
  forward: [
    '-A FORWARD -j DOCKER-USER',
    '-A FORWARD -o docker0 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
    '-A FORWARD -o docker0 -j DOCKER',
    '-A FORWARD -i docker0 ! -o docker0 -j ACCEPT',
    '-A FORWARD -i docker0 -o docker0 -j ACCEPT',
  ],
}
const DOCKER_USER_RETURN = '-A DOCKER-USER -j RETURN'
const calicoDrop = (ip: string) => ({
  chains: ['cali-FORWARD'],
  forward: ['-A FORWARD -m comment --comment "policy engine: forward hook" -j cali-FORWARD'],
  rules: [
    `-A cali-FORWARD -d ${ip}/32 -m comment --comment "policy engine: default deny ingress" -m conntrack --ctstate NEW -j DROP`,
  ],
})
/** Both nodes in kube-proxy's nftables mode (as configured), node-b's ruleset with `extraOnB` appended. */
const nftablesLab = (extraOnB = ''): OfflineOptions => {
  const nftNode = (index: number, extra: string) => (obs: NodeObservation) => ({
    ...obs,
    iptables: IptablesSave.parse(new BufferSource(Buffer.from(''))),
    nft: parseNftDump(kubeProxyNftRules(NODES[index], [WEB, DNS], labPods()) + extra),
  })
  return {
    editCluster: (c) => void (c.proxyConfig.mode = 'nftables'),
    editObservation: {'node-a': nftNode(0, ''), 'node-b': nftNode(1, extraOnB)},
  }
}
const nftForwardChain = (table: string, policy: 'accept' | 'drop', rules: string[] = []) =>
  `\ntable ${table} {\n  chain forward {\n    type filter hook forward priority filter; policy ${policy};\n${rules.map((r) => `    ${r}\n`).join('')}  }\n}\n`
const FIRST_FORWARD_RULE =
  '-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall"'

checkFamily('filter', () => {
  checkTester('the whole path (path-verdicts.ts)', [
    {
      name: 'a DROP added directly to filter FORWARD: a specific finding, not the generic path-broken one',
      state: {editDump: {'node-a': insertBefore(FIRST_FORWARD_RULE, '-A FORWARD -d 10.244.2.10/32 -j DROP')}},
      findings: [['KPD-FILTER-DROP', 'node-a', 'error']],
    },
    {
      name: "a DROP hand-added to kube-proxy's own KUBE-FORWARD: no specific code explains it, the generic one does",
      state: {
        editDump: {
          'node-a': insertBefore(
            '-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP',
            '-A KUBE-FORWARD -d 10.244.2.10/32 -j DROP',
          ),
        },
      },
      findings: [['KPD-PATH-BROKEN', 'node-a', 'error']],
    },
    {
      name: 'a match the tracer cannot evaluate on the path',
      state: {
        editDump: {
          'node-a': insertBefore(
            '-A KUBE-SERVICES -d 10.96.10.10/32',
            '-A KUBE-SERVICES -m cgroup --path /kubepods -j RETURN',
          ),
        },
      },
      findings: [
        ['KPD-PATH-UNDECIDED', 'node-a', 'warning'],
        ['KPD-PATH-UNDECIDED', 'node-a', 'warning'],
        ['KPD-PATH-UNDECIDED', 'node-a', 'warning'],
        ['KPD-PATH-UNDECIDED', 'node-a', 'warning'],
        // node-b's paths to web-a1 cross node-a's nat PREROUTING too: one warning for all their second halves.
        ['KPD-PATH-UNDECIDED', 'node-a', 'warning'],
      ],
    },
  ])

  checkTester('the filter path and chains kube-proxy does not own (filter-drop.ts)', [
    {
      name: "Docker's chains with FORWARD policy ACCEPT",
      state: {editDump: {'node-a': withFilter({...DOCKER, forwardPolicy: undefined, rules: [DOCKER_USER_RETURN]})}},
      findings: [],
    },
    {
      name: "Docker's FORWARD policy DROP with the pod CIDR accepted in DOCKER-USER (both directions)",
      state: {
        editDump: {
          'node-a': withFilter({
            ...DOCKER,
            rules: [
              '-A DOCKER-USER -s 10.244.0.0/16 -j ACCEPT',
              '-A DOCKER-USER -d 10.244.0.0/16 -j ACCEPT',
              DOCKER_USER_RETURN,
            ],
          }),
        },
      },
      findings: [],
    },
    {
      name: "a policy engine's chain dropping an address that is no endpoint",
      state: {editDump: {'node-b': withFilter(calicoDrop('10.244.2.99'))}},
      findings: [],
    },
    {
      name: "Docker's FORWARD policy DROP on node-a, nothing accepting pod traffic: node-a's own paths and the halves arriving from node-b",
      state: {editDump: {'node-a': withFilter({...DOCKER, rules: [DOCKER_USER_RETURN]})}},
      findings: [['KPD-FILTER-DROP', 'node-a', 'error']],
    },
    {
      name: "Docker's FORWARD policy DROP on node-a, and node-b's DNS question to CoreDNS there unanswered: one finding, on node-a (the question is its evidence)",
      state: {
        editDump: {'node-a': withFilter({...DOCKER, rules: [DOCKER_USER_RETURN]})},
        dns: {'node-b': {addresses: [], error: 'no DNS answer within 3s'}},
      },
      findings: [['KPD-FILTER-DROP', 'node-a', 'error']],
    },
    {
      name: "a policy chain on node-a drops CoreDNS (no endpoint of shop/web), node-b's DNS question unanswered: the question's walk breaks on node-a, the finding is there",
      state: {
        editDump: {'node-a': withFilter(calicoDrop('10.244.1.53'))},
        dns: {'node-b': {addresses: [], error: 'no DNS answer within 3s'}},
      },
      findings: [['KPD-DNS-NO-ANSWER', 'node-a', 'error']],
    },
    {
      name: "a Calico rule on node-b dropping only node-a's pods: seen only in the second half of node-a's paths, reported on node-b",
      state: {
        editDump: {
          'node-b': withFilter({
            chains: ['cali-FORWARD'],
            forward: ['-A FORWARD -j cali-FORWARD'],
            rules: ['-A cali-FORWARD -s 10.244.1.0/24 -d 10.244.2.11/32 -m conntrack --ctstate NEW -j DROP'],
          }),
        },
      },
      findings: [['KPD-FILTER-DROP', 'node-b', 'error']],
    },
    {
      name: 'FORWARD policy DROP with no Docker chain',
      state: {editDump: {'node-b': withFilter({forwardPolicy: 'DROP'})}},
      findings: [['KPD-FILTER-DROP', 'node-b', 'error']],
    },
    {
      name: "a Calico chain in node-b's FORWARD drops web-b2",
      state: {editDump: {'node-b': withFilter(calicoDrop('10.244.2.11'))}},
      findings: [['KPD-FILTER-DROP', 'node-b', 'error']],
    },
    {
      name: 'nftables mode on both nodes, a pod-CIDR accept in another table',
      state: nftablesLab(
        nftForwardChain('inet filter', 'drop', ['ip saddr 10.244.0.0/16 accept', 'ip daddr 10.244.0.0/16 accept']),
      ),
      findings: [],
    },
    {
      name: "nftables mode: a Calico table's forward chain drops web-b2 on node-b",
      state: nftablesLab(nftForwardChain('inet calico', 'accept', ['ip daddr 10.244.2.11 ct state new drop'])),
      findings: [['KPD-FILTER-DROP', 'node-b', 'error']],
    },
    {
      name: "nftables mode: another table's forward chain with policy drop on node-b",
      state: nftablesLab(nftForwardChain('inet filter', 'drop')),
      findings: [['KPD-FILTER-DROP', 'node-b', 'error']],
    },
    {
      name: 'a hand-written chain in OUTPUT rejects node traffic to the pod network',
      state: {
        editDump: {
          'node-a': withFilter({
            chains: ['SITE-EGRESS'],
            rules: [
              '-A OUTPUT -j SITE-EGRESS',
              '-A SITE-EGRESS -d 10.244.0.0/16 -p tcp -j REJECT --reject-with icmp-port-unreachable',
            ],
          }),
        },
      },
      findings: [['KPD-FILTER-DROP', 'node-a', 'error']],
    },
  ])
})
