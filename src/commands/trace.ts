import {Flags} from '@oclif/core'
import {DoctorCommand} from '../cli/base-command.js'
import {NODE_READ_ONLY_FLAGS, nodeReadFlags} from '../cli/flags.js'
import {DiagnosisError} from '../errors.js'
import {
  BufferSource,
  FileSource,
  MAX_STREAMED_DUMP_BYTES,
  readDumpBytes,
  type DumpSource,
} from '../parse/dump-source.js'
import {DumpParseError, IptablesSave} from '../parse/iptables-save.js'
import {normaliseIptablesPaste, normaliseNftPaste, type NormalisedPaste} from '../parse/paste-normalise.js'
import {IpsetState} from '../parse/ipset-save.js'
import {makeChalk} from '../report/human.js'
import {writeTrace} from '../report/output.js'
import {outputWidth} from '../report/width.js'
import {familyOf, parseIp} from '../net/address.js'
import {parseIpvsadm} from '../parse/ipvsadm.js'
import {IptablesTracer} from '../trace/iptables-tracer.js'
import type {Protocol, TraceResult, Tracer} from '../trace/types.js'
import type {NftRuleset} from '../parse/nft-ruleset.js'
import {parseNftDump} from '../parse/nft-dump.js'
import {NftTracer} from '../trace/nft-tracer.js'
import type {NodeObservation} from '../node/bundle.js'
import {chooseMode} from '../model/modes/index.js'
import {IpvsTracer} from '../trace/ipvs-tracer.js'

export default class Trace extends DoctorCommand {
  static override summary = "Walk one new connection through a node's rules, rule by rule, as netfilter would"
  static override usage = [
    'trace --iptables-save FILE|- --src IP --dst IP --dport PORT [--ipset-save FILE] [--node-ip IP]... [--proto tcp|udp|sctp] [--sport PORT] [--in-iface IF] [--out-iface IF] [-o table|json]',
    'trace --nft FILE|- --src IP --dst IP --dport PORT [--node-ip IP]... [-o table|json]',
    'trace --node NAME --src IP --dst IP --dport PORT [--context CTX] [--kubeconfig FILE] [--ssh-config FILE] [--timeout SECONDS] [-o table|json]',
  ]
  static override examples = [
    '<%= config.bin %> trace --iptables-save node-b.txt --src 10.0.3.7 --dst 10.200.0.12 --dport 30080 --node-ip 10.200.0.12',
    'ssh node-b sudo iptables-save | <%= config.bin %> trace --iptables-save - --src 10.244.1.5 --dst 10.96.10.10 --dport 80 -o json',
    '<%= config.bin %> trace --node node-b --src 10.244.1.5 --dst 10.96.10.10 --dport 80',
    'ssh node-c sudo nft list ruleset | <%= config.bin %> trace --nft - --src 10.244.1.5 --dst 10.96.10.10 --dport 80',
  ]
  static override flags = {
    'iptables-save': Flags.string({
      description: 'iptables-save dump to walk ("-" reads stdin)',
      exclusive: [...NODE_READ_ONLY_FLAGS, 'nft'],
    }),
    nft: Flags.string({
      description: '`nft list ruleset` text or `nft -j list ruleset` JSON to walk ("-" reads stdin)',
      exclusive: NODE_READ_ONLY_FLAGS,
    }),
    'ipset-save': Flags.string({description: '`ipset save` output, for -m set matches', exclusive: ['node']}),
    ipvsadm: Flags.string({
      description:
        '`ipvsadm -Sn` or `ipvsadm -Ln` output: trace an IPVS node (with --iptables-save for its iptables glue)',
      exclusive: [...NODE_READ_ONLY_FLAGS, 'nft'],
    }),
    node: Flags.string({description: 'read the dump live from this node over SSH (addresses from the cluster)'}),
    src: Flags.string({required: true, description: 'source address of the packet'}),
    dst: Flags.string({required: true, description: 'destination address'}),
    dport: Flags.integer({required: true, min: 1, max: 65535, description: 'destination port'}),
    sport: Flags.integer({default: 40000, min: 1, max: 65535, description: 'source port'}),
    proto: Flags.string({default: 'tcp', options: ['tcp', 'udp', 'sctp']}),
    'node-ip': Flags.string({
      multiple: true,
      description: "the node's own addresses (repeatable): decide addrtype LOCAL and the OUTPUT path",
    }),
    'in-iface': Flags.string({description: 'interface the packet arrives on, for -i matches'}),
    'out-iface': Flags.string({description: 'interface it leaves by, for -o matches'}),
    output: Flags.string({char: 'o', options: ['table', 'json'], default: 'table'}),
    ...nodeReadFlags,
  }

