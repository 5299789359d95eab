import {cidrContains, parseCidr, parseIp} from '../../net/address.js'
import {destinationPort, findOption, parseRule, type ParsedRule} from '../../parse/iptables-rule.js'
import {CHAIN_BY_CHAIN_HEADER} from '../../parse/iptables-save.js'
import type {NodeAccess, RunResult} from '../transport/node-access.js'
import {parseChainListing} from '../../parse/iptables-chains.js'
import {IPTABLES_TABLES, isChainName, MAX_CHAINS_PER_READ, type IptablesTable} from './command-arguments.js'
import {NODE_READS} from './node-reads.js'

/**
 * What one Service's packets can carry, for reading only the iptables chains they can reach. A jump is left unread
 * only when its rule names a single destination address, or destination port, that no such packet carries.
 */
export interface RulesScope {
  /** Every address a packet of the Service is sent to: its ClusterIPs, external IPs and load-balancer IPs. */
  addresses: string[]
  /** The Service's ports and node ports. */
  ports: number[]
  /** Chains read by name even where no rule read jumps to them (the model looks them up: KUBE-SERVICES, KUBE-SVC-…). */
  chains: Array<{table: IptablesTable; chain: string}>
  /**
   * Chains a rule read will likely jump to (the Service's KUBE-SEP chains, kube-proxy's filter chains): read in the
   * first round, to save the rounds the jumps would take; kept, with what they jump to, only where a rule read jumps to
   * them, so the read is the same as without them.
   */
  predicted?: Array<{table: IptablesTable; chain: string}>
}

/** kube-proxy's IPVS mode, by its glue in nat: the KUBE-NODE-PORT chain, or KUBE-SERVICES matching its ipsets. */
function isIpvsMode(reads: ChainRead[]): boolean {
  const nat = (chain: string) => reads.find((r) => r.table === 'nat' && r.chain === chain)
  return (
    nat('KUBE-NODE-PORT')?.policy !== undefined ||
    !!nat('KUBE-SERVICES')?.rules.some((l) => l.includes(' --match-set KUBE-'))
  )
}

/** The chains of a chain by chain read, as iptables-save would print them, or why the whole dump must be read instead. */
export type ScopedRead = {kind: 'read'; dump: Buffer} | {kind: 'whole'; why: string}

const BUILTIN_CHAINS: Record<IptablesTable, readonly string[]> = {
  raw: ['PREROUTING', 'OUTPUT'],
  mangle: ['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING'],
  nat: ['PREROUTING', 'INPUT', 'OUTPUT', 'POSTROUTING'],
  filter: ['INPUT', 'FORWARD', 'OUTPUT'],
}

/** Targets that are verdicts or extensions, not chains (reading one as a chain would only cost a "no such chain"). */
const NOT_CHAINS: ReadonlySet<string> = new Set(
  'ACCEPT DROP RETURN QUEUE NFQUEUE REJECT DNAT SNAT MASQUERADE REDIRECT NETMAP MARK CONNMARK LOG NFLOG TRACE AUDIT CT NOTRACK CHECKSUM TCPMSS TPROXY CLASSIFY DSCP TOS TTL HL SET SECMARK CONNSECMARK IDLETIMER LED RATEEST SYNPROXY TEE HMARK TCPOPTSTRIP'.split(
    ' ',
  ),
)

/** kube-proxy's per-Service chains (iptables mode): one Service port's, named by a hash of it. */
const PER_SERVICE_CHAIN = /^KUBE-(SVC|SVL|EXT|FW|SEP)-[A-Z0-9]{16}$/

/** Rounds of reads (each follows the jumps of the last) and chains in all, past which the whole dump is read. */
const MAX_ROUNDS = 16
const MAX_CHAINS = 4096

interface ChainRead {
  table: IptablesTable
  chain: string
  builtin: boolean
  /**
   * Read because a rule jumps to it (or built in): iptables lets no rule jump to a chain that is not there, so a read
   * that fails is a failure (a lock, kube-proxy rewriting the rules between rounds), never "not there".
   */
  mustExist: boolean
  /** "ACCEPT"/"DROP" for a built-in chain, "-" for a user chain; undefined: the chain is not there. */
  policy?: string
  rules: string[]
  /** Built in, named by the scope or jumped to by a rule read: false only for a predicted chain nothing reached yet. */
  reached: boolean
  /** The chains its rules send packets to that are worth reading, once read (followed when it is reached). */
  jumps?: string[]
}

