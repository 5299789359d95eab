import {resolveSshHost, SshConfigError, type SshConfigReader, type SshHostConfig} from './ssh-config.js'

/** One ProxyJump entry: `[user@]host[:port]` or `ssh://[user@]host[:port]` (an IPv6 host in brackets). */
interface JumpSpec {
  user?: string
  host: string
  port?: number
}

/** More hops than this is a loop or a mistake. */
const MAX_HOPS = 8

export function parseJump(spec: string): JumpSpec {
  const m = /^(?:ssh:\/\/)?(?:([^@/\s]+)@)?(\[[0-9A-Fa-f:.]+\]|[^:@/[\]\s]+)(?::(\d{1,5}))?\/?$/.exec(spec.trim())
  if (!m) throw new SshConfigError(`ProxyJump "${spec}" is not [user@]host[:port]`)
  const port = m[3] === undefined ? undefined : Number(m[3])
  if (port !== undefined && (port < 1 || port > 65535)) throw new SshConfigError(`ProxyJump "${spec}": bad port`)
  return {user: m[1], host: m[2].replace(/^\[(.*)\]$/, '$1'), port}
}

/**
 * The hosts to connect through to reach `alias`, first to last, `alias` last: each resolved with its own
 * configuration. As OpenSSH does for `ProxyJump h1,…,hn` (it runs `ssh -J h1,…,h(n-1) -W host:port hn`), the first
 * hop's own ProxyJump or ProxyCommand applies (the route goes on before it), the later hops' are overridden by the
 * list, and each hop's user and port from the entry win over its configuration. The first host keeps its
 * ProxyCommand, if any; the others are reached through the host before them.
 */
export async function resolveRoute(
  reader: SshConfigReader,
  alias: string,
  override: {user?: string; port?: number} = {},
  via: string[] = [],
): Promise<SshHostConfig[]> {
  if (via.includes(alias)) throw new SshConfigError(`ProxyJump loop: ${[...via, alias].join(' → ')}`)
  const host = await resolveSshHost(reader, alias, override)
  if (!host.proxyJump) return [host]
  const [firstHop, ...laterHops] = host.proxyJump.map(parseJump)
  const chain = await resolveRoute(reader, firstHop.host, firstHop, [...via, alias])
  for (const hop of laterHops) {
    const hopHost = await resolveSshHost(reader, hop.host, hop)
    chain.push({...hopHost, proxyJump: undefined, proxyCommand: undefined})
  }
  chain.push({...host, proxyJump: undefined, proxyCommand: undefined})
  if (chain.length > MAX_HOPS)
    throw new SshConfigError(`the route to ${alias} has ${chain.length - 1} jump hosts (at most ${MAX_HOPS - 1})`)
  return chain
}

/** `user@host:port`, as the chain of hops is shown. */
export function hostLabel(host: Pick<SshHostConfig, 'user' | 'hostName' | 'port'>): string {
  const name = host.hostName.includes(':') ? `[${host.hostName}]` : host.hostName
  return `${host.user}@${name}:${host.port}`
}
