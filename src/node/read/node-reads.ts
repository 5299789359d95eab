import {parseBridgeState} from '../../parse/bridge-state.js'
import {parseCiliumServices} from '../../parse/cilium-services.js'
import {parseCniResults} from '../../parse/cni-results.js'
import {parseConntrackList} from '../../parse/conntrack.js'
import {parseLookupOutput, type DnsRecordType} from '../../parse/dns-lookup.js'
import type {DumpSource} from '../../parse/dump-source.js'
import {parseRouteGet, parseRouteTable} from '../../parse/ip-route.js'
import {IpsetState} from '../../parse/ipset-save.js'
import {splitChainAnswers} from '../../parse/iptables-chains.js'
import {IptablesSave} from '../../parse/iptables-save.js'
import {parseIptablesVersion} from '../../parse/iptables-version.js'
import {parseDeviceAddresses, parseIpvsadm, parseSysctl as parseIpvsSysctls} from '../../parse/ipvsadm.js'
import {parseNftDump} from '../../parse/nft-dump.js'
import {tablesListed} from '../../parse/nft-sets.js'
import {parseSysctl} from '../../parse/sysctl.js'
import {parseCountedChain, parseCountedTable} from '../../parse/rule-counters.js'
import {TRANSPORT_NAMES, type TransportName} from '../transport/transport-names.js'
import {
  conntrackProtocol,
  dnsLookupCommand,
  iptablesChainsCommand,
  ipArgument,
  nftFamily,
  pathSysctlNames,
  portArgument,
  quote,
  ruleCountersArgv,
  tableCountersArgv,
  type ConntrackProtocol,
  type IptablesTable,
  type NftKubeProxyFamily,
} from './command-arguments.js'
import {NODE_FILES, type NodeFile} from './node-files.js'

/** Where a read's output is kept in a node's recording (its folder of a bundle). */
type Recorded =
  /**
   * The output itself, byte for byte: a snapshot answers the read with it. `notReadIn`: where a read that could not run
   * is recorded instead, as its #kpd-not-read line (a file of its own: an older build would read the output's file as
   * an empty dump); a snapshot answers the read with that failure again.
   */
  | {file: NodeFile; notReadIn?: NodeFile}
  /** One entry of a file that gathers several reads with their exit codes and stderr (path-reads.json, dns.json). */
  | {entryOf: NodeFile}
  /** Not kept, and why: it decides how the other reads are made. */
  | {notRecorded: string}

/**
 * One node read: everything the transports, the recording, the sudoers file and the report need to know of it. The
 * registry below is the allow-list: nothing else runs on a node (node-commands.ts builds the command lines from it).
 */
export interface NodeRead {
  /**
   * The one program it runs and its arguments, as words: what a transport without a shell runs (a Pod on the node). A
   * function where the read takes arguments, each validated there (command-arguments.ts).
   */
  argv?: readonly string[] | ((args: never) => readonly string[])
  /** Its shell form, over SSH, where that is not argv's words joined by spaces (arguments quoted, several programs). */
  line?: string | ((args: never) => string)
  /**
   * `sudo`: run as `sudo -n …` where the SSH login is not root (deploy/sudoers/kproxy-doctor allows exactly these);
   * `only`: refused unless the login is root; `no`: needs no privilege.
   */
  root: 'no' | 'sudo' | 'only'
  /** A large text dump: compressed on the wire where the node has gzip, and given DUMP_STEPS steps to finish. */
  compressible: boolean
  recorded: Recorded
  /** What turns its output into what the diagnosis reads: a parser of src/parse (pure, unit-tested, ParseError). */
  parse: (...input: never) => unknown
  /**
   * Program → what a transport that lacks it loses beyond this read, or does instead (the report's "not read" lines:
   * "sysctl not in the kube-proxy image: sysctls read from /proc/sys instead"; diagnosis/coverage.ts files them).
   * A program left out costs only this read.
   */
  whenMissing?: Readonly<Record<string, string>>
  /** The transports that can make it (see transport/transports.ts); the others answer "not recorded". */
  transports: readonly TransportName[]
  /** What is given up where a transport has no shell to make it (the Pod transports). */
  withoutShell?: string
  /** One of a family's two iptables backends' own save: read where the node has both (leftovers hide in the unused one). */
  backend?: {family: 4 | 6; backend: 'legacy' | 'nft'}
  /**
   * Reads that would wait for each other on the node: in one SSH batch, where the reads run side by side, the reads of a
   * lane run one after another (iptables-legacy takes the xtables lock for `-S` and `-w` polls it once a second).
   */
  lane?: 'xtables-lock'
  /**
   * Asked over SSH in a connection's first exec, beside `id -u` (the read takes no sudo and no arguments): reads that
   * the reads after them wait for, so that those can join the first round.
   */
  askedFirst?: true
}