/** Whether a packet of the scope can take the rule's jump: false only when one -d host or one --dport rules it out. */
function mayCarryScope(rule: ParsedRule, addresses: ReadonlySet<string>, ports: ReadonlySet<number>): boolean {
  const d = findOption(rule, '', 'd', '--destination')
  const host = d && !d.negated && d.values.length === 1 ? parseCidr(d.values[0]) : undefined
  if (host && host.bits === (host.family === 4 ? 32 : 128) && ![...addresses].some((a) => cidrContains(host, a)))
    return false
  const port = destinationPort(rule)
  return !(port !== undefined && /^\d{1,5}$/.test(port) && !ports.has(Number(port)))
}

/** The chains a rule read sends packets to that are worth reading next (undefined: a target no chain read can show). */
function nextChain(
  rule: ParsedRule,
  from: ChainRead,
  addresses: ReadonlySet<string>,
  ports: ReadonlySet<number>,
  named: ReadonlySet<string>,
): string | null | undefined {
  const target = rule.target
  if (target === undefined || NOT_CHAINS.has(target)) return null
  if (!isChainName(target)) return undefined
  // Inside one of the Service's own chains every jump is the Service's; elsewhere a jump to another Service's chain
  // is skipped when the rule's destination says it is for another Service.
  if (!PER_SERVICE_CHAIN.test(target) || PER_SERVICE_CHAIN.test(from.chain) || named.has(`${from.table} ${target}`))
    return target
  return mayCarryScope(rule, addresses, ports) ? target : null
}

/** The first line of stderr that says something (iptables-nft's warning about legacy tables says nothing of the read). */
function firstError(stderr: string): string {
  return (
    stderr
      .split('\n')
      .find((l) => l.trim() !== '' && !l.startsWith('# Warning:'))
      ?.trim() ?? 'no message'
  )
}

/**
 * Why this iptables cannot be read chain by chain, or undefined when it can: iptables-nft 1.8.7 and later. Before
 * 1.8.7, iptables-nft's -S made a missing table with its built-in chains; iptables-legacy's makes the kernel create a
 * table not there yet, copies the whole table for every chain and takes the xtables lock, where iptables-legacy-save
 * reads only the tables there are, in one pass.
 */
function notChainByChain(version: ReturnType<typeof NODE_READS.iptablesVersion.parse>): string | undefined {
  if (!version.nfTables || !version.release) return `${version.line || 'iptables -V said nothing'}: not iptables-nft`
  const [major, minor, patch] = version.release
  const atLeast187 = major > 1 || (major === 1 && (minor > 8 || (minor === 8 && patch >= 7)))
  return atLeast187 ? undefined : `${version.line}: iptables-nft before 1.8.7 makes the tables it lists`
}

/** The chains read, in iptables-save's format (tables in its order, built-in chains first), under a header naming the read. */
function asSaveDump(reads: ChainRead[], version: string): Buffer {
  const there = reads.filter((r) => r.policy !== undefined)
  const out = [
    `${CHAIN_BY_CHAIN_HEADER}${version} -S, chain by chain: ${there.length} chains, the ones the Service's packets can reach`,
  ]
  for (const table of IPTABLES_TABLES) {
    const chains = there.filter((r) => r.table === table)
    // A table of empty accepting built-in chains is what a table not there is (iptables-nft makes tables on use).
    if (chains.every((c) => c.builtin && c.policy === 'ACCEPT' && c.rules.length === 0)) continue
    out.push(
      `*${table}`,
      ...chains.map((c) => `:${c.chain} ${c.policy} [0:0]`),
      ...chains.flatMap((c) => c.rules),
      'COMMIT',
    )
  }
  return Buffer.from(out.join('\n') + '\n', 'latin1')
}

/**
 * Reads, chain by chain, only the iptables chains a packet of the scope can reach: the built-in chains of every table,
 * the chains named in the scope, then round by round whatever their rules jump to, except another Service's own chains
 * behind a rule for another destination. On a node with 10,000 Services this reads a few dozen chains in well under a
 * second where iptables-save takes seconds. Only with iptables-nft 1.8.7 or later (notChainByChain), and not in IPVS
 * mode (its rules are few, and its leftover check looks for every KUBE-SVC chain). Anything unexpected (a chain name it
 * will not pass on, an answer it cannot split, a chain jumped to that does not answer, too many chains) says the whole
 * dump must be read instead.
 */