  async run(): Promise<void> {
    const {flags} = await this.parse(Trace)
    let dump: IptablesSave | undefined
    let nftRules: NftRuleset | undefined
    let tracer: Tracer | undefined
    let paste: NormalisedPaste | undefined
    try {
      for (const [name, ip] of [
        ['--src', flags.src],
        ['--dst', flags.dst],
        ...(flags['node-ip'] ?? []).map((x) => ['--node-ip', x]),
      ]) {
        if (!parseIp(ip)) throw new DiagnosisError(`${name} ${ip} is not an IP address`)
      }
      if (familyOf(flags.src) !== familyOf(flags.dst))
        throw new DiagnosisError(`--src ${flags.src} and --dst ${flags.dst} are of different address families`)
      if (flags.ipvsadm && !flags['iptables-save'])
        throw new DiagnosisError('--ipvsadm needs --iptables-save too: IPVS nodes still run the iptables glue first')
      let localAddresses = flags['node-ip'] ?? []
      if (flags.node) {
        // Loaded only here: reading a node live pulls in the cluster and node access a file trace never uses.
        const {readNodeLive} = await import('../diagnosis/gather.js')
        const live = await readNodeLive(flags.node, {
          kubeconfig: flags.kubeconfig,
          context: flags.context,
          sshConfig: flags['ssh-config'],
          insecureIgnoreHostKey: flags['insecure-ignore-host-key'],
          timeoutMs: flags.timeout * 1000,
        })
        localAddresses = [...localAddresses, ...live.addresses]
        tracer = nodeTracer(live.obs, localAddresses, flags.dst.includes(':') ? 'ip6' : 'ip')
      } else if (flags.nft) {
        const file = flags.nft
        let rs: NftRuleset
        try {
          paste = normaliseNftPaste(readDumpBytes(file).toString('utf8'))
          rs = parseNftDump(paste.text)
        } catch (e) {
          throw new DiagnosisError(`${file === '-' ? 'stdin' : file}: ${(e as Error).message}`)
        }
        nftRules = rs
      } else {
        const file = flags['iptables-save']
        if (!file) throw new DiagnosisError('give --iptables-save FILE, --nft FILE (or - for stdin) or --node NAME')
        let source: DumpSource
        try {
          source = file === '-' ? new BufferSource(readDumpBytes('-', MAX_STREAMED_DUMP_BYTES)) : new FileSource(file)
        } catch (e) {
          throw new DiagnosisError(`cannot read ${file}: ${(e as Error).message}`)
        }
        if (source.size > MAX_STREAMED_DUMP_BYTES)
          throw new DiagnosisError(
            `${file} is larger than ${MAX_STREAMED_DUMP_BYTES / 2 ** 30} GiB: not a dump this tool reads`,
          )
        // Pastes are small; a dump too large to be one is streamed as iptables-save, as the node printed it.
        if (source.size <= MAX_PASTE_BYTES) {
          const text = source.read(0, source.size).toString('latin1')
          source.close()
          try {
            paste = normaliseIptablesPaste(text, familyOf(flags.dst))
          } catch (e) {
            throw new DiagnosisError(`${file === '-' ? 'stdin' : file}: ${(e as Error).message}`)
          }
          source = new BufferSource(Buffer.from(paste.text, 'latin1'))
        }
        dump = parseDump(source, file, paste)
      }
      let ipsets: IpsetState | undefined
      if (flags['ipset-save']) {
        try {
          ipsets = IpsetState.parse(readDumpBytes(flags['ipset-save']).toString('utf8'))
        } catch (e) {
          throw new DiagnosisError(`${flags['ipset-save']}: ${(e as Error).message}`)
        }
      }
      if (flags.ipvsadm && dump) {
        let servers
        try {
          servers = parseIpvsadm(readDumpBytes(flags.ipvsadm).toString('utf8'))
        } catch (e) {
          throw new DiagnosisError(`${flags.ipvsadm === '-' ? 'stdin' : flags.ipvsadm}: ${(e as Error).message}`)
        }
        if (servers.length === 0) throw new DiagnosisError(`${flags.ipvsadm}: no virtual server in the ipvsadm output`)
        // kube-proxy binds every virtual server address except the node's own (NodePorts) to kube-ipvs0.
        const vips = [
          ...new Set(servers.map((v) => v.address).filter((a) => parseIp(a) && !localAddresses.includes(a))),
        ]
        tracer = new IpvsTracer(dump, servers, {localAddresses, vips, ipsets: ipsets ?? IpsetState.parse('')})
      }
      tracer ??= nftRules
        ? new NftTracer(nftRules, {localAddresses})
        : new IptablesTracer(dump!, {localAddresses, ipsets})
      const packet = {
        src: flags.src,
        dst: flags.dst,
        dport: flags.dport,
        sport: flags.sport,
        proto: flags.proto as Protocol,
        inIface: flags['in-iface'],
        outIface: flags['out-iface'],
      }
      let result: TraceResult
      try {
        result = tracer.trace(packet)
      } catch (e) {
        // Rules are parsed when the walk reaches them: a broken one surfaces here.
        if (e instanceof DumpParseError)
          throw new DiagnosisError(
            `${flags['iptables-save'] === '-' ? 'stdin' : flags['iptables-save']}: ${inputLineError(e, paste).message}`,
          )
        throw e
      }
      if (paste && dump) result = withInputLines(result, paste, new Set(dump.tableNames()))
      writeTrace(
        {...result, notes: paste?.notes ?? []},
        flags.output as 'table' | 'json',
        {chalk: makeChalk(process.stdout), width: outputWidth(process.stdout)},
        (chunk) => process.stdout.write(chunk),
      )
      process.exitCode = 0
    } finally {
      dump?.close()
    }
  }
}