const EVERY_TRANSPORT = TRANSPORT_NAMES
/** Every transport that runs commands: a snapshot answers only with what it recorded. */
const RUNNING_TRANSPORTS: readonly TransportName[] = ['ssh', 'kube-proxy', 'debug-pod']
/** The reads that need a shell (several commands in one, or a question only chain by chain reads ask). */
const SHELL_ONLY: readonly TransportName[] = ['ssh']

const IP_MISSING =
  "kube-ipvs0 addresses, links, neighbours and routes not read (the hairpin check's pod-to-bridge-port mapping, the route checks)"
const SYSCTL_MISSING = 'sysctls read from /proc/sys instead'
const BRIDGE_MISSING = 'the bridge FDB not read (the pod-to-bridge-port mapping of the hairpin check)'

const iptablesDump = (source: DumpSource) => IptablesSave.parse(source, {nodeRead: true})

/** A packet-path read (sysctls, routes, conntrack): live only, recorded as an entry of path-reads.json with its exit code. */
const PATH_READ = {
  root: 'no',
  compressible: false,
  recorded: {entryOf: NODE_FILES.pathReads},
  transports: RUNNING_TRANSPORTS,
} as const

/** A whole dump of the node's rules or state: as root, compressed on the wire, recorded byte for byte, any transport. */
function wholeDump<F extends NodeFile, P extends (...input: never) => unknown>(
  argv: readonly string[],
  file: F,
  parse: P,
  notReadIn?: NodeFile,
) {
  const recorded = notReadIn ? {file, notReadIn} : {file}
  return {argv, root: 'sudo', compressible: true, recorded, parse, transports: EVERY_TRANSPORT} as const
}

