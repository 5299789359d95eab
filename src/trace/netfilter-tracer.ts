import type {IptablesSave} from '../parse/iptables-save.js'
import type {NftRuleset} from '../parse/nft-ruleset.js'
import type {IpsetState} from '../parse/ipset-save.js'
import {IptablesTracer} from './iptables-tracer.js'
import {familiesOf, NftTracer, type NftTraceOptions} from './nft-tracer.js'
import type {Packet, TraceResult, Tracer} from './types.js'
import {isLocalAddress, traceHooks, type HookChain} from './walk.js'

/** The iptables tables beside a node's nftables ruleset, of one address family, by the backend that holds them. */
export interface IptablesOwners {
  /**
   * iptables-nft's tables, as iptables-nft-save prints them: in the ruleset they are nftables tables (`ip filter`)
   * whose rules nft shows as `xt` expressions; they are walked from this form, which the iptables engine reads whole.
   */
  nft?: IptablesSave
  /** iptables-legacy's tables: registered at the same hooks and priorities, outside nftables. */
  legacy?: IptablesSave
  ipsets?: IpsetState
}

/**
 * Every base chain on the node, of every owner, in the order the kernel runs them at each hook: kube-proxy's and the
 * other nftables tables (firewalld, a CNI's) from the ruleset, iptables-nft's and iptables-legacy's tables from their
 * saves, ordered by priority. Each chain is walked by the engine that reads its table, the packet's state carried
 * from one to the next: an accept ends only that base chain, a drop ends the packet.
 */
export class NetfilterTracer implements Tracer {
  private readonly nft: NftTracer
  private readonly iptables: Array<{tracer: IptablesTracer; family: 4 | 6 | undefined}>
  /** The ruleset's tables iptables-nft made: walked from its save instead. */
  private readonly iptablesNftTables: ReadonlySet<string>
  private readonly byHook = new Map<string, HookChain[]>()

  constructor(
    rs: NftRuleset,
    owners: IptablesOwners,
    family: 'ip' | 'ip6',
    private readonly opts: NftTraceOptions,
  ) {
    this.nft = new NftTracer(rs, opts)
    const iptablesOpts = {...opts, ipsets: owners.ipsets}
    this.iptables = [owners.nft, owners.legacy]
      .filter((d): d is IptablesSave => d !== undefined)
      .map((d) => ({tracer: new IptablesTracer(d, iptablesOpts), family: d.addressFamily()}))
    this.iptablesNftTables = new Set((owners.nft?.tableNames() ?? []).map((t) => `${family} ${t}`))
  }

  trace(packet: Packet): TraceResult {
    const local = new Set(this.opts.localAddresses)
    const isLocal = (ip: string) => isLocalAddress(local, ip)
    this.nft.prepare(packet)
    // A save of the other address family has no rule for this packet (iptables and ip6tables are separate tables).
    const ipFamily = packet.dst.includes(':') ? 6 : 4
    const iptables = this.iptables.filter((t) => t.family === undefined || t.family === ipFamily).map((t) => t.tracer)
    for (const t of iptables) t.prepare(packet)
    const families = familiesOf(packet)
    const chainsOf = (hook: string) => {
      const key = `${hook} ${families[0]}`
      let chains = this.byHook.get(key)
      if (!chains) {
        // A stable sort: at one priority, the ruleset's own tables, then iptables-nft's, then iptables-legacy's.
        chains = [
          ...this.nft.hookChains(hook, families, this.iptablesNftTables),
          ...iptables.flatMap((t) => t.hookChains(hook)),
        ].sort((a, b) => a.priority - b.priority)
        this.byHook.set(key, chains)
      }
      return chains
    }
    return traceHooks(packet, this.opts.locallyGenerated || isLocal(packet.src), isLocal, chainsOf, this.opts.route)
  }
}
