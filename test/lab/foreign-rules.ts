/**
 * filter-table rules that other owners than kube-proxy put on a node: Docker's FORWARD policy and chains, a
 * network-policy engine's chain. Loaded with `iptables-restore --noflush` after kube-proxy's rules, so they sit
 * next to them as they do on a real node.
 */
export interface ForeignFilterRules {
  /** Docker's daemon: FORWARD policy DROP, its DOCKER-USER/DOCKER chains, accepts only for its own docker0 bridge. */
  docker?: boolean
  /** A policy engine's chain, jumped to first from FORWARD, dropping new traffic to these addresses. */
  policyChain?: {name: string; dropTo: string[]}
}

const q = (s: string) => `"${s}"`

export function foreignFilterRules(rules: ForeignFilterRules): string {
  const lines = ['*filter']
  if (rules.docker) {
    lines.push(
      ':FORWARD DROP [0:0]',
      ':DOCKER - [0:0]',
      ':DOCKER-USER - [0:0]',
      '-I FORWARD 1 -j DOCKER-USER',
      '-I FORWARD 2 -o docker0 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
      '-I FORWARD 3 -o docker0 -j DOCKER',
      '-I FORWARD 4 -i docker0 ! -o docker0 -j ACCEPT',
      '-I FORWARD 5 -i docker0 -o docker0 -j ACCEPT',
      '-A DOCKER-USER -j RETURN',
    )
  }
  if (rules.policyChain) {
    const {name, dropTo} = rules.policyChain
    lines.push(`:${name} - [0:0]`, `-I FORWARD 1 -m comment --comment ${q('policy engine: forward hook')} -j ${name}`)
    for (const ip of dropTo)
      lines.push(
        `-A ${name} -d ${ip}/32 -m comment --comment ${q('policy engine: default deny ingress')} -m conntrack --ctstate NEW -j DROP`,
      )
  }
  lines.push('COMMIT', '')
  return lines.join('\n')
}
