import type {Prng} from './seeded.js'

/**
 * Random rule graphs for the fuzz test, of three kinds:
 * - diamonds: jumps and gotos go only to later chains, often two paths to one chain, with probabilistic splits;
 * - loops: any rule may jump or go to any chain (itself included), behind random splits or not, so the walk runs into
 *   cycles of every shape (the tracer ends each as a loop when it meets the same packet in the same chain again);
 * - deep: a line of 65 to 150 chains each jumping or going to the next, deeper than the tracer follows jumps.
 */
interface GraphShape {
  kind: 'diamond' | 'loop' | 'deep'
  chains: string[]
}

function shape(r: Prng, prefix: string): GraphShape {
  const kind = r.pick(['diamond', 'loop', 'loop', 'deep'] as const)
  const count = kind === 'deep' ? 65 + r.int(86) : 2 + r.int(7)
  return {kind, chains: Array.from({length: count}, (_, i) => `${prefix}${i}`)}
}

/** The chain rule `k` of chain `i` jumps to, or undefined when that rule does not jump. */
function jumpTarget(r: Prng, g: GraphShape, i: number, k: number): string | undefined {
  if (g.kind === 'loop') return r.chance(0.6) ? r.pick(g.chains) : undefined
  if (g.kind === 'deep') return k === 0 && i < g.chains.length - 1 ? g.chains[i + 1] : undefined
  if (i === g.chains.length - 1 || r.chance(0.4)) return undefined
  return g.chains[Math.min(g.chains.length - 1, i + 1 + r.int(3))]
}

export function randomIptablesGraph(r: Prng): string {
  const g = shape(r, 'KUBE-G')
  const lines = [
    '*nat',
    ':PREROUTING ACCEPT [0:0]',
    ':INPUT ACCEPT [0:0]',
    ':OUTPUT ACCEPT [0:0]',
    ':POSTROUTING ACCEPT [0:0]',
    ...g.chains.map((c) => `:${c} - [0:0]`),
  ]
  lines.push(
    '-A PREROUTING -j KUBE-G0',
    '-A OUTPUT -j KUBE-G0',
    '-A POSTROUTING -m mark --mark 0x4000/0x4000 -j MASQUERADE',
  )
  for (const [i, chain] of g.chains.entries()) {
    const rules: string[] = []
    for (let k = 0, n = 1 + r.int(3); k < n; k++) {
      const match = r.pick([
        '',
        '-d 10.96.10.10/32 ',
        '-p tcp -m tcp --dport 80 ',
        '-m statistic --mode random --probability 0.50000000000 ',
        '! -s 10.244.0.0/16 ',
        '-m mark --mark 0x4000/0x4000 ',
      ])
      const to = jumpTarget(r, g, i, k)
      const target = to
        ? `-${r.pick(['j', 'g'])} ${to}`
        : r.pick([
            '-j RETURN',
            '-j MARK --set-xmark 0x4000/0x4000',
            `-j DNAT --to-destination 10.244.${r.int(3)}.${r.int(255)}:8080`,
            '-j DROP',
            '-j ACCEPT',
          ])
      rules.push(`-A ${chain} ${match}${target}`)
    }
    lines.push(...(r.chance(0.5) ? rules.reverse() : rules))
  }
  lines.push('COMMIT', '')
  return lines.join('\n')
}

export function randomNftGraph(r: Prng): string {
  const g = shape(r, 'g')
  const lines = [
    'table ip kube-proxy {',
    '\tchain nat-prerouting {',
    '\t\ttype nat hook prerouting priority dstnat; policy accept;',
    '\t\tjump g0',
    '\t}',
  ]
  lines.push('\tchain nat-output {', '\t\ttype nat hook output priority -100; policy accept;', '\t\tjump g0', '\t}')
  for (const [i, chain] of g.chains.entries()) {
    lines.push(`\tchain ${chain} {`)
    const rules: string[] = []
    for (let k = 0, n = 1 + r.int(3); k < n; k++) {
      const match = r.pick([
        '',
        'ip daddr 10.96.10.10 ',
        'meta l4proto tcp tcp dport 80 ',
        'ip saddr != 10.244.0.0/16 ',
        'meta mark & 0x00004000 == 0x00004000 ',
      ])
      const to = jumpTarget(r, g, i, k)
      const other = g.kind === 'deep' ? to : r.pick(g.chains)
      const action = to
        ? r.pick([`jump ${to}`, `goto ${to}`, `numgen random mod 2 vmap { 0 : goto ${to}, 1 : jump ${other} }`])
        : r.pick([
            'return',
            'meta mark set meta mark | 0x00004000',
            `meta l4proto tcp dnat to 10.244.${r.int(3)}.${r.int(255)}:8080`,
            'drop',
            'counter packets 0 bytes 0',
          ])
      rules.push(`\t\t${match}${action}`)
    }
    lines.push(...(r.chance(0.5) ? rules.reverse() : rules), '\t}')
  }
  lines.push('}', '')
  return lines.join('\n')
}