export async function readScopedRules(
  access: NodeAccess,
  family: 4 | 6,
  scope: RulesScope,
  /** `iptables -V` (`ip6tables -V`) already asked by the caller; else asked here. */
  version?: Promise<RunResult>,
): Promise<ScopedRead> {
  const addresses = new Set(scope.addresses.map((a) => parseIp(a)?.text).filter((a): a is string => a !== undefined))
  const ports = new Set(scope.ports)
  const named = new Set(scope.chains.map((c) => `${c.table} ${c.chain}`))
  const reads = new Map<string, ChainRead>()
  const queue: ChainRead[] = []
  const want = (table: IptablesTable, chain: string, mustExist: boolean, reached = true) => {
    const key = `${table} ${chain}`
    const known = reads.get(key)
    if (known) {
      known.mustExist ||= mustExist
      if (reached && !known.reached) {
        known.reached = true
        for (const next of known.jumps ?? []) want(table, next, true)
      }
      return
    }
    const builtin = BUILTIN_CHAINS[table].includes(chain)
    const read: ChainRead = {table, chain, builtin, mustExist, rules: [], reached}
    reads.set(key, read)
    queue.push(read)
  }
  const versionRead = family === 6 ? 'ip6tablesVersion' : 'iptablesVersion'
  const asked = await (version ?? access.run(versionRead))
  const parsed = NODE_READS[versionRead].parse(
    asked.kind === 'ran' && asked.code === 0 ? asked.stdout.toString('utf8') : '',
  )
  const unfit = asked.kind === 'ran' ? notChainByChain(parsed) : asked.what
  if (unfit) return {kind: 'whole', why: unfit}
  for (const table of IPTABLES_TABLES) for (const chain of BUILTIN_CHAINS[table]) want(table, chain, true)
  for (const {table, chain} of scope.chains) {
    if (!isChainName(chain))
      return {kind: 'whole', why: `${JSON.stringify(chain)} is not a chain name the doctor passes on`}
    want(table, chain, BUILTIN_CHAINS[table].includes(chain))
  }
  for (const {table, chain} of scope.predicted ?? []) if (isChainName(chain)) want(table, chain, false, false)
  for (let round = 0; queue.length > 0; round++) {
    if (round >= MAX_ROUNDS) return {kind: 'whole', why: `the jumps go more than ${MAX_ROUNDS} chains deep`}
    if (reads.size > MAX_CHAINS) return {kind: 'whole', why: `more than ${MAX_CHAINS} chains can be reached`}
    const batches: ChainRead[][] = []
    for (let i = 0; i < queue.length; i += MAX_CHAINS_PER_READ) batches.push(queue.slice(i, i + MAX_CHAINS_PER_READ))
    queue.length = 0
    const answers = await Promise.all(
      batches.map((batch) =>
        access.run('iptablesChains', {family, reads: batch.map(({table, chain}) => ({table, chain}))}),
      ),
    )
    for (const [i, r] of answers.entries()) {
      if (r.kind !== 'ran') return {kind: 'whole', why: r.what}
      if (r.code !== 0) return {kind: 'whole', why: `the chain by chain read exited ${r.code}: ${firstError(r.stderr)}`}
      const split = NODE_READS.iptablesChains.parse(r.stdout.toString('latin1'), batches[i].length)
      if (!split) return {kind: 'whole', why: 'the chain by chain read answered in a form the doctor does not know'}
      for (const [k, {code, lines}] of split.entries()) {
        const read = batches[i][k]
        if (code !== 0) {
          // Only a chain looked up by name may be missing, and only as iptables says it is (exit 1).
          if (read.mustExist || code !== 1)
            return {
              kind: 'whole',
              why: `iptables -t ${read.table} -S ${read.chain} exited ${code}: ${firstError(r.stderr)}`,
            }
          continue
        }
        const listing = parseChainListing(lines, read)
        if ('wrong' in listing) return {kind: 'whole', why: listing.wrong}
        read.policy = listing.policy
        read.rules.push(...listing.rules)
        const jumps: string[] = []
        for (const [n, text] of read.rules.entries()) {
          let rule: ParsedRule
          try {
            rule = parseRule(read.table, n, text)
          } catch (e) {
            return {kind: 'whole', why: `a rule of ${read.chain} does not parse (${(e as Error).message})`}
          }
          const next = nextChain(rule, read, addresses, ports, named)
          if (next === undefined)
            return {kind: 'whole', why: `${JSON.stringify(rule.target)} is not a chain name the doctor passes on`}
          if (next !== null) jumps.push(next)
        }
        read.jumps = jumps
        if (read.reached) for (const next of jumps) want(read.table, next, true)
      }
    }
  }
  // A predicted chain no rule read jumps to is not part of the read (as if never asked for).
  const all = [...reads.values()].filter((r) => r.reached)
  // A chain first read by name and found missing, that a rule read later jumps to: the rules changed between rounds.
  const vanished = all.find((r) => r.mustExist && r.policy === undefined)
  if (vanished)
    return {kind: 'whole', why: `${vanished.table} ${vanished.chain} is jumped to but was not there when read`}
  if (isIpvsMode(all))
    return {
      kind: 'whole',
      why: 'IPVS mode: its iptables rules are few, and its leftover check looks for every KUBE-SVC chain',
    }
  return {kind: 'read', dump: asSaveDump(all, parsed.line)}
}