/** Every read the doctor makes on a node, by key: the only commands that run there. All are read-only. */
export const NODE_READS = {
  uid: {
    argv: ['id', '-u'],
    root: 'no',
    compressible: false,
    recorded: {notRecorded: 'whether the login is root: decides `sudo -n`'},
    parse: (out: string) => out.trim() === '0',
    transports: RUNNING_TRANSPORTS,
  },
  /** Whether the dumps can come back compressed (the SSH transport asks once per node). */
  hasGzip: {
    line: 'command -v gzip',
    root: 'no',
    compressible: false,
    recorded: {notRecorded: 'whether the dumps can come compressed'},
    parse: (out: string) => out.trim() !== '',
    transports: SHELL_ONLY,
    withoutShell: 'dumps compressed on the wire',
  },
  iptablesSave: wholeDump(['iptables-save'], NODE_FILES.iptablesSave, iptablesDump),
  /** Which iptables and backend answer `iptables` (`ip6tables`): whether the rules can be read chain by chain. */
  iptablesVersion: {
    argv: ['iptables', '-V'],
    root: 'no',
    compressible: false,
    recorded: {notRecorded: 'which iptables answers: decides whether the rules are read chain by chain'},
    parse: parseIptablesVersion,
    transports: SHELL_ONLY,
    withoutShell: 'iptables chains one by one',
    askedFirst: true,
  },
  ip6tablesVersion: {
    argv: ['ip6tables', '-V'],
    root: 'no',
    compressible: false,
    recorded: {notRecorded: 'which ip6tables answers: decides whether the rules are read chain by chain'},
    parse: parseIptablesVersion,
    transports: SHELL_ONLY,
    withoutShell: 'iptables chains one by one',
    askedFirst: true,
  },
  /** IPv6 rules (dual-stack and IPv6 Services): the same backend as iptables-save. */
  ip6tablesSave: wholeDump(['ip6tables-save'], NODE_FILES.ip6tablesSave, iptablesDump),
  nftRulesetJson: wholeDump(
    ['nft', '-j', 'list', 'ruleset'],
    NODE_FILES.nftRuleset,
    parseNftDump,
    NODE_FILES.nftNotRead,
  ),
  nftRuleset: wholeDump(['nft', 'list', 'ruleset'], NODE_FILES.nftRuleset, parseNftDump, NODE_FILES.nftNotRead),
  /**
   * Which nft tables there are, at once: every table's header and its sets, no chains or rules (on a large
   * iptables-nft node listing one absent table takes over a second: nft fetches every chain first). kube-proxy's
   * nftables table always holds sets and maps, so it shows here even where a table without sets would not.
   */
  nftSets: {
    argv: ['nft', 'list', 'sets'],
    root: 'sudo',
    compressible: false,
    recorded: {notRecorded: "which tables there are: decides which of kube-proxy's tables are listed"},
    parse: tablesListed,
    transports: RUNNING_TRANSPORTS,
  },
  iptablesLegacySave: {
    ...wholeDump(['iptables-legacy-save'], NODE_FILES.iptablesLegacySave, iptablesDump, NODE_FILES.backendsNotRead),
    backend: {family: 4, backend: 'legacy'},
  },
  iptablesNftSave: {
    ...wholeDump(['iptables-nft-save'], NODE_FILES.iptablesNftSave, iptablesDump, NODE_FILES.backendsNotRead),
    backend: {family: 4, backend: 'nft'},
  },
  ip6tablesLegacySave: {
    ...wholeDump(['ip6tables-legacy-save'], NODE_FILES.ip6tablesLegacySave, iptablesDump, NODE_FILES.backendsNotRead),
    backend: {family: 6, backend: 'legacy'},
  },
  ip6tablesNftSave: {
    ...wholeDump(['ip6tables-nft-save'], NODE_FILES.ip6tablesNftSave, iptablesDump, NODE_FILES.backendsNotRead),
    backend: {family: 6, backend: 'nft'},
  },
  ipvsadm: {
    ...wholeDump(['ipvsadm', '-Sn'], NODE_FILES.ipvsadm, parseIpvsadm),
    whenMissing: {ipvsadm: 'IPVS state read from /proc/net/ip_vs instead'},
  },
  /**
   * Cilium's load-balancing state, where Cilium implements Services: run in Cilium's agent container on the node
   * (node/transport/pod/agent-reads.ts execs it there, whatever way the node itself is read).
   */
  ciliumServiceList: {
    argv: ['cilium-dbg', 'service', 'list', '-o', 'json'],
    root: 'no',
    compressible: false,
    recorded: {file: NODE_FILES.ciliumServices},
    parse: parseCiliumServices,
    whenMissing: {'cilium-dbg': "Cilium's Service list not read: its state is not judged"},
    transports: ['ssh', 'snapshot'],
    withoutShell: "Cilium's Service list: it runs in Cilium's agent container, not kube-proxy's or the debug Pod's",
  },
  /** The same list from agents before 1.15, whose CLI is `cilium`: asked where the agent has no cilium-dbg. */
  ciliumServiceListOld: {
    argv: ['cilium', 'service', 'list', '-o', 'json'],
    root: 'no',
    compressible: false,
    recorded: {file: NODE_FILES.ciliumServices},
    parse: parseCiliumServices,
    whenMissing: {cilium: "Cilium's Service list not read: its state is not judged"},
    transports: ['ssh', 'snapshot'],
    withoutShell: "Cilium's Service list: it runs in Cilium's agent container, not kube-proxy's or the debug Pod's",
  },
  ipsetSave: wholeDump(['ipset', 'save'], NODE_FILES.ipset, (text: string) => IpsetState.parse(text)),
  kubeIpvs0: {
    argv: ['ip', '-o', 'addr', 'show', 'dev', 'kube-ipvs0'],
    root: 'no',
    compressible: false,
    recorded: {file: NODE_FILES.kubeIpvs0},
    parse: (text: string) => parseDeviceAddresses(text),
    whenMissing: {ip: IP_MISSING},
    transports: EVERY_TRANSPORT,
  },
  /** The sysctls IPVS mode needs. */
  sysctls: {
    argv: [
      'sysctl',
      'net.ipv4.ip_forward',
      'net.ipv4.vs.conntrack',
      'net.ipv4.vs.conn_reuse_mode',
      'net.ipv4.vs.expire_nodest_conn',
      'net.ipv4.conf.all.arp_ignore',
      'net.ipv4.conf.all.arp_announce',
    ],
    root: 'no',
    compressible: false,
    recorded: {file: NODE_FILES.sysctl},
    parse: parseIpvsSysctls,
    whenMissing: {sysctl: SYSCTL_MISSING},
    transports: EVERY_TRANSPORT,
  },
  /**
   * Bridge ports' hairpin flags, links, neighbours and the bridge FDB, in sections. A section whose command fails (not
   * on the node: exit 127) says so in its place, `#kpd-not-read` with the exit status, the command's words and its
   * stderr (parse/bridge-state.ts), so that an FDB not read is never taken for an empty one.
   */
  network: {
    line: [
      "echo '## hairpin'",
      'for f in /sys/class/net/*/brif/*/hairpin_mode; do [ -e "$f" ] && echo "$f $(cat "$f")"; done',
      `kpd_section() { echo "## $1"; shift; { kpd_e=$("$@" 2>&1 1>&3 3>&-); } 3>&1; kpd_c=$?; [ "$kpd_c" = 0 ] || printf '#kpd-not-read %s\\t%s\\t%s\\n' "$kpd_c" "$*" "$(printf '%s' "$kpd_e" | tr '\\n' ' ')"; }`,
      'kpd_section links ip -o link show',
      'kpd_section neigh ip neigh show',
      'kpd_section fdb bridge fdb show',
      'true',
    ].join('; '),
    root: 'no',
    compressible: false,
    recorded: {file: NODE_FILES.network},
    parse: parseBridgeState,
    whenMissing: {ip: IP_MISSING, bridge: BRIDGE_MISSING},
    transports: EVERY_TRANSPORT,
  },
  routeTable: {
    argv: ['ip', 'route', 'show'],
    ...PATH_READ,
    parse: parseRouteTable,
    whenMissing: {ip: IP_MISSING},
  },
  /** The IPv6 main table: read where the Service has IPv6 endpoints or an IPv6 ClusterIP. */
  routeTable6: {
    argv: ['ip', '-6', 'route', 'show'],
    ...PATH_READ,
    parse: parseRouteTable,
    whenMissing: {ip: IP_MISSING},
  },
  /**
   * libcni's result cache (root-only: 0700/0600), every file as `PATH:LINE` lines: pod IP → host veth for the hairpin
   * check, there for idle Pods too. One program, fixed arguments; -r follows no symlink inside; -s: no folder, no output.
   */
  cniResults: {
    argv: ['grep', '-r', '-H', '-s', '.', '/var/lib/cni/results'],
    root: 'sudo',
    compressible: false,
    recorded: {file: NODE_FILES.cniResults},
    parse: parseCniResults,
    transports: EVERY_TRANSPORT,
  },
  /** The by-hand DNS lookup of one record type, where the transport cannot open TCP from the node. */
  dnsLookup: {
    line: (a: {name: string; server: string; type: DnsRecordType}) => dnsLookupCommand(a.name, a.server, a.type),
    root: 'no',
    compressible: false,
    recorded: {entryOf: NODE_FILES.dns},
    parse: parseLookupOutput,
    whenMissing: {nslookup: 'DNS from the node not asked'},
    transports: RUNNING_TRANSPORTS,
  },
  /**
   * The path sysctls, plus rp_filter and route_localnet of these interfaces. Without -e on purpose: a missing key
   * (br_netfilter not loaded) is said on stderr and the other keys still print.
   */
  pathSysctls: {
    argv: (a: {interfaces: string[]; ipv6?: boolean}) => ['sysctl', ...pathSysctlNames(a.interfaces, a.ipv6)],
    line: (a: {interfaces: string[]; ipv6?: boolean}) =>
      ['sysctl', ...pathSysctlNames(a.interfaces, a.ipv6).map(quote)].join(' '),
    ...PATH_READ,
    parse: parseSysctl,
    whenMissing: {sysctl: SYSCTL_MISSING},
  },
  /** `ip -o route get ADDRESS`: the route the kernel picks for an endpoint. */
  routeGet: {
    argv: (a: {address: string}) => ['ip', '-o', 'route', 'get', ipArgument(a.address)],
    line: (a: {address: string}) => `ip -o route get ${quote(ipArgument(a.address))}`,
    ...PATH_READ,
    parse: parseRouteGet,
    whenMissing: {ip: IP_MISSING},
  },
  /** `conntrack -L -p PROTOCOL -d ADDRESS`: the entries whose original destination is a Service address. */
  conntrackList: {
    argv: (a: {protocol: ConntrackProtocol; address: string}) => [
      'conntrack',
      '-L',
      '-p',
      conntrackProtocol(a.protocol),
      '-d',
      ipArgument(a.address),
    ],
    line: (a: {protocol: ConntrackProtocol; address: string}) =>
      `conntrack -L -p ${quote(conntrackProtocol(a.protocol))} -d ${quote(ipArgument(a.address))}`,
    ...PATH_READ,
    root: 'sudo',
    parse: parseConntrackList,
  },
  /**
   * `conntrack -L -p tcp --orig-dst ADDRESS --orig-port-dst PORT`: the entries the live probes of one Service address
   * left, read right after the node's probes (node/probe/kernel-evidence.ts): the endpoint the kernel's DNAT chose
   * (the reply tuple's source) and whether a reply came back. Probes are matched to entries on the doctor's side.
   */
  conntrackProbe: {
    argv: (a: {address: string; port: number}) => [
      'conntrack',
      '-L',
      '-p',
      'tcp',
      '--orig-dst',
      ipArgument(a.address),
      '--orig-port-dst',
      portArgument(a.port),
    ],
    line: (a: {address: string; port: number}) =>
      `conntrack -L -p tcp --orig-dst ${quote(ipArgument(a.address))} --orig-port-dst ${quote(portArgument(a.port))}`,
    root: 'sudo',
    compressible: false,
    recorded: {notRecorded: 'read right after the live probes, which a snapshot does not make'},
    parse: parseConntrackList,
    transports: RUNNING_TRANSPORTS,
  },
  /**
   * `iptables --modprobe=/bin/false -w 5 -t TABLE -v -S CHAIN` (ip6tables for family 6): one chain of the Service's
   * path with the kernel's per-rule counters, read right before and right after the node's live probes
   * (node/probe/rule-counters-read.ts): which rules the probes' packets moved. Read-only (no -Z).
   */
  ruleCounters: {
    argv: (a: {family: 4 | 6; table: IptablesTable; chain: string}) => ruleCountersArgv(a),
    line: (a: {family: 4 | 6; table: IptablesTable; chain: string}) =>
      ruleCountersArgv(a)
        .map((w, i) => (i === 8 ? quote(w) : w))
        .join(' '),
    root: 'sudo',
    compressible: false,
    lane: 'xtables-lock',
    recorded: {notRecorded: 'read before and after the live probes, which a snapshot does not make'},
    parse: (out: string) => parseCountedChain(out.split('\n')),
    transports: RUNNING_TRANSPORTS,
  },
  /**
   * `iptables-save --modprobe=/bin/false -c -t TABLE` (ip6tables-save for family 6): the counters of the Service's
   * chains where `iptables` is not iptables-nft (iptables-legacy), read right before and right after the live probes
   * as ruleCounters is: there every `iptables -v -S CHAIN` copies and parses the whole table, one table read instead of
   * one per chain (node/probe/rule-counters-read.ts). A large table: compressed on the wire, a dump's time to finish.
   */
  tableCounters: {
    argv: (a: {family: 4 | 6; table: IptablesTable}) => tableCountersArgv(a),
    root: 'sudo',
    compressible: true,
    recorded: {notRecorded: 'read before and after the live probes, which a snapshot does not make'},
    parse: (out: string, chains: ReadonlySet<string>) => parseCountedTable(out, chains),
    transports: RUNNING_TRANSPORTS,
  },
  /**
   * `nft [-j] list table FAMILY kube-proxy`: kube-proxy's own table only. On a large iptables-nft node listing the whole
   * ruleset takes minutes (every xtables rule is translated), and even an absent table takes a second (nft fetches
   * every chain first): `nftSets` says first which tables there are. Both families are recorded as one file.
   */
  nftKubeProxyTable: {
    argv: (a: {family: NftKubeProxyFamily; json: boolean}) => [
      'nft',
      ...(a.json === true ? ['-j'] : []),
      'list',
      'table',
      nftFamily(a.family),
      'kube-proxy',
    ],
    root: 'sudo',
    compressible: true,
    recorded: {file: NODE_FILES.nftKubeProxyTables},
    parse: parseNftDump,
    transports: EVERY_TRANSPORT,
  },
  /**
   * `iptables --modprobe=/bin/false -w 5 -t TABLE -S CHAIN` (ip6tables for family 6) for each chain, each answer
   * followed by "#kpd-chain EXIT". As root only (the sudoers file allows whole dumps only).
   */
  iptablesChains: {
    line: (a: {family: 4 | 6; reads: Array<{table: IptablesTable; chain: string}>}) => iptablesChainsCommand(a),
    root: 'only',
    compressible: false,
    recorded: {
      notRecorded:
        "the chains read are recorded as the family's dump (iptables-save.txt, ip6tables-save.txt), in its form",
    },
    parse: splitChainAnswers,
    transports: SHELL_ONLY,
    withoutShell: 'iptables chains one by one',
  },
} satisfies Record<string, NodeRead>