/** Inputs up to this size are read whole and normalised as pastes; larger ones are streamed as iptables-save. */
const MAX_PASTE_BYTES = 64 << 20

function parseDump(source: DumpSource, name: string, paste: NormalisedPaste | undefined): IptablesSave {
  try {
    return IptablesSave.parse(source, {requireTables: true})
  } catch (e) {
    throw new DiagnosisError(
      `${name === '-' ? 'stdin' : name}: ${(e instanceof DumpParseError ? inputLineError(e, paste) : (e as Error)).message}`,
    )
  }
}

/** The error with the line of the input, not of the normalised text. */
function inputLineError(e: DumpParseError, paste: NormalisedPaste | undefined): DumpParseError {
  if (!paste || e.line <= 0) return e
  const line = paste.originalLine(e.line)
  return line > 0
    ? new DumpParseError(line, e.reason)
    : new DumpParseError(0, `${e.reason} (in a line the normaliser added)`)
}

/** Trace steps name the input's lines; a line the normaliser added (a hook to the entry chain) is line 0. */
function withInputLines(result: TraceResult, paste: NormalisedPaste, tables: Set<string>): TraceResult {
  return {
    ...result,
    outcomes: result.outcomes.map((o) => ({
      ...o,
      steps: o.steps.map((s) => (tables.has(s.table) && s.line > 0 ? {...s, line: paste.originalLine(s.line)} : s)),
    })),
  }
}

/** For --node: walk the rules of the mode the node runs, decided as `svc` decides it (without the cluster's configuration). */
function nodeTracer(obs: NodeObservation, localAddresses: string[], family: 'ip' | 'ip6'): Tracer {
  const choice = chooseMode(obs, {family, nodeAddress: localAddresses[0]}, undefined)
  if (!choice) throw new DiagnosisError(`${obs.name}: the rules of its kube-proxy mode could not be read`)
  return choice.dataplane.tracer(localAddresses)
}