/** How a jump-loop dump is built: its chains, the random rules in each, and whether they goto as well as jump. */
export interface JumpLoopShape {
  chains: number
  rulesPerChain: number
  gotos: boolean
}

/**
 * A dump of jump loops behind random branches: each chain holds `rulesPerChain` rules that, with probability 1/2, jump
 * (or goto) to a random chain, earlier ones and itself included, so every lap of a loop forks the walk again; the
 * last rule of some chains DNATs. About 6 KB with the default shape. The kernel refuses such rules (a loop), so they
 * reach the tool only as a paste, a hostile node or a corrupt dump: the walk must end soon, keep little, and say
 * "loop".
 */
export function jumpLoopIptables(r: Prng, shape: JumpLoopShape = {chains: 12, rulesPerChain: 4, gotos: false}): string {
  const chain = (i: number) => `KUBE-LOOP-${i}`
  const lines = [
    '*nat',
    ':PREROUTING ACCEPT [0:0]',
    ':INPUT ACCEPT [0:0]',
    ':OUTPUT ACCEPT [0:0]',
    ':POSTROUTING ACCEPT [0:0]',
    ':KUBE-SERVICES - [0:0]',
    ...Array.from({length: shape.chains}, (_, i) => `:${chain(i)} - [0:0]`),
    '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    `-A KUBE-SERVICES -d 10.96.10.10/32 -p tcp -m comment --comment "shop/web:http cluster IP" -m tcp --dport 80 -j ${chain(0)}`,
  ]
  for (let i = 0; i < shape.chains; i++) {
    for (let k = 0; k < shape.rulesPerChain; k++) {
      const verb = shape.gotos && r.chance(0.5) ? 'g' : 'j'
      lines.push(
        `-A ${chain(i)} -m comment --comment "shop/web:http" -m statistic --mode random --probability 0.50000000000 -${verb} ${chain(r.int(shape.chains))}`,
      )
    }
    if (r.chance(0.5))
      lines.push(
        `-A ${chain(i)} -p tcp -m comment --comment "shop/web:http" -m tcp -j DNAT --to-destination 10.244.${r.int(4)}.${1 + r.int(250)}:8080`,
      )
  }
  lines.push('COMMIT', '')
  return lines.join('\n')
}

/** The same in nftables: each random rule is a numgen vmap that jumps (or goes) to a random chain or on. */
export function jumpLoopNft(r: Prng, shape: JumpLoopShape = {chains: 12, rulesPerChain: 4, gotos: false}): string {
  const chain = (i: number) => `loop-${i}`
  const lines = [
    'table ip kube-proxy {',
    '\tchain nat-prerouting {',
    '\t\ttype nat hook prerouting priority dstnat; policy accept;',
    '\t\tjump services',
    '\t}',
    '\tchain nat-output {',
    '\t\ttype nat hook output priority -100; policy accept;',
    '\t\tjump services',
    '\t}',
    '\tchain services {',
    `\t\tip daddr 10.96.10.10 tcp dport 80 jump ${chain(0)}`,
    '\t}',
  ]
  for (let i = 0; i < shape.chains; i++) {
    lines.push(`\tchain ${chain(i)} {`)
    for (let k = 0; k < shape.rulesPerChain; k++) {
      const verb = shape.gotos && r.chance(0.5) ? 'goto' : 'jump'
      lines.push(`\t\tnumgen random mod 2 vmap { 0 : ${verb} ${chain(r.int(shape.chains))}, 1 : continue }`)
    }
    if (r.chance(0.5)) lines.push(`\t\tmeta l4proto tcp dnat to 10.244.${r.int(4)}.${1 + r.int(250)}:8080`)
    lines.push('\t}')
  }
  lines.push('}', '')
  return lines.join('\n')
}