type Reads = typeof NODE_READS

/** Every key a transport's `run` accepts. */
export type NodeCommandKey = keyof Reads

/** What a read's builder takes: nothing for a fixed command, one validated argument object for the others. */
type BuilderArgs<R> = R extends {line: (args: infer A) => string}
  ? [args: A]
  : R extends {argv: (args: infer A) => readonly string[]}
    ? [args: A]
    : []

export type ArgsOf<K extends NodeCommandKey> = BuilderArgs<Reads[K]>

/** The reads that take no arguments: fixed command lines. */
export type NodeCommand = {[K in NodeCommandKey]: ArgsOf<K> extends [] ? K : never}[NodeCommandKey]

/** A read's row in the one shape every row has, for code that handles any read. */
export function readOf(key: NodeCommandKey): NodeRead {
  return NODE_READS[key]
}

export function isNodeCommandKey(key: unknown): key is NodeCommandKey {
  return typeof key === 'string' && Object.hasOwn(NODE_READS, key)
}

/** Whether the read takes arguments (its argv or line is built from them). */
export function takesArguments(read: NodeRead): boolean {
  return typeof read.line === 'function' || typeof read.argv === 'function'
}

/** The file a read's output is recorded as, byte for byte (undefined: kept as an entry of another file, or not kept). */
export function recordedFile(key: NodeCommandKey): NodeFile | undefined {
  const recorded = readOf(key).recorded
  return 'file' in recorded ? recorded.file : undefined
}

/**
 * A read's command in words (its argv joined by spaces; undefined where argv is built from arguments): how its
 * #kpd-not-read line names it, written by the node read and matched by what reads a recording back.
 */
export function commandWords(key: NodeCommandKey): string | undefined {
  const argv = readOf(key).argv
  return typeof argv === 'object' ? argv.join(' ') : undefined
}

/** Where a read that could not run is recorded as its #kpd-not-read line (undefined: nowhere apart from its output). */
export function notReadFile(key: NodeCommandKey): NodeFile | undefined {
  const recorded = readOf(key).recorded
  return 'notReadIn' in recorded ? recorded.notReadIn : undefined
}

/** The reads whose output is recorded as a file of its own. */
export type RecordedKey = {
  [K in NodeCommandKey]: Reads[K]['recorded'] extends {file: NodeFile} ? K : never
}[NodeCommandKey]

type BackendKey = {[K in NodeCommandKey]: Reads[K] extends {backend: object} ? K : never}[NodeCommandKey]

/**
 * Each iptables backend's own save command, per family: where a node has both backends, kube-proxy rules left in the
 * one that iptables-save (ip6tables-save) does not show still rewrite packets.
 */
export const BACKEND_SAVES = (Object.keys(NODE_READS) as NodeCommandKey[]).flatMap((command) => {
  const backend = readOf(command).backend
  return backend ? [{...backend, command: command as BackendKey}] : []
})
